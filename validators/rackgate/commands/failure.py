"""Where a command's failure lies (a node that did not answer, Ansible's transport, the control
host's side), in words a person acts on. Pure: text in, text out.

- **A node that did not answer** (Ansible's ``unreachable``: the container is stopped, ssh
  was refused, no route to the host...) is that node's own failure: :func:`did_not_answer`
  turns Ansible's message into one sentence naming the node and the cause, in whole words
  (the evidence keeps Ansible's text in full). The run goes on for the other nodes.
- **A failure on the control host's side** is no verdict on any node: the vault password
  missing or wrong, an inventory variable that does not resolve, a connection plugin
  that is not installed, the control host's Python or tools (:func:`control_side`), or
  the same transport failure on every node of two or more (:func:`same_failure`).
  Collection raises :class:`ControlSideError` with Ansible's own words (file and line
  where Ansible gives them): the CLI exits 2, and no report, history row or drain
  follows.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from rackgate.refusal import Refusal

# Ansible's first words when it could not run its module on a host (2.17 and 2.18: MODULE
# FAILURE; 2.19 names the failed deserialization)
MODULE_FAILED = ("MODULE FAILURE", "Module result deserialization failed")
NOT_EXECUTABLE_RC = (126, 127)  # timeout(1) and shells: cannot execute / not found


class ControlSideError(Refusal):
    """Collection failed on the control host's side, not on a node: nothing is judged
    (CLI exit 2)."""


# (kind, what Ansible's or the transport's text says, the cause in rackgate's words): the
# first that matches names the cause, so the specific causes come before "tmpdir", whose
# message carries the transport's own stderr.
_CAUSES: tuple[tuple[str, re.Pattern[str], str], ...] = tuple(
    (kind, re.compile(pattern, re.I), cause) for kind, pattern, cause in (
        ("container-stopped", r"container state improper|can only create exec sessions on "
                              r"running containers|container \S+ is not running",
         "the container is stopped"),
        ("container-missing", r"no container with (?:name or ID|ID or name)|no such container",
         "the container does not exist"),
        ("refused", r"connection refused", "the connection was refused{where}"),
        ("no-route", r"no route to host", "there is no route to it{where}"),
        ("network", r"network is unreachable", "its network is unreachable{where}"),
        ("timeout", r"timed out", "the connection timed out{where}"),
        ("name", r"could not resolve hostname|name or service not known|"
                 r"temporary failure in name resolution",
         "its name does not resolve{name}"),
        ("login", r"permission denied \(|authentication failed|too many authentication",
         "ssh refused the login (permission denied: the ssh key or ansible_user)"),
        ("host-key", r"host key verification failed|remote host identification has changed",
         "its ssh host key did not verify (known_hosts)"),
        ("closed", r"connection (?:closed|reset) by|broken pipe|kex_exchange_identification",
         "it closed the connection{where}"),
        ("tmpdir", r"failed to create temporary directory",
         "Ansible could not create its temporary directory there{said}"),
    ))
_WHERE = re.compile(r"connect to host (\S+) port (\d+)", re.I)
_NAME = re.compile(r"could not resolve hostname ([^\s:]+)", re.I)
_STDERR = re.compile(r"stderr output: (.+)", re.I | re.S)


def words(text: str, n: int = 200) -> str:
    """``text`` on one line, at most ``n`` characters, cut only between words.

    >>> words("Failed to create temporary directory. In some cases", 30)
    'Failed to create temporary...'
    """
    text = " ".join(text.split())
    if len(text) <= n:
        return text
    cut = text[:n + 1].rsplit(" ", 1)[0] if " " in text[:n + 1] else text[:n]
    return cut.rstrip(" ,;:(") + "..."


def first_sentence(text: str, n: int = 200) -> str:
    """The first sentence of ``text`` (Ansible's first sentence says what went wrong), in
    whole words."""
    text = " ".join(text.split())
    m = re.search(r"(?<=[.!?])\s", text)
    return words(text[:m.start()] if m else text, n)


def cause(message: str) -> tuple[str, str]:
    """(kind, the cause in rackgate's words) of a transport failure Ansible reported.

    >>> cause("Failed to connect to the host via ssh: ssh: connect to host 127.0.0.1 port 9: "
    ...       "Connection refused")
    ('refused', 'the connection was refused (ssh to 127.0.0.1 port 9)')
    """
    for kind, pattern, said in _CAUSES:
        if pattern.search(message):
            where, name = _WHERE.search(message), _NAME.search(message)
            stderr = _STDERR.search(message)
            return kind, said.format(
                where=f" (ssh to {where[1]} port {where[2]})" if where else "",
                name=f" ({name[1]})" if name else "",
                said=f": {first_sentence(stderr[1], 160)}" if stderr else "")
    said = first_sentence(message) or "Ansible gave no reason"
    return f"other: {said}", f"Ansible: {said}"


def did_not_answer(host: str, message: str) -> str:
    """One sentence: ``host`` did not answer, and why (Ansible's ``message`` translated).

    >>> did_not_answer("rg-node02", "Failed to create temporary directory. In some cases, "
    ...     "you may have been able to authenticate... Failed command was: ( umask 77 && "
    ...     "mkdir -p ... ), exited with result 125, stderr output: Error: can only create "
    ...     "exec sessions on running containers: container state improper\\n")
    'rg-node02 did not answer: the container is stopped'
    """
    return f"{host} did not answer: {cause(message)[1]}"


def same_failure(failures: Mapping[str, str]) -> str | None:
    """When the hosts of ``failures`` (host -> Ansible's unreachable message: every node
    the caller tried) are two or more and failed for the same cause, the sentence saying
    so; else None (one node that does not answer is that node's error).

    >>> same_failure({"n1": "connect to host a port 22: Connection refused"}) is None
    True
    """
    kinds = {cause(m)[0] for m in failures.values()}
    if len(failures) < 2 or len(kinds) != 1:
        return None
    hosts = sorted(failures)
    host, message = hosts[0], failures[hosts[0]]
    return (f"no node answered, all {len(hosts)} for the same cause "
            f"({did_not_answer(host, message)}, and the others alike): nothing was "
            f"collected, so nothing is judged. Ansible said: {words(message, 1000)}")


# Ansible's words when the cause is on the control host: the vault, an inventory variable
# that does not resolve, a connection plugin that is not there, a module that could not
# start on the control host.
_CONTROL = re.compile(
    r"vault secrets?|decrypt|vault password|vault-id|vault format|"
    r"connection plugin|invalid connection|"
    r"is undefined|undefined variable|error while evaluating conditional|"
    r"template error|templating", re.I)


def control_side(message: str) -> bool:
    """Whether Ansible's ``message`` on a failed task says the control host's side failed
    (the vault, the inventory's variables, a connection plugin).

    >>> control_side("Attempting to decrypt but no vault secrets found. "
    ...              "Origin: inventory/demo/group_vars/compute/vault.yml:4")
    True
    >>> control_side("non-zero return code")
    False
    """
    return bool(_CONTROL.search(message))


def hint(message: str) -> str:
    """What to do about a control-side ``message``, when rackgate knows."""
    if re.search(r"vault|decrypt", message, re.I):
        return (" (the vault password: set ANSIBLE_VAULT_IDENTITY_LIST, or "
                "vault_identity_list in ansible.cfg, to the vault id and password file of "
                "this inventory)")
    if re.search(r"connection plugin", message, re.I):
        return " (install the collection that provides it on the control host)"
    return ""


def control_failure(failures: Sequence[tuple[str, str, str]],
                    origins: Sequence[str] = ()) -> str:
    """What the CLI says of control-side ``failures`` ((host, task, Ansible's words) each):
    Ansible's words once per different message, with the hosts and task they came from,
    and where Ansible located the cause (``origins``: FILE:LINE:COL).

    >>> print(control_failure([("n1", "T", "Attempting to decrypt."),
    ...                        ("n2", "T", "Attempting to decrypt.")], ["v.yml:4:24"]))
    collection failed on the control host's side, not on a node: nothing is judged.
    Ansible said (n1, n2; task T): Attempting to decrypt. Origin: v.yml:4:24 (the vault \
password: set ANSIBLE_VAULT_IDENTITY_LIST, or vault_identity_list in ansible.cfg, to the \
vault id and password file of this inventory)
    """
    by_words: dict[str, list[tuple[str, str]]] = {}
    for host, task, said in failures:
        by_words.setdefault(said.strip(), []).append((host, task))
    parts = []
    for said, seen in by_words.items():
        hosts = ", ".join(dict.fromkeys(h for h, _ in seen))
        tasks = ", ".join(dict.fromkeys(t for _, t in seen))
        where = "".join(f" Origin: {o}" for o in origins if o not in said)
        parts.append(f"Ansible said ({hosts}; task {tasks}): {said}{where}{hint(said)}")
    return ("collection failed on the control host's side, not on a node: nothing is "
            "judged.\n" + "\n".join(parts))


_ERROR_LINE = re.compile(r"^(?:\[ERROR\]|ERROR!)", re.M)


def ansible_errors(output: str, n: int = 3000) -> str:
    """Ansible's error block in its ``output`` (from its first ``[ERROR]`` or ``ERROR!``
    line on, whole lines, at most ``n`` characters), else the end of the output."""
    m = _ERROR_LINE.search(output)
    text = output[m.start():] if m else output
    lines, size = [], 0
    for line in (text.strip().splitlines() if m else text.strip().splitlines()[-15:]):
        size += len(line) + 1
        if size > n:
            break
        lines.append(line.rstrip())
    return "\n".join(lines).strip()
