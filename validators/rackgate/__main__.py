"""The ``rackgate`` command (its console script, and ``python -m rackgate``).

``rackgate healthcheck ...`` goes straight to the node's health check
(:func:`rackgate.programs.healthcheck.main`: the same parser and function as the
``rackgate-healthcheck`` program), importing only what the health check needs: the standard
library, PyYAML and ``rackgate.health``. The slurm role installs rackgate's wheel on every
compute node into a venv that holds nothing else (``pip --no-deps``, PyYAML from the OS),
so there ``/opt/rackgate-healthcheck/bin/rackgate healthcheck`` works as
``rackgate-healthcheck`` does. Every other subcommand is the full command line
(:func:`rackgate.cli.main.main`); where its dependencies are missing (that venv) it says so in
one line, exit 2, instead of a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

EXIT_CANNOT_RUN = 2


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["healthcheck"]:
        from rackgate.programs.healthcheck import main as healthcheck

        return healthcheck(args[1:], prog="rackgate healthcheck")
    try:
        from rackgate.cli.main import main as full
    except ModuleNotFoundError as exc:
        print(f"rackgate: this Python environment ({sys.prefix}) lacks {exc.name}, which "
              f"rackgate's commands need: install rackgate with its dependencies. Only "
              f"`rackgate healthcheck` (and rackgate-healthcheck) runs without them, as in "
              f"a node's health-check venv.", file=sys.stderr)
        return EXIT_CANNOT_RUN
    return full(args)


if __name__ == "__main__":
    sys.exit(main())
