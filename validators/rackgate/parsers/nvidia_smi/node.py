"""The tree both readers of ``parsers.nvidia_smi`` build (XML, text): :class:`Node`, one
element or one ``Label : value`` line, keyed by its snake-case name, which
``parsers.nvidia_smi.fields`` reads each GPU's fields from.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from rackgate.parsers import ParseError

_NA = {"", "n/a", "[n/a]", "not supported", "[not supported]", "n/a %"}


class Node:
    """One element (XML) or one ``Label : value`` line (text), keyed by snake-case name.

    A node made by :meth:`of_element` reads its XML element's children only when they are
    first asked for: a report is about 700 elements per GPU, of which ``read_gpu`` reads
    about a hundred, and the rest are never turned into nodes.

    >>> n = Node.of_element(ET.fromstring("<gpu><a> 1 </a><!-- c --><b/></gpu>"))
    >>> n.key, [(c.key, c.value) for c in n.children]
    ('gpu', [('a', '1'), ('b', None)])
    """

    __slots__ = ("_children", "_element", "_index", "_indexed", "_tags", "key", "value")

    def __init__(self, key: str, value: str | None, children: list[Node] | None = None) -> None:
        self.key = key
        self.value = value
        self._children: list[Node] = [] if children is None else children
        self._element: ET.Element | None = None  # an XML node's element, until read whole
        self._index: dict[str, list[Node]] = {}  # the children searched, by key
        self._indexed = -1  # how many children _index covers (the text reader appends)
        self._tags: dict[str, list[ET.Element]] | None = None  # the element's children by tag

    @classmethod
    def of_element(cls, el: ET.Element) -> Node:
        """The node of an XML element (its text stripped; None when blank); comments and
        processing instructions are not children."""
        text = el.text
        node = cls(el.tag, text.strip() if text and text.strip() else None)
        if len(el):
            node._element = el
        return node

    @property
    def children(self) -> list[Node]:
        el = self._element
        if el is not None:
            self._element, self._index, self._indexed = None, {}, -1
            self._children = [Node.of_element(c) for c in el if isinstance(c.tag, str)]
        return self._children

    @children.setter
    def children(self, children: list[Node]) -> None:
        self._element, self._index, self._indexed, self._children = None, {}, -1, children

    def __repr__(self) -> str:
        return f"Node({self.key!r}, {self.value!r}, {self.children!r})"

    def _named(self, key: str) -> list[Node]:
        """The children keyed ``key``, in order. An XML node looks them up in an index of its
        element's children by tag and makes nodes of those only; any other node indexes its
        children when first searched (again when one was added since)."""
        index = self._index
        if self._element is not None:
            found = index.get(key)
            if found is None:
                tags = self._tags
                if tags is None:
                    tags = self._tags = {}
                    for el in self._element:
                        if isinstance(el.tag, str):
                            tags.setdefault(el.tag, []).append(el)
                found = index[key] = [Node.of_element(el) for el in tags.get(key, ())]
            return found
        children = self._children
        if self._indexed != len(children):
            index = self._index = {}
            for c in children:
                index.setdefault(c.key, []).append(c)
            self._indexed = len(children)
        return index.get(key, [])

    def find(self, path: str) -> Node | None:
        """The one node at ``path``; ParseError when a step matches twice (a duplicated
        line or element: which of the two would be the GPU's?)."""
        node: Node | None = self
        for part in path.split("/"):
            if node is None:
                return None
            found = node._named(part)
            if len(found) > 1:
                raise ParseError(f"nvidia-smi: {path} appears {len(found)} times in one block "
                                 "(duplicated output?)")
            node = found[0] if found else None
        return node

    def text(self, *paths: str) -> str | None:
        """Value at the first of ``paths`` that exists and is not N/A."""
        for path in paths:
            node = self.find(path)
            if node is not None and node.value is not None \
                    and node.value.strip().lower() not in _NA:
                return node.value.strip()
        return None
