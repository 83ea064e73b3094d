"""``rackgate export-metrics RUN [-o FILE]``: a judged run's results as Prometheus text
for node_exporter's textfile collector (rackgate.reports.metrics; docs/metrics.md).

``-o -`` writes to stdout; ``-o DIR`` writes ``DIR/rackgate-acceptance.prom``; ``-o FILE``
writes FILE; without ``-o`` the file goes beside the run's report.json. A file is written
atomically (temporary file in its directory, then a rename), so node_exporter never reads
half of one; the text is checked with promtool's rules before it is written anywhere
(rackgate.exposition), and a report that contradicts itself is refused. One summary line
goes to stderr. Exit 0 when written, 2 when it could not be: one line on stderr naming
the run and the problem (the file it would have replaced stays as it was).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rackgate.cli.common import command
from rackgate.refusal import Refusal
from rackgate.reports import UnreadableReport, read_report
from rackgate.reports.metrics import (
    DEFAULT_FILE,
    MetricsError,
    check_text,
    exposition,
    write_textfile,
)

EXIT_WRITTEN, EXIT_CANNOT_RUN = 0, 2



def _target(run: str, report: Path, output: str | None) -> Path | None:
    """Where the text goes: None for stdout."""
    if output == "-":
        return None
    if output is None:
        return report.parent / DEFAULT_FILE
    path = Path(output)
    if path.is_dir():
        return path / DEFAULT_FILE
    if not path.parent.is_dir():
        raise Refusal(f"run {run}: cannot write {path}: no directory {path.parent}")
    return path


def cmd_export_metrics(args: argparse.Namespace) -> int:
    if not Path(args.run).exists():
        raise Refusal(f"run {args.run}: no such run directory or report.json")
    try:
        doc, report = read_report(args.run)
    except UnreadableReport as exc:
        raise Refusal(f"run {args.run}: {exc}") from None
    try:
        metrics = exposition(doc, str(report))
    except MetricsError as exc:
        raise Refusal(f"run {args.run}: {exc}") from None
    target = _target(args.run, report, args.output)
    text = metrics.text()
    nodes = len(metrics.samples["rackgate_node_verdict"])
    try:
        if target is None:
            check_text(text, "stdout")
            sys.stdout.write(text)
            where = "stdout"
        else:
            write_textfile(target, text)
            where = str(target)
    except MetricsError as exc:
        raise Refusal(f"run {args.run}: {exc}") from None
    except OSError as exc:
        raise Refusal(f"run {args.run}: cannot write {target}: "
                      f"{exc.strerror or exc}") from None
    note = ("" if target is None or target.suffix == ".prom" else
            " (node_exporter's textfile collector reads only *.prom files)")
    sys.stderr.write(f"export-metrics: run {doc['run']['run_id']}: {nodes} node(s), "
                     f"{metrics.series} series -> {where}{note}\n")
    return EXIT_WRITTEN



def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``rackgate export-metrics`` to the top-level parser."""
    e = command(
        sub, "export-metrics", summary="a judged run's verdicts and results as Prometheus "
                                       "text for node_exporter's textfile collector",
        description="A judged run's verdicts and results as Prometheus text (docs/metrics.md) "
                    "for node_exporter's textfile collector. The file is checked with "
                    "promtool's rules and written atomically, so node_exporter never reads "
                    "half of one; a report that contradicts itself is refused. One summary "
                    "line goes to stderr.",
        examples=["rackgate export-metrics runs/<run>",
                  "rackgate export-metrics runs/<run> -o /var/lib/prometheus/node-exporter",
                  "rackgate export-metrics runs/<run>/report.json -o -"],
        exit_codes=[(EXIT_WRITTEN, "written"),
                    (EXIT_CANNOT_RUN, "not written: the run or its report cannot be read or "
                                      "is refused, or the file cannot be written")])
    e.add_argument("run", metavar="RUN", help="the run directory (or its report.json), "
                                              "judged by validate or judge")
    e.add_argument("-o", "--output", metavar="FILE",
                   help=f"where to write: a file, a directory (then {DEFAULT_FILE} in it, "
                        f"e.g. /var/lib/prometheus/node-exporter), or - for stdout "
                        f"(default: {DEFAULT_FILE} in the run directory)")
    e.set_defaults(func=cmd_export_metrics, one_line=True)
