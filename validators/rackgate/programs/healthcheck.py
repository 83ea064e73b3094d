"""``rackgate healthcheck``: check this node between jobs, drain it in SLURM when an item
fails and resume it when all pass again (only a drain the health check made itself: its
marker, and the reason it recorded on the node, rackgate.health.RECORD), and leave the
results for node_exporter. slurmd runs it as HealthCheckProgram through
``/usr/local/sbin/rackgate-healthcheck`` (roles/slurm), which passes its own arguments on
(``"$@"``) to the ``rackgate-healthcheck`` entry point (:func:`main`) of a venv that holds
rackgate and nothing else; that venv's ``rackgate healthcheck`` is the same function with
the same parser (``rackgate.__main__``), and so is the full command line's.

Output: one line per item that did not pass, one line for what was done in SLURM, one
summary line. Exit codes: 0 healthy, 1 an item failed (or gave no evidence), 2 the check
could not run (configuration refused) or SLURM could not be read or changed.
This module imports only the standard library, PyYAML, ``rackgate.health`` and
``rackgate.cli.common`` (the help page's form; standard library only).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from rackgate.cli.common import command, epilog, paragraphs
from rackgate.health import REASON_PREFIX
from rackgate.health.config import ConfigError, load_config
from rackgate.health.decide import decide, drain_reason, drained_after, textfile
from rackgate.health.probe import (
    BUDGET_S,
    Budget,
    Node,
    apply,
    read_record,
    run_command,
    run_items,
    slurm_state,
    write_record,
    write_textfile,
)

DEFAULT_CONFIG = "/etc/rackgate/healthcheck.yaml"
TEXTFILE = "rackgate-healthcheck.prom"
EXIT_HEALTHY, EXIT_UNHEALTHY, EXIT_CANNOT_RUN = 0, 1, 2
SUMMARY = "check this node between jobs; drain or resume it in SLURM (HealthCheckProgram)"
# the help page's, for people (never the module's docstring, written for developers)
DESCRIPTION = """\
Check this node between jobs (GPUs, XIDs, InfiniBand ports, mounts, memlock, units, as
the configuration lists them), drain it in SLURM when an item fails and resume it when all
pass again (only a drain of its own), and write rackgate-healthcheck.prom for
node_exporter's textfile collector. slurmd runs it as HealthCheckProgram:
/usr/local/sbin/rackgate-healthcheck, which passes its arguments on. Prints one line per
item that did not pass, one for what was done in SLURM, one summary line."""
# by hand (SLURM neither read nor changed); the same through the node venv's rackgate; what
# slurmd runs (as root, with no arguments)
EXAMPLES = ["rackgate-healthcheck --no-slurm",
            "/opt/rackgate-healthcheck/bin/rackgate healthcheck --no-slurm",
            "/usr/local/sbin/rackgate-healthcheck"]
EXIT_CODES = [(EXIT_HEALTHY, "healthy"),
              (EXIT_UNHEALTHY, "an item failed (or gave no evidence)"),
              (EXIT_CANNOT_RUN, "could not run: the configuration was refused, or SLURM could "
                                "not be read or changed")]


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default=DEFAULT_CONFIG,
                   help=f"the configuration the slurm role writes (default {DEFAULT_CONFIG})")
    p.add_argument("--no-slurm", action="store_true",
                   help="check and write the metrics only: neither read nor change SLURM")
    p.add_argument("--root", default="/", help=argparse.SUPPRESS)  # tests: a fake /proc, /sys


def register(sub: Any) -> None:
    """Add ``healthcheck`` to rackgate's subcommands."""
    p = command(sub, "healthcheck", summary=SUMMARY, description=DESCRIPTION,
                examples=EXAMPLES, exit_codes=EXIT_CODES)
    _add_arguments(p)
    p.set_defaults(func=lambda args: healthcheck(args, sys.stdout))


def healthcheck(args: argparse.Namespace, out: TextIO) -> int:
    started, now = time.monotonic(), time.time()
    try:
        text = Path(args.config).read_text(encoding="utf-8")
        cfg = load_config(text, args.config)
    except (OSError, UnicodeDecodeError) as exc:
        print(f"{REASON_PREFIX}cannot read {args.config}: {exc}", file=out)
        return EXIT_CANNOT_RUN
    except ConfigError as exc:
        print(f"{REASON_PREFIX}configuration refused: {exc}", file=out)
        return EXIT_CANNOT_RUN
    budget, node = Budget(BUDGET_S), Node(Path(args.root), run_command)
    results = run_items(cfg, node, budget)
    for r in results:
        if not r.health.ok:
            print(r.line(cfg.node_name), file=out)
    reason, slurm_trouble, drained = drain_reason(results), None, False
    if not args.no_slurm:
        slurm_trouble, drained = _slurm(cfg.node_name, reason, Path(args.root), node, budget,
                                        out)
        if slurm_trouble:
            print(f"{REASON_PREFIX}{cfg.node_name}: SLURM: {slurm_trouble}", file=out)
    duration = time.monotonic() - started
    directory = Path(args.root) / cfg.textfile_dir.lstrip("/")
    if directory.is_dir():
        try:
            write_textfile(directory, TEXTFILE, textfile(results, drained, now, duration))
        except (OSError, ValueError) as exc:
            print(f"{REASON_PREFIX}{cfg.node_name}: cannot write {directory / TEXTFILE}: "
                  f"{exc}", file=out)
    else:
        print(f"{REASON_PREFIX}{cfg.node_name}: textfile directory {cfg.textfile_dir} is "
              "absent (no node_exporter here?): metrics not written", file=out)
    bad = sum(not r.health.ok for r in results)
    print(f"{REASON_PREFIX}{cfg.node_name}: {'healthy' if not bad else f'{bad} items failed'}"
          f" ({len(results)} items, {sum(r.health.name == 'SKIP' for r in results)} skipped)"
          f" in {duration:.2f} s", file=out)
    if reason is not None:
        return EXIT_UNHEALTHY
    return EXIT_CANNOT_RUN if slurm_trouble else EXIT_HEALTHY


def _slurm(name: str, reason: str | None, root: Path, node: Node, budget: Budget,
           out: TextIO) -> tuple[str | None, bool]:
    """Drain, resume or leave the node; what went wrong (None: nothing) and whether it is
    drained with the health check's reason afterwards. The reason is recorded on the node
    before a drain and the record removed after a resume: what makes a drain its own."""
    try:
        state = slurm_state(name, node, budget)
        recorded = read_record(root)
    except (ValueError, OSError) as exc:
        return f"cannot read the node's state or the health check's record: {exc}", False
    decision = decide(state, reason, recorded)
    trouble = None
    if decision.action == "drain":
        try:
            write_record(root, reason)
        except OSError as exc:  # drained all the same: an unhealthy node takes no job
            trouble = f"cannot record the drain's reason ({exc}): resume it by hand"
    failed = apply(decision.action, name, reason, node, budget)
    if decision.action == "resume" and failed is None:
        try:
            write_record(root, None)
        except OSError as exc:
            trouble = f"cannot remove the record of the drain: {exc}"
    drained = drained_after(state, decision, failed is None, recorded)
    done = {"drain": "drained", "resume": "resumed", "none": "left as it is"}
    did = done[decision.action] if failed is None else f"FAILED to {decision.action}"
    print(f"{REASON_PREFIX}{name}: SLURM: {did}: {decision.why}"
          + (f" ({reason})" if decision.action == "drain" else ""), file=out)
    return failed or trouble, drained


def main(argv: Sequence[str] | None = None, prog: str = "rackgate-healthcheck") -> int:
    """The health check's entry point: ``rackgate-healthcheck`` and, in the node's venv,
    ``rackgate healthcheck`` (``prog``). ``--help`` prints the help and runs nothing."""
    p = argparse.ArgumentParser(prog=prog, description=paragraphs(DESCRIPTION),
                                epilog=epilog(EXAMPLES, EXIT_CODES),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_arguments(p)
    return healthcheck(p.parse_args(argv), sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
