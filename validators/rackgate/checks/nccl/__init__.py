"""nccl-tests check families: on one node (``local``) and across the nodes through the
scheduler (``fabric``); what their evidence must show besides bandwidth is ``evidence``."""
