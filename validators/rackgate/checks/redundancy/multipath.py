"""``redundancy.multipath``: every LUN of the node's storage on its expected healthy paths.

``multipath -ll`` (multipath(8), the device-mapper-multipath topology listing read by
``parsers.multipath``): the LUNs the profile expects (``params.wwids`` or
``params.lun_count``: ``hardware.storage`` gives only the paths per LUN) each have a map
with ``multipath_paths_per_lun`` healthy paths and none failed; no map is foreign.

The command is ``multipath -ll`` because only it runs the path checkers: ``multipath -l``
reads sysfs and device-mapper alone, and device-mapper fails a path only once I/O on it
failed or multipathd failed it, so an ``active`` path of ``-l`` may be one whose link is
gone. A listing whose every checker state is ``undef`` (``-l``'s, or ``-ll`` where no
checker could run) is therefore never a ``pass``: a failed, offline or missing path still
fails, and with none of those the judgement is ``warn``, "checker not run", saying to
collect with ``multipath -ll``. Where checkers ran, a path left ``undef`` is not healthy.

>>> from rackgate.profile import StorageSpec
>>> hw = Hardware(storage=StorageSpec(multipath_paths_per_lun=2, source="array vendor guide"))
>>> judge_multipath(MultipathTopology(maps=()), MultipathParams(lun_count=1), {}, hw).message
'no multipath map, expected 1 LUNs with 2 paths each'
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import Field, model_validator

from rackgate.checks.shared.base import NodeCheck, Params, Scope
from rackgate.model import Judgement, Status
from rackgate.parsers.multipath import MultipathMap, MultipathTopology, parse_multipath_ll
from rackgate.profile import Hardware, Threshold

# a WWID as multipath shows it; inner spaces are kept (a SCSI T10 vendor ID designator,
# "1IET     00080001", as udev gives it), so a profile lists it quoted, spaces and all
_WWID = r"^[A-Za-z0-9._:-](?:[A-Za-z0-9._: -]{0,126}[A-Za-z0-9._:-])?$"


def _shown(name: str) -> str:
    """A map name or WWID in a message: quoted when it holds spaces, so they can be seen.

    >>> _shown("mpatha"), _shown("1IET     00080001")
    ('mpatha', "'1IET     00080001'")
    """
    return repr(name) if any(c.isspace() for c in name) else name


class MultipathParams(Params):
    """Which LUNs the node must see: their WWIDs (best: a missing or foreign LUN is named)
    or at least how many. ``hardware.storage`` says only the paths per LUN, so without one
    of these a LUN whose whole map is gone could not be noticed: the judge then errors."""

    wwids: list[str] = Field(default_factory=list,
                             description="WWIDs of the LUNs every node must have mapped")
    lun_count: int | None = Field(default=None, ge=1, description="how many LUNs (maps) "
                                  "every node must have, when their WWIDs vary per node")

    @model_validator(mode="after")
    def _consistent(self) -> MultipathParams:
        bad = [w for w in self.wwids if not re.match(_WWID, w)]
        if bad:
            raise ValueError(f"not multipath WWIDs: {bad}")
        twice = sorted({w for w in self.wwids if self.wwids.count(w) > 1})
        if twice:
            raise ValueError(f"WWIDs listed twice: {twice}")
        if self.wwids and self.lun_count is not None and self.lun_count != len(self.wwids):
            raise ValueError(f"lun_count {self.lun_count} differs from the {len(self.wwids)} "
                             "WWIDs listed")
        return self


def _label(m: MultipathMap) -> str:
    """``mpatha (3600a...)``, or the WWID alone when the map is named by it."""
    return _shown(m.name) if m.name == m.wwid else f"{_shown(m.name)} ({_shown(m.wwid)})"


def multipath_command(params: MultipathParams, hostvars: Mapping[str, Any]) -> list[str]:
    return ["multipath", "-ll"]


def judge_multipath(topo: MultipathTopology, params: MultipathParams,
                    thresholds: Mapping[str, Threshold], hardware: Hardware) -> Judgement:
    """Every expected LUN (``params.wwids``, or ``params.lun_count`` of them) has a map,
    no map is foreign, and every map has >= ``multipath_paths_per_lun`` healthy paths and
    none unhealthy; from a listing without checker states (``multipath -l``) the paths
    device-mapper has active count, and the best verdict is ``warn``. A path or map listed
    twice is refused by the parser."""
    assert hardware.storage is not None and hardware.storage.multipath_paths_per_lun
    want = hardware.storage.multipath_paths_per_lun
    luns = f"LUNs {', '.join(map(_shown, params.wwids))}" if params.wwids else \
        f"{params.lun_count} LUNs" if params.lun_count else "the expected LUNs"
    expected = f"{luns}, each with >= {want} active/ready paths, none failed"
    details: dict[str, float | str] = {"maps": len(topo.maps)}
    if not params.wwids and params.lun_count is None:
        return Judgement(Status.ERROR, "the profile does not say which LUNs to expect (set "
                         "checks.redundancy.multipath.params.wwids or lun_count): a LUN "
                         "whose whole map is gone could not be noticed", expected=expected,
                         details=details)
    if not topo.maps:
        return Judgement(Status.FAIL, f"no multipath map, expected {luns} with {want} paths "
                         "each", 0.0, "paths", expected, details=details)
    fails: list[str] = []
    if params.wwids:
        found = {m.wwid for m in topo.maps}
        fails += [f"LUN {_shown(w)}: no multipath map" for w in params.wwids
                  if w not in found]
        fails += [f"{_label(m)}: not an expected LUN" for m in topo.maps
                  if m.wwid not in params.wwids]
    elif params.lun_count is not None and len(topo.maps) != params.lun_count:
        fails.append(f"{len(topo.maps)} multipath map(s) "
                     f"({', '.join(_shown(m.name) for m in topo.maps)}), expected "
                     f"{params.lun_count}")
    unrun = not topo.checkers_run  # no checker ran: dm's active paths count, unproven
    usable = {m.name: [p for p in m.paths if p.healthy or (unrun and p.unchecked)]
              for m in topo.maps}
    kind = "active paths (checker not run)" if unrun else "healthy paths"
    for m in topo.maps:
        bad = [f"{p.device} ({p.hctl}) {p.dm_state} {p.path_state} {p.online_state}".rstrip()
               for p in m.paths if p not in usable[m.name]]
        if len(usable[m.name]) < want or bad:
            fails.append(f"{_label(m)}: {len(usable[m.name])}/{want} {kind}"
                         + (f", not healthy: {', '.join(bad)}" if bad else ""))
    least = float(min(len(paths) for paths in usable.values()))
    unrun_note = ("checker not run: every path's checker state is 'undef' (as 'multipath "
                  "-l' prints, reading only sysfs and device-mapper): collect with "
                  "'multipath -ll', the check's command, to have the paths tested")
    if unrun:
        details["checker"] = "not run"
    if fails:
        return Judgement(Status.FAIL, "; ".join(fails + ([unrun_note] if unrun else [])),
                         least, "paths", expected, details=details)
    if unrun:
        return Judgement(Status.WARN, f"{len(topo.maps)} map(s), each with >= {want} paths "
                         f"device-mapper has active, none tested: {unrun_note}", least,
                         "paths", expected, details=details)
    return Judgement(Status.PASS, f"{len(topo.maps)} map(s), each with >= {want} healthy "
                     "paths", least, "paths", expected, details=details)


def _multipath_applies(hw: Hardware) -> str | None:
    if hw.storage is None or hw.storage.multipath_paths_per_lun is None:
        return "the profile expects no multipath storage (storage.multipath_paths_per_lun unset)"
    return None


CHECK = NodeCheck(
    name="redundancy.multipath",
    scope=Scope.NODE,
    tags=frozenset({"redundancy", "storage", "multipath"}),
    description="Every multipath LUN has its expected healthy paths (multipath -ll)",
    params_model=MultipathParams,
    metrics=frozenset(),
    command=multipath_command,
    parse=parse_multipath_ll,
    judge=judge_multipath,
    applies=_multipath_applies,
)

__all__ = ["CHECK", "MultipathParams", "judge_multipath", "multipath_command"]
