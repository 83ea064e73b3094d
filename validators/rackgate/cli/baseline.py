"""``rackgate baseline``: profile overrides whose references are what golden nodes measured
in one run or several (``rackgate.baseline``); ``validate``/``judge --overrides FILE`` then
judge against the site's own figures.

A baseline resting on fewer golden nodes or runs than ``--min-nodes``/``--min-runs`` (3 and
2: ``rackgate.baseline_sample`` says why) is refused unless ``--allow-small``, which writes
it marked as such. Each threshold's spread is shown; a spread wider than the band is warned
about on stderr and in the file's header.

Each report is verified first (``rackgate.verify``: its evidence's digests, and the run
judged again from its evidence with its recorded profile): a report that differs is refused,
so a figure edited in report.json never becomes a site reference. The YAML goes to stdout
as written, or to ``-o FILE`` (never over an existing file without ``--force``); what was
baselined and what was left out goes to stderr. Every refusal is one line on stderr naming
the run, node, check or file, with exit 2.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from rackgate.baseline import (
    DEFAULT_TOLERANCE,
    Baseline,
    Baselined,
    baseline_of,
)
from rackgate.baseline_sample import (
    MIN_NODES,
    MIN_NODES_BASIS,
    MIN_RUNS,
    MIN_RUNS_BASIS,
    short_of,
    spread_text,
    wide_spreads,
    with_caveat,
)
from rackgate.cli.common import command, positive_int
from rackgate.figures import figure, with_unit
from rackgate.refusal import Refusal
from rackgate.reports import UnreadableReport, read_report
from rackgate.verify import verify

EXIT_OK, EXIT_CANNOT_RUN = 0, 2
REPORT = "report.json"



class _Dumper(yaml.SafeDumper):
    """Writes a long text (a basis) folded (``>-``), as the shipped profiles do."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value,
                                   style=">" if len(value) > 60 else None)


_Dumper.add_representer(str, _text)


def _comment(text: str, indent: str = "") -> list[str]:
    """``text`` as comment lines of at most ~90 characters; no value can end the comment."""
    return [f"# {indent}{part}" for part in textwrap.wrap(
        " ".join(text.split()), 86 - len(indent), break_long_words=False,
        break_on_hyphens=False)]


def overrides_yaml(b: Baseline, command: str) -> str:
    """The overrides document as YAML, after a header saying what it is, the command that
    wrote it (``command``, one shell line) and how to use it."""
    runs = f"run {b.run_id}" if b.runs == 1 else f"{b.runs} runs {b.run_id}"
    header = [
        *_comment(f"rackgate site baseline: profile overrides from {runs} (profile "
                  f"{b.profile}, sha256 {b.profile_sha256[:12]}), collected {b.collected}."),
        *_comment(f"Golden nodes ({len(b.nodes)}): {', '.join(b.nodes)}."),
        "# Written by:",
        " \\\n".join(_comment(command, "  ")),
        *_comment("Each threshold's ref is the median of what those nodes measured (a check "
                  "across the nodes: the job's one figure); its basis names the run, the "
                  "nodes, the date, the statistic and the spread. The pass band keeps the "
                  f"profile's direction, {figure(100 * b.tolerance)}% from the median, "
                  "widened where a golden node needed it."),
        "# Use it over the same profile (several --overrides merge in the order given):",
        *_comment(f"rackgate validate -i INVENTORY --profile {b.profile} --overrides FILE",
                  "  "),
        "#   rackgate judge RUN_DIR --overrides FILE",
    ]
    if b.left_out:
        header.append("# Not baselined (the profile's thresholds stay):")
        for check, why in b.left_out:
            header += _comment(f"{check}: {why}", "  ")
    for note in b.notes:
        header += _comment(f"Note: {note}")
    body = yaml.dump(b.document(), Dumper=_Dumper, sort_keys=False, width=88,
                     allow_unicode=True)
    return "\n".join(header) + "\n" + body


def tolerance(text: str) -> float:
    """argparse type: a fraction above 0 and below 1 (0.10 = 10 %)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not above 0 and below 1 (0.10: pass "
                                         "at >= 0.9 x the median)")
    return value


def _command(args: argparse.Namespace) -> str:
    """The ``rackgate baseline`` command line that writes this document again."""
    words = ["rackgate", "baseline", *args.run_dirs]
    if args.nodes is not None:
        words += ["--nodes", args.nodes]
    if args.tolerance != DEFAULT_TOLERANCE:
        words += ["--tolerance", f"{args.tolerance:g}"]
    if args.min_nodes != MIN_NODES:
        words += ["--min-nodes", str(args.min_nodes)]
    if args.min_runs != MIN_RUNS:
        words += ["--min-runs", str(args.min_runs)]
    if args.allow_small:
        words.append("--allow-small")
    if args.output:
        words += ["-o", args.output]
    return " ".join(shlex.quote(w) for w in words)


def _source(t: Baselined, b: Baseline) -> str:
    """What a threshold's reference is the median of, as the summary says it."""
    if t.job:
        return "the job's one figure" if len(t.figures) == 1 else \
            f"the median of {len(t.figures)} jobs (one a run)"
    if b.runs == 1:
        return f"the median of {len(t.figures)} node(s)"
    return f"the median of {len(t.figures)} figures ({len(b.nodes)} nodes, {b.runs} runs)"


def _summary(b: Baseline, warnings: Sequence[str] = ()) -> str:
    """What was baselined, on stderr: one line a threshold (its spread included), one line
    for the checks left out, the notes but ``warnings`` (printed after it)."""
    runs = f"run {b.run_id}" if b.runs == 1 else f"{b.runs} runs ({b.run_id})"
    lines = [f"baseline of {runs} from {len(b.nodes)} node(s) ({', '.join(b.nodes)}):"]
    for t in b.thresholds:
        th = t.threshold
        band = " and ".join(
            part for part in (
                None if th.lower_bound is None else f">= {with_unit(th.lower_bound, th.unit)}",
                None if th.upper_bound is None else f"<= {with_unit(th.upper_bound, th.unit)}")
            if part)
        lines.append(f"  {t.check} {t.metric}: ref {with_unit(th.ref, th.unit)}, "
                     f"{_source(t, b)}; pass at {band}; {spread_text(t.spread_pct)}")
    if b.left_out:  # one line: the reasons are in the file's header
        lines.append(f"  not baselined ({len(b.left_out)} check(s), the profile's thresholds "
                     f"stay; why: the file's header): "
                     f"{', '.join(check for check, _ in b.left_out)}")
    lines += [f"  note: {n}" for n in b.notes if n not in warnings]
    lines.append(f"  tolerance {figure(100 * b.tolerance)}%")
    return "\n".join(lines) + "\n"


def _verified(report: Path) -> None:
    """Refuse a report that ``rackgate verify`` does not pass: its figures must be what the
    run's evidence, judged again with the run's profile, says."""
    try:
        v = verify(report)
    except Refusal as exc:
        raise Refusal(f"{report}: cannot verify it against its run: {exc}") from None
    if v.problems:
        raise Refusal(f"{report} is not what run {v.run_dir} judges into from its evidence "
                      f"({len(v.problems)} problem(s); the first: {v.problems[0]}): no "
                      f"baseline from it (rackgate verify {report} lists them)")


def _report(arg: str) -> dict[str, Any]:
    """The verified report of run directory ``arg``."""
    run_dir = Path(arg)
    if not run_dir.is_dir():
        raise Refusal(f"{run_dir} is not a run directory")
    try:
        report, _ = read_report(run_dir)
    except UnreadableReport as exc:
        raise Refusal(str(exc)) from None
    if not isinstance(report, dict):
        raise Refusal(f"{run_dir / REPORT}: not a report document (a {type(report).__name__})")
    _verified(run_dir / REPORT)
    return report


def _enough(made: Baseline, args: argparse.Namespace) -> tuple[Baseline, list[str]]:
    """``made``, refused below the minimums unless ``--allow-small`` (then marked), and
    what to warn of."""
    short = short_of(made, args.min_nodes, args.min_runs)
    if short is None:
        return made, []
    if not args.allow_small:
        raise Refusal(f"a baseline of {short} rests on too little: collect more golden nodes "
                      f"or another run (rackgate baseline RUN_DIR RUN_DIR ... pools runs), or "
                      f"give --allow-small to write it marked as such (rackgate baseline "
                      f"--help says why the minimums)")
    caveat = (f"Made with --allow-small from {short}: a reference that rests on little; "
              f"weigh a failure against it with that in mind")
    return with_caveat(made, caveat), [caveat]


def cmd_baseline(args: argparse.Namespace) -> int:
    reports = [_report(arg) for arg in args.run_dirs]
    nodes = None if args.nodes is None else [n.strip() for n in args.nodes.split(",")
                                             if n.strip()]
    made, warnings = _enough(baseline_of(reports, nodes, args.tolerance), args)
    warnings += wide_spreads(made)
    made = replace(made, notes=tuple(dict.fromkeys((*made.notes, *warnings))))
    text = overrides_yaml(made, _command(args))
    if args.output is None:
        sys.stdout.write(text)
    else:
        target = Path(args.output)
        if target.exists() and not args.force:
            raise Refusal(f"{target} exists: give --force to overwrite it")
        target.write_text(text, encoding="utf-8")
        sys.stderr.write(f"wrote {target}\n")
    sys.stderr.write(_summary(made, warnings))
    for warning in warnings:  # last, where they are seen
        sys.stderr.write(f"rackgate baseline: warning: {warning}\n")
    return EXIT_OK



def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``rackgate baseline`` to the top-level parser."""
    b = command(
        sub, "baseline", summary="profile overrides from a run's golden nodes: their measured "
                                 "figures become the references",
        description="Profile overrides whose references are what the golden nodes of one or "
                    "more judged runs measured (the median over every run, with a pass band "
                    "of --tolerance around it), so that validate and judge --overrides FILE "
                    "judge against the site's own figures. Each report is verified first "
                    "(rackgate verify): a report that differs from its evidence is refused. "
                    "Fewer golden nodes than --min-nodes or runs than --min-runs is refused "
                    "unless --allow-small; each metric's spread across the nodes is shown. "
                    "The YAML goes to stdout or -o FILE; what was baselined and what was left "
                    "out goes to stderr.",
        examples=["rackgate baseline runs/<golden> runs/<golden2> -o site-baseline.yaml",
                  "rackgate baseline runs/<golden> runs/<golden2> --nodes dgx001,dgx002,dgx003 "
                  "--tolerance 0.05 -o site-baseline.yaml",
                  "rackgate validate -i inventory/<site> --profile dgx-h100 --overrides "
                  "site-baseline.yaml"],
        exit_codes=[(EXIT_OK, "the overrides were written"),
                    (EXIT_CANNOT_RUN, "refused: a run without report.json, a report that does "
                                      "not verify, a node not accepted, too few nodes or runs "
                                      "without --allow-small, an existing -o without --force")])
    b.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                   help="judged run directories (their report.json) of the same profile; "
                        "several are pooled: each reference is the median over every run")
    b.add_argument("--nodes", help="the golden nodes, comma-separated; each must be accepted "
                                   "(default: every node of the runs)")
    b.add_argument("--tolerance", type=tolerance, default=DEFAULT_TOLERANCE,
                   help="pass band around the median, as a fraction, in the profile's "
                        "direction (default: 0.10: >= 0.9 x median for a floor); widened "
                        "where a golden node needs it")
    b.add_argument("--min-nodes", type=positive_int, default=MIN_NODES, metavar="N",
                   help=f"refuse a baseline of fewer golden nodes (default: {MIN_NODES}: "
                        f"{MIN_NODES_BASIS})")
    b.add_argument("--min-runs", type=positive_int, default=MIN_RUNS, metavar="N",
                   help=f"refuse a baseline from fewer runs (default: {MIN_RUNS}: "
                        f"{MIN_RUNS_BASIS})")
    b.add_argument("--allow-small", action="store_true",
                   help="write a baseline below --min-nodes or --min-runs anyway, with a "
                        "warning, and say so in its header and every threshold's basis")
    b.add_argument("-o", "--output", help="write the overrides here (default: stdout)")
    b.add_argument("--force", action="store_true", help="overwrite --output")
    b.set_defaults(func=cmd_baseline, one_line=True)
