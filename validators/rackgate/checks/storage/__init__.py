"""Check families of the node's storage: fio's bandwidth, IOPS and latency (``fio``) and the
disks' SMART/health state (``disk_health``, with its rules in ``disk_findings``)."""
