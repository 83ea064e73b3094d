"""Programs rackgate sends to the nodes as text (``python3 -c``), never installed there.

Each is a standalone script using only what the node's own packages provide (Python's
standard library, and for MPI Debian's python3-mpi4py). A check reads the text with
:func:`source` and puts it in its argv, so the very program that ran is in the evidence.
"""

from __future__ import annotations

from importlib import resources


def source(name: str) -> str:
    """The text of probe ``name`` (``mpi_allreduce`` is ``programs/probes/mpi_allreduce.py``)."""
    return resources.files(__package__).joinpath(f"{name}.py").read_text(encoding="utf-8")
