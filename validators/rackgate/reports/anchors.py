"""Ids (and URL fragments) of the HTML report: a check's section and a node's row in it,
each safe in HTML and a URL whatever the check or node is called, and never shared by two
names. The rack view links each node to one of them (rackgate.reports.html).
"""

from __future__ import annotations

import hashlib
import re

_PLAIN = re.compile(r"[A-Za-z0-9_.-]+")


def anchor(text: str) -> str:
    """An HTML id (and URL fragment) for ``text``: itself when it is plain (letters,
    digits, ``._-``), else its plain characters and a hash of the whole, so that two names
    never share an id and nothing needs quoting.

    >>> anchor("fio.seq_read"), anchor("gpu 01"), anchor("gpu_01")
    ('fio.seq_read', 'gpu_01-7c8a98bb', 'gpu_01')
    """
    if _PLAIN.fullmatch(text):
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{re.sub(r'[^A-Za-z0-9_.-]', '_', text)[:40]}-{digest}"


def check_id(check: str) -> str:
    """The id of a check's section.

    >>> check_id("fio.seq_read")
    'check-fio.seq_read'
    """
    return f"check-{anchor(check)}"


def row_id(check: str, node: str) -> str:
    """The id of one node's row in a check's table.

    >>> row_id("fio.seq_read", "gpu01")
    'check-fio.seq_read:gpu01'
    """
    return f"{check_id(check)}:{anchor(node)}"
