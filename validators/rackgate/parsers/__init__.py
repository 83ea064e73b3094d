"""Pure parsers: text in, typed record out, or a ParseError naming what was missing.

Parsers import nothing from collection, reports, the CLI or Ansible.
"""

from __future__ import annotations


class ParseError(ValueError):
    """The evidence could not be read as the tool's published format.

    The message names the format and what was wrong; the caller adds the host,
    the check and the evidence file.
    """
