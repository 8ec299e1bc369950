"""The JUnit reader for any XML (:mod:`pipeline.results.junit`'s second reader, for what the
plain-subset scanner declines): a streaming state machine on expat's own start/end handlers.
No element tree is built and nothing of an element is kept after its end; its per-element
Python callbacks cost as much as reading the results (0.6x junitparser's time).

A state machine over the start events, with no Python call at an element's end: the open
elements' tags are a list the start handler appends to, expat's end callback is its
``remove`` (of any equal tag: only the count matters), its length the depth. A file deeper
than MAX_DEPTH raises :class:`TooDeep` at its first element too deep. A <testcase> is read at
the next start outside it (it has closed then) or after the last event: one Python call per
element in all, nothing kept of an element but a testcase's result. Only the result elements
directly inside a testcase (<failure>, <rerun>...) are looked at, their text only when they
have no ``message`` (then expat calls back with text, and at ends, until that element
closes). A DOCTYPE that declares an entity or names an external DTD raises :class:`Refused`
before the first element (expat calls back as the declaration is read, never expanding it).

Containers (any element outside a testcase) are numbered in document order; a testcase
belongs to its parent's number (0 for a root testcase), which tells the two rerun shapes
apart (``junit._fold``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from xml.parsers import expat

from pipeline.results.junit_limits import MAX_DEPTH
from pipeline.results.junit_plain import AddRows, Row

_CHUNK = 1 << 20
# A result element directly inside a <testcase>: [tag, message attribute (None when it has
# none), type attribute, its text pieces (collected only when there is no message)]
_Child = list[Any]
# A tag no XML can hold (it has no NUL): start(_FLUSH, []) reads the last testcase once the
# file has ended (see stream)
_FLUSH = "\x00"


class TooDeep(Exception):
    """The file nests elements deeper than MAX_DEPTH (raised at the first one too deep)."""


class Refused(Exception):
    """The file's DOCTYPE declares entities or names an external DTD."""


def _refuse_doctype(name: str, system_id: str | None, public_id: str | None, _: int) -> None:
    if system_id or public_id:
        raise Refused(f"its DOCTYPE names an external DTD ({system_id or public_id})")


def _refuse_entity(name: str, *_: object) -> None:
    raise Refused(f"its DOCTYPE declares the entity {name!r}")


def _attr(attrs: list[str], name: str) -> str | None:
    """The value of attribute ``name`` in expat's ordered ``[name, value, ...]`` list."""
    try:
        return attrs[2 * attrs[::2].index(name) + 1]
    except ValueError:
        return None


def _row(a: list[str], children: list[_Child]) -> Row:
    """A closed testcase's attributes (expat's ordered list) and result elements, as a row."""
    if len(a) >= 6 and a[0] == "classname" and a[2] == "name" and a[-2] == "time":
        return (a[1], a[3], a[-1], children)  # as pytest writes them
    return (_attr(a, "classname") or "", _attr(a, "name") or "", _attr(a, "time"), children)


class Root:
    """What the report's root says of its wall time (``junit._suite_time`` reads it)."""

    __slots__ = ("suite_times", "tag", "time")

    def __init__(self) -> None:
        self.tag = ""
        self.time: str | None = None
        self.suite_times: list[str] = []  # of each <testsuite> directly in a <testsuites> root

    def opened(self, tag: str, attrs: list[str], depth: int) -> None:
        """A container opened at ``depth`` 1 (the root) or 2."""
        if depth == 1:
            self.tag, self.time = tag, _attr(attrs, "time")
        elif tag == "testsuite" and self.tag == "testsuites":
            time = _attr(attrs, "time")
            if time is not None:
                self.suite_times.append(time)


def _feed(parser: Any, path: Path) -> None:
    """``path`` to ``parser`` chunk by chunk, refusing DOCTYPEs that declare entities or
    name a DTD; then its handlers dropped."""
    parser.StartDoctypeDeclHandler = _refuse_doctype
    parser.EntityDeclHandler = _refuse_entity
    try:
        with open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                parser.Parse(chunk, False)
            parser.Parse(b"", True)
    finally:
        # the parser and its handlers form a cycle holding every result: break it, so that
        # they are freed with the report and not by a collection (the collector is off)
        parser.StartElementHandler = parser.EndElementHandler = None
        parser.CharacterDataHandler = None


def stream(path: Path, add_rows: AddRows, result_tags: frozenset[str]) -> Root:
    """Read ``path`` with expat, one event at a time, handing ``add_rows`` each testcase with
    its result elements (those of ``result_tags``) as it closes; what the root says of the
    wall time. Raises :class:`TooDeep`, :class:`Refused`, or expat's error at damage (every
    testcase closed before it handed on)."""
    # no interning of names: each would cost a hash and a lookup, for a few comparisons
    parser = expat.ParserCreate(intern=None)
    parser.buffer_text = True
    parser.ordered_attributes = True  # a list per element: cheaper than a dict
    opened: list[str] = []  # the open elements' tags
    push, close = opened.append, opened.remove
    numbers = [0] * (MAX_DEPTH + 1)  # the number of the container opened last at each depth
    containers = 0
    found_case = False
    case_depth = 0  # depth of the last <testcase> not read yet, 0 when none
    case_attrs: list[str] = []
    case_suite = 0  # its container's number
    children: list[_Child] = []  # its result elements
    root = Root()
    flush = _FLUSH

    def start(tag: str, attrs: list[str]) -> None:
        nonlocal case_depth, case_attrs, case_suite, containers, children, found_case
        push(tag)
        depth = len(opened)
        if depth > MAX_DEPTH:
            raise TooDeep
        if case_depth:
            if depth > case_depth:  # inside the testcase
                if depth == case_depth + 1 and tag in result_tags:
                    _result(tag, attrs)
                return
            # the last testcase has closed: its result
            case_depth = 0
            add_rows((_row(case_attrs, children),), case_suite)
            if children:
                children = []
            if tag is flush:
                return
        if tag == "testcase":
            case_depth = depth
            case_attrs = attrs
            case_suite = numbers[depth - 1]
            if depth == 1 and not found_case:
                root.tag = tag
            found_case = True
        else:
            containers += 1
            numbers[depth] = containers
            if depth <= 2:
                root.opened(tag, attrs, depth)

    def _result(tag: str, attrs: list[str]) -> None:
        """A result element directly inside the testcase: kept for its end."""
        message = _attr(attrs, "message")
        child: _Child = [tag, message, _attr(attrs, "type"), None]
        if message is None:
            text: list[str] = []
            child[3] = text
            parser.CharacterDataHandler = text.append
            parser.EndElementHandler = _result_end
        children.append(child)

    def _result_end(tag: str) -> None:
        close(tag)
        if len(opened) == case_depth:  # the result element itself has closed
            parser.CharacterDataHandler = None
            parser.EndElementHandler = close

    parser.StartElementHandler = start
    parser.EndElementHandler = close
    try:
        _feed(parser, path)
    finally:
        if case_depth and len(opened) < case_depth:  # the last testcase closed: read it
            start(flush, [])
    return root
