"""Command lines, built before anything runs: a check's task and the node-lock wrapper it
runs under (``task``), and the launch of a job across the nodes through the cluster's
scheduler (``launch``). Pure argv building, below the checks: no I/O here."""
