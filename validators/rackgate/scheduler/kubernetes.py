"""Kubernetes' side of ``rackgate drain``: the ``kubectl`` commands that read a node's
rackgate taint and keep new pods off a rejected node, as argv lists, and what the read
answers.

A rejected node gets the taint ``rackgate/rejected=<run id>:NoSchedule`` (running pods stay,
as SLURM's drain lets running jobs finish; new pods without a toleration are not placed),
the labels ``rackgate/verdict=REJECT`` and ``rackgate/run=<run id>``, and the annotation
``rackgate/reason=<the drain reason>``: the same reason SLURM gets, whose
``rackgate/drain[<run>,...]`` names every run whose rejection holds the node
(:mod:`rackgate.scheduler.slurm`). The taint's value is a label value (at most 63
characters, alphanumerics at both ends, ``-``, ``_`` and ``.`` between: kubectl refuses
anything else), so it names one run, the first; the annotation takes free text and names
them all. An accepted node is labelled ``rackgate/verdict=ACCEPT``.

``kubectl taint`` removes a taint by key and effect whatever its value, so before any
change the node's taints and its ``rackgate/reason`` are read (:func:`state_argv`, one
``kubectl get`` per node, only those fields): :mod:`rackgate.scheduler.drain` decides from
them. A taint is set without ``--overwrite``, so kubectl refuses it when a
``rackgate/rejected`` taint appeared since the read. Only the ``rackgate/`` keys are ever
written or removed: a cordon or a taint of anyone else is never touched.

>>> taint_argv("dgx01", "r1-demo", None)
['kubectl', 'taint', 'nodes', 'dgx01', 'rackgate/rejected=r1-demo:NoSchedule']
>>> " ".join(untaint_argv("dgx01", "/etc/k.conf"))
'kubectl --kubeconfig /etc/k.conf taint nodes dgx01 rackgate/rejected:NoSchedule-'
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rackgate.commands.launch import NODE_NAME, PATH_NAME, plain
from rackgate.documents import load_json

TAINT = "rackgate/rejected"
EFFECT = "NoSchedule"
REASON = "rackgate/reason"
# A label value (Kubernetes object labels): at most 63 characters, alphanumerics at both
# ends, '-', '_' and '.' between.
LABEL_VALUE = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)\Z")
# A node name (RFC 1123 subdomain, lower case): what kubectl accepts as a node.
K8S_NODE = re.compile(r"[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?\Z")
# kubectl's answer when the taint to remove is not on the node: nothing to do
NOT_TAINTED = "not found"
# The node's name, its taints (JSON, empty when none) and rackgate's reason annotation
# (raw, the rest of the output), one per line; kubectl's JSONPath (kubectl get -o jsonpath)
JSONPATH = ("{.metadata.name}{'\\n'}{.spec.taints}{'\\n'}"
            "{.metadata.annotations['rackgate/reason']}")


@dataclass(frozen=True)
class TaintState:
    """rackgate's keys on one node: whether it has the ``rackgate/rejected:NoSchedule``
    taint, the taint's value, and the ``rackgate/reason`` annotation ("" when none)."""

    node: str
    tainted: bool
    value: str
    reason: str


def _kubectl(kubeconfig: str | None) -> list[str]:
    if kubeconfig is None:
        return ["kubectl"]
    return ["kubectl", "--kubeconfig", plain(PATH_NAME, kubeconfig, "kubeconfig path")]


def _node(node: str) -> str:
    plain(NODE_NAME, node, "Kubernetes node name")
    if not K8S_NODE.fullmatch(node):
        raise ValueError(f"Kubernetes node name {node!r} is not a lower-case RFC 1123 name")
    return node


def _run(run_id: str) -> str:
    if not LABEL_VALUE.fullmatch(run_id):
        raise ValueError(f"run id {run_id!r} cannot be a Kubernetes label value (at most 63 "
                         f"letters, digits, '-', '_', '.')")
    return run_id


def state_argv(node: str, kubeconfig: str | None) -> list[str]:
    """Read the node's taints and rackgate's reason annotation (:func:`parse_state`)."""
    return [*_kubectl(kubeconfig), "get", "nodes", _node(node), "-o", f"jsonpath={JSONPATH}"]


def parse_state(node: str, text: str) -> TaintState:
    """What :func:`state_argv` printed -> the node's TaintState; ValueError naming what is
    not as kubectl prints it.

    >>> parse_state("dgx01", 'dgx01\\n[{"effect":"NoSchedule","key":"rackgate/rejected",'
    ...             '"value":"r1"}]\\nrackgate/drain[r1]: gpu.health: ECC')
    TaintState(node='dgx01', tainted=True, value='r1', reason='rackgate/drain[r1]: gpu.health: ECC')
    """
    name, _, rest = text.partition("\n")  # the collector keeps no trailing line feeds
    taints_text, _, reason = rest.partition("\n")
    if name != node:
        raise ValueError(f"kubectl get nodes {node}: the answer names {name[:80]!r}, not {node}")
    try:
        taints = load_json(taints_text) if taints_text.strip() else []
    except ValueError as exc:
        raise ValueError(f"kubectl get nodes {node}: taints {taints_text[:120]!r} are not "
                         f"JSON: {exc}") from None
    if not isinstance(taints, list) or not all(
            isinstance(t, dict) and isinstance(t.get("key"), str)
            and isinstance(t.get("value", ""), str) for t in taints):
        raise ValueError(f"kubectl get nodes {node}: taints {taints_text[:120]!r} are not a "
                         f"list of taints")
    ours = [t for t in taints if t["key"] == TAINT and t.get("effect") == EFFECT]
    return TaintState(node, bool(ours), ours[0].get("value", "") if ours else "", reason)


def taint_argv(node: str, run_id: str, kubeconfig: str | None, *,
               overwrite: bool = False) -> list[str]:
    """Taint the node for ``run_id``; without ``overwrite`` kubectl refuses when a
    ``rackgate/rejected:NoSchedule`` taint is already there."""
    return [*_kubectl(kubeconfig), "taint", "nodes", _node(node),
            f"{TAINT}={_run(run_id)}:{EFFECT}", *(["--overwrite"] if overwrite else [])]


def untaint_argv(node: str, kubeconfig: str | None) -> list[str]:
    """Remove rackgate's taint (by key and effect: decide from :func:`parse_state` first)."""
    return [*_kubectl(kubeconfig), "taint", "nodes", _node(node), f"{TAINT}:{EFFECT}-"]


def annotate_argv(node: str, reason: str | None, kubeconfig: str | None) -> list[str]:
    """Set rackgate's reason annotation, or remove it (``reason`` None)."""
    what = f"{REASON}-" if reason is None else f"{REASON}={reason}"
    return [*_kubectl(kubeconfig), "annotate", "nodes", _node(node), what,
            *([] if reason is None else ["--overwrite"])]


def label_argv(node: str, verdict: str, run_id: str, kubeconfig: str | None) -> list[str]:
    """The node's verdict in this run, as labels."""
    return [*_kubectl(kubeconfig), "label", "nodes", _node(node), f"rackgate/verdict={verdict}",
            f"rackgate/run={_run(run_id)}", "--overwrite"]
