"""``validate --retest`` and rackgate's own drains of the nodes it retests.

A drained node takes no job: the readiness guard leaves it out of every job launched
through SLURM (the checks across the nodes; with ``--via slurm``, the nodes' own checks
too), so a repaired node that ``rackgate drain`` took out would be judged ``error`` on
them and drained again. The retest therefore takes back, for its jobs, only the drains
that are rackgate's own for this run, and puts them back where the node still fails:

- :meth:`RetestDrains.lift`, called once just before the retest's first job through SLURM
  (``collect.phases.Collection``): reads the retested nodes' states on the run's launch
  host and resumes each node that this run alone holds (its reason
  ``rackgate/drain[<this run>]: ...``, or an older rackgate's ``rackgate <this run>: ...``)
  and that this run's records (``RUN_DIR/scheduler/``) show it drained. Every other drain
  stays: another run's (also when it shares the node with this run), a person's, the health
  check's, slurmctld's own; the readiness guard leaves those nodes out, as before. The lift
  comes as late as it can (after the nodes' own checks, unless they too run through
  SLURM): a resumed node may take a queued job until the settle.
- :meth:`RetestDrains.settle`, after the retest was judged, or when it failed or was
  stopped after the lift: each node it resumed that the run's report (the newest
  revision written) still REJECTs, whatever for, errors included, is drained again for
  this run with a reason built from that report's findings (never from the earlier
  drain's words: ``slurm.message_for``); a node it ACCEPTs stays in service.

Both record what they ran and did in ``RUN_DIR/scheduler/<UTC stamp>-retest/``, as
``rackgate drain`` does (:mod:`.session`): a later ``drain --resume-passed`` trusts them.
Nothing here prints: each line for the operator goes to ``say``.

>>> from rackgate.scheduler.slurm import NodeState
>>> st = {"n1": NodeState("n1", "drained", "rackgate/drain[r1]: redundancy.psu_ipmi: PSU2"),
...       "n2": NodeState("n2", "drained", "ops: DIMM B3")}
>>> [(d.node, d.action) for d in decide_lift(["n1", "n2"], st, "r1", Records(
...     {"n1": frozenset({st["n1"].reason})}))]
[('n1', 'resume'), ('n2', 'leave')]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from rackgate.collect.stop import Stop
from rackgate.model import describe
from rackgate.scheduler import slurm
from rackgate.scheduler.apply import read_records, run_report
from rackgate.scheduler.drain import FAILED, Decision, Records, decide_slurm, hold_of
from rackgate.scheduler.session import Done, SlurmSession
from rackgate.scheduler.slurm import NodeState
from rackgate.store.manifest import Manifest, new_stamped_dir

FORKS = 20  # the commands all run on the one launch host
Say = Callable[[str], None]


def decide_lift(nodes: Sequence[str], states: Mapping[str, NodeState], run_id: str,
                records: Records) -> list[Decision]:
    """What the retest does with each drained node of ``nodes`` before its jobs: resume
    those this run alone holds and its records show it drained; leave the others."""
    out = []
    for node in nodes:
        st = states.get(node)
        if st is None:
            out.append(Decision(node, "retest", "unknown", "not known to slurmctld (sinfo "
                                "does not list it): nothing done"))
            continue
        if not st.drained:
            continue
        hold = hold_of(node, st.reason, st.free, run_id, records)
        if hold.kind == "rackgate" and hold.runs == (run_id,) and records.shows(node):
            out.append(Decision(node, "retest", "resume", f"this run drained it "
                                f"({st.reason}): resumed for the retest's jobs", st,
                                (tuple(slurm.resume_argv(node)),)))
        else:
            whose = (f"held for rackgate runs {', '.join(hold.runs)} too" if
                     hold.kind == "rackgate" else "not this run's drain")
            out.append(Decision(node, "retest", "leave", f"drained, {whose} ("
                                f"{st.describe()}): left drained, the retest's jobs through "
                                "SLURM run without it", st))
    return out


class RetestDrains:
    """The lift before a retest's jobs and the settle after it (see the module) for the
    ``nodes`` it retests of run ``run_id``, whose SLURM commands run on ``launch``."""

    def __init__(self, run_dir: Path, manifest: Manifest, nodes: Sequence[str],
                 launch: str, inventory: Sequence[str], say: Say) -> None:
        self.run_dir, self.run_id = run_dir, manifest.run_id
        self.manifest, self.nodes, self.launch = manifest, tuple(nodes), launch
        self.inventory, self.say = tuple(inventory), say
        self.lifted: tuple[str, ...] = ()

    def _session(self, stop: Stop) -> SlurmSession:
        return SlurmSession(new_stamped_dir(self.run_dir / "scheduler", "retest"),
                            self.launch, self.inventory, FORKS, stop)

    def lift(self) -> None:
        """Resume this run's own drains of the retested nodes (never raises: a node that
        stays drained is left out of the jobs, as the guard says)."""
        records = read_records(self.run_dir, self.run_id, "slurm")
        try:
            session = self._session(Stop())
            decisions = decide_lift(self.nodes, session.states(self.nodes), self.run_id,
                                    records)
            done = (session.apply(self.run_id, decisions, self.nodes)
                    if any(d.changes for d in decisions) else
                    tuple(Done(d, False, True) for d in decisions))
        except Exception as exc:  # never stops the retest: the guard leaves the nodes out
            self.say(f"SLURM: could not resume this run's drains for the retest: "
                     f"{describe(exc)}; its jobs through SLURM run without the drained nodes")
            return
        self.lifted = tuple(d.decision.node for d in done
                            if d.decision.action == "resume" and d.ran and d.ok)
        for d in done:
            self.say(_lift_line(d))

    def settle(self) -> None:
        """Drain again, for this run, each lifted node its newest report still REJECTs."""
        if not self.lifted:
            return
        lifted, self.lifted = self.lifted, ()
        put_back = (f"rackgate drain {self.run_dir} --include-errors puts it back out of "
                    "service")
        try:
            _, nodes = run_report(self.run_dir, self.manifest)
            mine = [n for n in nodes if n.name in lifted]
            session = self._session(Stop())  # a stopped retest still puts its nodes back
            states = session.states(lifted)
            records = read_records(self.run_dir, self.run_id, "slurm")
            decisions = decide_slurm(mine, states, self.run_id, records, resume_passed=False,
                                     include_errors=True)
            done = session.apply(self.run_id, decisions, lifted)
        except Exception as exc:  # said, with what to run: the reports stand
            self.say(f"SLURM: FAILED to settle {', '.join(lifted)} after the retest "
                     f"({describe(exc)}): {put_back} where it is still rejected")
            return
        for d in done:
            self.say(_settle_line(d, put_back))


def _lift_line(d: Done) -> str:
    dec = d.decision
    if dec.action != "resume":
        return f"SLURM: {dec.node}: {dec.why}"
    if not d.ok:
        return (f"SLURM: {dec.node}: FAILED to resume it for the retest ({d.message}): the "
                "retest's jobs through SLURM run without it")
    return (f"SLURM: {dec.node}: {dec.why}; drained again after the retest if it is still "
            "rejected")


def _settle_line(d: Done, put_back: str) -> str:
    dec = d.decision
    if dec.action == "drain":
        return (f"SLURM: {dec.node}: still rejected, drained again: {dec.reason}" if d.ok else
                f"SLURM: {dec.node}: still rejected, but FAILED to drain it again "
                f"({d.message}): {put_back}")
    if dec.verdict == "ACCEPT" and dec.action == "none":
        return f"SLURM: {dec.node}: passes the retest: stays in service"
    if dec.action in FAILED:
        return f"SLURM: {dec.node}: FAILED to drain it again ({dec.why}): {put_back}"
    return f"SLURM: {dec.node}: {dec.why}"
