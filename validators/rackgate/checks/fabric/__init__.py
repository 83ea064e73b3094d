"""Check families of the compute fabric: on each node (``ports``, ``nic_pcie``,
``roce_lossless``), between node pairs (``pairwise``), and of the whole fabric against its
plan, queried from the fabric host (``as_built``, ``links``, ``errors``, ``sm``, with what
they share in ``query``)."""
