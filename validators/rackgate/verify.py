"""``rackgate verify``: does a report say what its run's evidence says?

Two questions, both answered from the run directory beside the report (or the one it
names: ``reports.verify.evidence_dir``):

- every evidence file the report names still hashes to the sha256 it recorded
  (``reports.verify.check_digests``);
- the run, judged again from its manifest and evidence with the profile the run recorded
  and each node's recorded overrides (``rejudge.rejudged_report``: what ``rackgate judge``
  would write now, written nowhere), gives the same report: every node, every result,
  every verdict, figure, evidence path, digest and attempt, the manifest and the profile
  (``reports.verify.differences``). A node or result removed, added or edited, an
  evidence path nulled, a report of an earlier revision, evidence the manifest does not
  list: each is a problem naming the node, the check and the field.

A report judged with ``--profile`` or ``--overrides`` is verified with the same ones.
``rackgate baseline`` runs this first and refuses a report that does not pass.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rackgate.profile import Profile
from rackgate.rejudge import rejudged_report
from rackgate.reports.verify import check_digests, differences, evidence_dir, read_verified
from rackgate.reports.write import json_safe


@dataclass(frozen=True)
class Verification:
    """What ``rackgate verify`` found."""

    report: Path
    run_dir: Path  # where the evidence and the manifest were read
    evidence_files: int  # evidence files whose sha256 was checked
    results: int  # results the run was judged into again
    problems: tuple[str, ...]

    @property
    def verified(self) -> bool:
        """True when nothing differs and at least one evidence file was checked."""
        return not self.problems and self.evidence_files > 0


def verify(report_json: Path, profile: Profile | None = None,
           overrides_files: Sequence[Path] = ()) -> Verification:
    """Verify ``report_json`` against its run (module docstring); ``profile`` and
    ``overrides_files`` as given to the ``rackgate judge`` that wrote it. Refusal when
    the report or the run's manifest cannot be read."""
    doc = read_verified(report_json)
    checked, problems = check_digests(report_json, doc)
    run_dir = evidence_dir(report_json, doc)
    # as report.json holds it: JSON types, non-finite figures null (reports.write)
    rejudged = json.loads(json.dumps(json_safe(rejudged_report(run_dir, profile,
                                                               overrides_files))))
    problems += differences(doc, rejudged)
    return Verification(report_json, run_dir, checked,
                        sum(len(n["results"]) for n in rejudged["nodes"]), tuple(problems))
