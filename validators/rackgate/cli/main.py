"""rackgate's command line (the only layer that prints): the top-level parser, each
subcommand registered by its own module (``register(sub)``, with its description, examples
and exit codes), and the one place a refusal becomes a line on stderr and exit 2.

Exit codes follow each command's help; 2 is always "could not be done".
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rackgate import __version__
from rackgate.cli import (
    baseline,
    demo,
    diff,
    drain,
    fabric,
    history,
    judge,
    list,
    metrics,
    validate,
    verify,
)
from rackgate.cli.common import EXIT_CANNOT_RUN, epilog, paragraphs
from rackgate.programs import healthcheck
from rackgate.refusal import Refusal

# every subcommand, in the order its help lists them
COMMANDS = (validate, judge, history, verify, demo, list, fabric, drain, baseline, diff,
            metrics, healthcheck)

DESCRIPTION = """\
rackgate decides, with evidence, whether a GPU rack may enter production: it collects
evidence on the nodes (over Ansible, or as one SLURM job), judges it against a hardware
profile's thresholds, and writes the reports (HTML, JSON, JUnit XML, summary.md) and a
verdict per node and for the rack. Every subcommand has its own help: rackgate COMMAND
--help."""
RACK_DAY = ["rackgate validate -i inventory/<site> --profile <profile> --plan",
            "rackgate validate -i inventory/<site> --profile <profile>",
            "rackgate drain runs/<run>",
            "rackgate validate --retest runs/<run>",
            "rackgate diff runs/<before> runs/<after>",
            "rackgate history"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rackgate", description=paragraphs(DESCRIPTION),
                                epilog=epilog(RACK_DAY, [
                                    (0, "done; validate and judge: the rack is accepted"),
                                    (1, "validate and judge: the rack is rejected (each "
                                        "command's help says what its codes mean)"),
                                    (EXIT_CANNOT_RUN, "could not run")]),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"rackgate {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS:
        module.register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    where = getattr(args, "where", None) or f"rackgate {args.command}"
    try:
        code: int = args.func(args)
        return code
    except Refusal as exc:
        # a command whose refusals quote no tool output says them in one line
        text = " ".join(str(exc).split()) if getattr(args, "one_line", False) else str(exc)
        sys.stderr.write(f"{where}: {text}\n")
    except OSError as exc:  # a runs directory that is a file, a disk that is full...
        at = f" {exc.filename}" if exc.filename else ""
        sys.stderr.write(f"{where}: cannot use{at}: {exc.strerror or exc}\n")
    except KeyboardInterrupt:
        sys.stderr.write(f"{where}: interrupted\n")
    return EXIT_CANNOT_RUN


if __name__ == "__main__":
    sys.exit(main())
