"""Check families of the GPUs: health and counters (``health``), topology, NVLink and DCGM
(``topology``, with ``nvlink_links``, ``nvlink_topology`` and ``dcgm_evidence``), NVLink
error counters (``nvlink_errors``) and copy bandwidth (``nvbandwidth``)."""
