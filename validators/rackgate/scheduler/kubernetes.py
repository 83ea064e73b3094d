"""Kubernetes' side of ``rackgate drain``: the ``kubectl`` commands that keep new pods off a
rejected node and say why, as argv lists.

A rejected node gets the taint ``rackgate/rejected=<run id>:NoSchedule`` (running pods stay,
as SLURM's drain lets running jobs finish; new pods without a toleration are not placed),
the labels ``rackgate/verdict=REJECT`` and ``rackgate/run=<run id>``, and the annotation
``rackgate/reason=<the drain reason>`` (annotations take free text; label values are at
most 63 plain characters). An accepted node is labelled ``rackgate/verdict=ACCEPT``; with
``--resume-passed`` rackgate's own taint is removed (``rackgate/rejected:NoSchedule-``).
Only the ``rackgate/`` keys are ever written or removed: a cordon or a taint of anyone
else is never touched.

>>> reject_argvs("dgx01", "r1-demo", "rackgate r1-demo: gpu.health: ECC", None)[0]
['kubectl', 'taint', 'nodes', 'dgx01', 'rackgate/rejected=r1-demo:NoSchedule', '--overwrite']
>>> " ".join(resume_argvs("dgx01", "r1-demo", "/etc/k.conf")[0])
'kubectl --kubeconfig /etc/k.conf taint nodes dgx01 rackgate/rejected:NoSchedule-'
"""

from __future__ import annotations

import re

from rackgate.collect.launch import NODE_NAME, PATH_NAME, plain

TAINT = "rackgate/rejected"
EFFECT = "NoSchedule"
# A label value (Kubernetes object labels): at most 63 characters, alphanumerics at both
# ends, '-', '_' and '.' between.
LABEL_VALUE = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)\Z")
# A node name (RFC 1123 subdomain, lower case): what kubectl accepts as a node.
K8S_NODE = re.compile(r"[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?\Z")
# kubectl's answer when the taint to remove is not on the node: nothing to do
NOT_TAINTED = "not found"


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


def reject_argvs(node: str, run_id: str, reason: str, kubeconfig: str | None) -> list[list[str]]:
    """Taint, label and annotate a rejected node."""
    k, n, run = _kubectl(kubeconfig), _node(node), _run(run_id)
    return [[*k, "taint", "nodes", n, f"{TAINT}={run}:{EFFECT}", "--overwrite"],
            [*k, "label", "nodes", n, "rackgate/verdict=REJECT", f"rackgate/run={run}",
             "--overwrite"],
            [*k, "annotate", "nodes", n, f"rackgate/reason={reason}", "--overwrite"]]


def accept_argvs(node: str, run_id: str, kubeconfig: str | None) -> list[list[str]]:
    """Label an accepted node (its taint, if rackgate set one, stays: see resume_argvs)."""
    k, n, run = _kubectl(kubeconfig), _node(node), _run(run_id)
    return [[*k, "label", "nodes", n, "rackgate/verdict=ACCEPT", f"rackgate/run={run}",
             "--overwrite"]]


def resume_argvs(node: str, run_id: str, kubeconfig: str | None) -> list[list[str]]:
    """Remove rackgate's taint from a node that now passes, then label it accepted."""
    k, n = _kubectl(kubeconfig), _node(node)
    return [[*k, "taint", "nodes", n, f"{TAINT}:{EFFECT}-"],
            *accept_argvs(node, run_id, kubeconfig)]
