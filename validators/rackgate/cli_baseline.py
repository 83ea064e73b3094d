"""``rackgate baseline``: profile overrides whose references are what a run's golden nodes
measured (``rackgate.baseline``); ``validate``/``judge --overrides FILE`` then judge against
the site's own figures.

The report is verified first (``rackgate.verify``: its evidence's digests, and the run
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
from pathlib import Path

import yaml

from rackgate.baseline import DEFAULT_TOLERANCE, Baseline, BaselineError, baseline
from rackgate.cli_common import command
from rackgate.figures import figure, with_unit
from rackgate.reports import UnreadableReport, read_report
from rackgate.store.manifest import RunError
from rackgate.verify import verify

EXIT_OK, EXIT_CANNOT_RUN = 0, 2
REPORT = "report.json"


class Refused(Exception):
    """What ``rackgate baseline`` refuses to do, said in one line."""


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
    header = [
        *_comment(f"rackgate site baseline: profile overrides from run {b.run_id} (profile "
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
    words = ["rackgate", "baseline", args.run_dir]
    if args.nodes is not None:
        words += ["--nodes", args.nodes]
    if args.tolerance != DEFAULT_TOLERANCE:
        words += ["--tolerance", f"{args.tolerance:g}"]
    if args.output:
        words += ["-o", args.output]
    return " ".join(shlex.quote(w) for w in words)


def _summary(b: Baseline) -> str:
    lines = [f"baseline of run {b.run_id} from {len(b.nodes)} node(s) "
             f"({', '.join(b.nodes)}):"]
    for t in b.thresholds:
        th = t.threshold
        band = " and ".join(
            part for part in (
                None if th.lower_bound is None else f">= {with_unit(th.lower_bound, th.unit)}",
                None if th.upper_bound is None else f"<= {with_unit(th.upper_bound, th.unit)}")
            if part)
        source = "the job's one figure" if t.job else f"the median of {len(t.figures)} node(s)"
        lines.append(f"  {t.check} {t.metric}: ref {with_unit(th.ref, th.unit)}, {source}; "
                     f"pass at {band}")
    lines += [f"  not baselined: {check}: {why}" for check, why in b.left_out]
    lines += [f"  note: {n}" for n in b.notes]
    lines.append(f"  tolerance {figure(100 * b.tolerance)}%")
    return "\n".join(lines) + "\n"


def _verified(report: Path) -> None:
    """Refuse a report that ``rackgate verify`` does not pass: its figures must be what the
    run's evidence, judged again with the run's profile, says."""
    try:
        v = verify(report)
    except RunError as exc:
        raise Refused(f"{report}: cannot verify it against its run: {exc}") from None
    if v.problems:
        raise Refused(f"{report} is not what run {v.run_dir} judges into from its evidence "
                      f"({len(v.problems)} problem(s); the first: {v.problems[0]}): no "
                      f"baseline from it (rackgate verify {report} lists them)")


def cmd_baseline(args: argparse.Namespace) -> int:
    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        raise Refused(f"{run_dir} is not a run directory")
    try:
        report, _ = read_report(run_dir)
    except UnreadableReport as exc:
        raise Refused(str(exc)) from None
    if not isinstance(report, dict):
        raise Refused(f"{run_dir / REPORT}: not a report document (a {type(report).__name__})")
    _verified(run_dir / REPORT)
    nodes = None if args.nodes is None else [n.strip() for n in args.nodes.split(",")
                                             if n.strip()]
    made = baseline(report, nodes, args.tolerance)
    text = overrides_yaml(made, _command(args))
    if args.output is None:
        sys.stdout.write(text)
    else:
        target = Path(args.output)
        if target.exists() and not args.force:
            raise Refused(f"{target} exists: give --force to overwrite it")
        target.write_text(text, encoding="utf-8")
        sys.stderr.write(f"wrote {target}\n")
    sys.stderr.write(_summary(made))
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    """Write a baseline; a refusal is one line on stderr and exit 2."""
    try:
        return cmd_baseline(args)
    except (BaselineError, Refused) as exc:
        sys.stderr.write(f"rackgate baseline: {' '.join(str(exc).split())}\n")
        return EXIT_CANNOT_RUN


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``rackgate baseline`` to the top-level parser."""
    b = command(
        sub, "baseline", summary="profile overrides from a run's golden nodes: their measured "
                                 "figures become the references",
        description="Profile overrides whose references are what a run's golden nodes "
                    "measured (their median, with a pass band of --tolerance around it), so "
                    "that validate and judge --overrides FILE judge against the site's own "
                    "figures. The report is verified first (rackgate verify): a report that "
                    "differs from its evidence is refused. The YAML goes to stdout or -o "
                    "FILE; what was baselined and what was left out goes to stderr.",
        examples=["rackgate baseline runs/<golden> -o site-baseline.yaml",
                  "rackgate baseline runs/<golden> --nodes dgx001,dgx002,dgx003 "
                  "--tolerance 0.05 -o site-baseline.yaml",
                  "rackgate validate -i inventory/<site> --profile dgx-h100 --overrides "
                  "site-baseline.yaml"],
        exit_codes=[(EXIT_OK, "the overrides were written"),
                    (EXIT_CANNOT_RUN, "refused: a run without report.json, a report that does "
                                      "not verify, a node not accepted, an existing -o "
                                      "without --force")])
    b.add_argument("run_dir", help="a judged run directory (its report.json)")
    b.add_argument("--nodes", help="the golden nodes, comma-separated; each must be accepted "
                                   "(default: every node of the run)")
    b.add_argument("--tolerance", type=tolerance, default=DEFAULT_TOLERANCE,
                   help="pass band around the median, as a fraction, in the profile's "
                        "direction (default: 0.10: >= 0.9 x median for a floor); widened "
                        "where a golden node needs it")
    b.add_argument("-o", "--output", help="write the overrides here (default: stdout)")
    b.add_argument("--force", action="store_true", help="overwrite --output")
    b.set_defaults(func=run)
