"""The fast path of JUnit reading: a regex scanner for the plain XML that pytest writes.

:func:`pipeline.results.junit.parse_report` can read any report with expat, whose
per-element Python callbacks cost as much as reading the results. A report is mostly
``<testcase .../>`` after ``<testcase .../>``: one compiled pattern splits a chunk at each
in C, and junit's collector turns the columns of a run of them into results in one loop.
:func:`scan` takes only documents inside a strict subset of XML, where it can prove
well-formedness without a parser, and declines (returns None; what it added is then
discarded) anything else, so that expat reads it and says what it says: truncation, damage,
a DOCTYPE, depth, comments, CDATA, another encoding. What it accepts it reads exactly as
expat would (tests compare the two on every fixture, on generated and on damaged files).

The subset, checked chunk by chunk:

- UTF-8 (an optional BOM; an XML declaration, if any, only ``version 1.0``, ``utf-8``,
  ``standalone``); no ``]]>``; no control character but tab and newline (so no carriage
  return, which XML would normalise); no U+FFFE/U+FFFF; every ``&`` a predefined entity or
  a reference to a character XML allows;
- every ``<`` begins a tag with an ASCII name and double-quoted attributes, none twice (so
  no comment, CDATA, DOCTYPE or processing instruction); tags nest and close in order below
  one root, with only whitespace outside it, at most MAX_DEPTH deep;
- every ``<testcase`` has ``classname`` first and ``name`` second, and holds no other.

The report is read 1 MiB at a time, cut before a ``<testcase``: no tag or reference spans a
cut, and nothing of a chunk is kept once its testcases are added.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain, compress, islice, repeat
from typing import Any, BinaryIO

from pipeline.results.junit_limits import MAX_DEPTH

# What a reader hands its collector (junit._collector) for each <testcase>: its classname,
# name and ``time`` (attribute values as expat gives them) and its result elements (junit's
# _Child: tag, message, type, text pieces when there is no message); a run of them at once,
# with their container's number.
Row = tuple[str, str, "str | None", list[list[Any]]]
AddRows = Callable[[Iterable[Row], int], None]

_CHUNK = 1 << 20
_CUT = b"<testcase "
_BOM = b"\xef\xbb\xbf"
_DECLARATION = re.compile(
    rb"<\?xml version=([\"'])1\.0\1(?: encoding=([\"'])(?i:utf-8)\2)?"
    rb"(?: standalone=([\"'])(?:yes|no)\3)? ?\?>"
)
# bytes no document of the subset holds: control characters but tab and newline (carriage
# return included: XML turns CRLF into LF), deleted to see whether any was there
_CONTROL = bytes(b for b in range(32) if b not in b"\t\n")
_NONCHARACTERS = (b"\xef\xbf\xbe", b"\xef\xbf\xbf")  # U+FFFE, U+FFFF in UTF-8
_NAME = r"[A-Za-z_][\w.-]*"
_RESULTS = "failure|error|skipped|rerun|flakyFailure|flakyError|rerunFailure|rerunError"
# A simple testcase, pytest's way (most of a report): classname, name, time; ``>`` when it is
# not empty; the tag, ``type``, ``message`` and text of its one result element if it has one
# (pytest writes those two attributes in this order; whitespace around it is indentation).
# A chunk is split at each. Its values are checked afterwards, all at once, for what the
# character classes here let through (``<``, ``&``, tab, newline: see _Scanner.chunk):
# the regex engine matches a class excluding several characters one character at a time.
_SIMPLE = re.compile(
    r'<testcase classname="([^"]*)" name="([^"]*)" time="([^"]*)" ?(?:/>|(>)\s*'
    rf'(?:<({_RESULTS})(?: type="([^"]*)")?(?: message="([^"]*)")? ?(?:/>|>([^<]*)</\5>)\s*)?'
    r"</testcase>)",
    re.ASCII,
)
_GROUPS = 8
_STRIDE = _GROUPS + 1
# Where the text between simple testcases is split: each piece after the first is another
# <testcase>'s from its classname's value on, its end, then any tags up to the next one.
_SPLIT = '<testcase classname="'
# A piece that is not pytest's plain ``C" name="N" time="T" />``: the rest of the testcase
# (name, other attributes, contents unless it is empty), and what follows it.
_CASE = re.compile(
    rf'([^"]*)" name="([^"]*)"((?: {_NAME}="[^"]*")*) ?(?:/>|>(.*?)</testcase>)',
    re.ASCII | re.DOTALL,
)
# any tag of the subset: end slash, name, attributes, empty-element slash
_TAG = re.compile(rf'<(/?)({_NAME})((?:\s+{_NAME}\s*=\s*"[^"<]*")*)\s*(/?)>', re.ASCII)
_ATTRIBUTE = re.compile(rf'({_NAME})\s*=\s*"([^"<]*)"', re.ASCII)
_UNNAMED = re.compile(r"&(?!(?:lt|gt|amp|quot|apos);)")
_BAD_AMPERSAND = re.compile(r"&(?!(?:lt|gt|amp|quot|apos|#[0-9]+|#x[0-9a-fA-F]+);)")
_NUMERIC = re.compile(r"&#(?:x([0-9a-fA-F]+)|([0-9]+));")
_REFERENCE = re.compile(r"&(?:#x([0-9a-fA-F]+)|#([0-9]+)|(lt|gt|amp|quot|apos));")
_CDATA_END = re.compile(r"\]\]>")  # the regex engine finds it faster than ``in`` does
_ENTITIES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'"}
_RESULT_TAGS = frozenset(
    {"failure", "error", "skipped", "rerun", "flakyFailure", "flakyError", "rerunFailure",
     "rerunError"}
)  # fmt: skip


class _Decline(Exception):
    """The document is outside the subset: expat is to read it."""


@dataclass(frozen=True)
class Root:
    """What a whole report's root says (see junit.ReportWall): its tag and ``time``, and the
    ``time`` of each <testsuite> directly inside a <testsuites> root."""

    tag: str
    time: str | None
    suite_times: tuple[str, ...]


def _character(match: re.Match[str]) -> str:
    hexadecimal, decimal, entity = match.groups()
    if entity:
        return _ENTITIES[entity]
    return chr(int(hexadecimal, 16) if hexadecimal else int(decimal))


def _allowed(code: int) -> bool:
    """Whether XML 1.0 allows the character ``&#code;`` names."""
    return (
        code in (0x9, 0xA, 0xD)
        or 0x20 <= code <= 0xD7FF
        or 0xE000 <= code <= 0xFFFD
        or 0x10000 <= code <= 0x10FFFF
    )


def text_value(text: str) -> str:
    """Character data as expat gives it (references replaced)."""
    return _REFERENCE.sub(_character, text) if "&" in text else text


def attribute_value(raw: str) -> str:
    """An attribute's value as expat gives it: tab and newline become spaces (XML's
    normalisation, before references are replaced, so ``&#10;`` stays a newline)."""
    if "\t" in raw or "\n" in raw:
        raw = raw.replace("\t", " ").replace("\n", " ")
    return text_value(raw)


def _attributes(raw: str) -> dict[str, str]:
    """A tag's attributes (``_TAG`` group 3), each once."""
    found: dict[str, str] = {}
    for name, value in _ATTRIBUTE.findall(raw):
        if name in found:
            raise _Decline  # not well formed: expat says so
        found[name] = value
    return found


def _text(chunk: bytes, first: bool) -> str:
    """``chunk`` as text, once its characters are XML's; raise _Decline if not."""
    if first:
        if chunk.startswith(_BOM):
            chunk = chunk[3:]
        if chunk.startswith(b"<?"):
            declaration = _DECLARATION.match(chunk)
            if declaration is None:
                raise _Decline
            chunk = chunk[declaration.end() :]
    if len(chunk.translate(None, _CONTROL)) != len(chunk):
        raise _Decline
    if b"\xef" in chunk and any(c in chunk for c in _NONCHARACTERS):
        raise _Decline
    try:
        text = chunk.decode("utf-8")
    except UnicodeDecodeError:
        raise _Decline from None
    # (``in`` of one character is a memchr: it spares most chunks a scan)
    if "]" in text and _CDATA_END.search(text):
        raise _Decline  # no character data holds it
    if "&" in text and _UNNAMED.search(text):  # a numeric reference, or a stray ``&``
        if _BAD_AMPERSAND.search(text):
            raise _Decline
        _check_characters(text)
    return text


def _check_characters(text: str) -> None:
    """Each numeric reference names a character XML allows."""
    for hexadecimal, decimal in _NUMERIC.findall(text):
        try:
            code = int(hexadecimal, 16) if hexadecimal else int(decimal)
        except ValueError:  # more digits than int() reads
            raise _Decline from None
        if not _allowed(code):
            raise _Decline


def _result(tag: str, kind: str | None, message: str | None, text: str | None) -> list[Any]:
    """A simple testcase's one result element, as junit's _Child in a list."""
    if message is not None:
        return [[tag, attribute_value(message), kind and attribute_value(kind), None]]
    return [[tag, None, kind and attribute_value(kind), [text_value(text)] if text else []]]


class _Scanner:
    """The open elements outside testcases, across chunks, and what the root says."""

    def __init__(self, add_rows: AddRows) -> None:
        self.add_rows = add_rows
        self.opened: list[tuple[str, int]] = []  # tag and container number, root first
        self.numbered = 0  # containers (elements outside testcases) opened so far
        self.root: tuple[str, str | None] | None = None  # its tag and time, once it opens
        self.suite_times: list[str] = []

    def chunk(self, text: str) -> None:
        """Read the testcases of one chunk (whole elements), and the tags between them."""
        parts = _SIMPLE.split(text)
        between = parts[::_STRIDE]  # the text before each simple testcase, and after the last
        simple = len(between) - 1
        columns = [parts[at::_STRIDE] for at in range(1, _STRIDE)]
        # the simple testcases' values, as one string: whether one holds ``<`` (which no
        # value may) or what expat would change (a reference, a tab or newline)
        values = "".join(chain(*columns[:3]))
        if "<" in values or "<" in "".join(filter(None, chain(columns[5], columns[6]))):
            raise _Decline
        if "&" in values or "\t" in values or "\n" in values:
            columns[:3] = [list(map(attribute_value, column)) for column in columns[:3]]
        start = 0
        for at in compress(range(simple + 1), between):  # where that text is not empty
            if between[at].isspace():  # indentation (outside the root: the checks are done)
                continue
            if at > start:
                self.simple(columns, start, at)
            self.between(between[at])
            start = at
        if simple > start:
            self.simple(columns, start, simple)

    def simple(self, columns: list[list[Any]], start: int, end: int) -> None:
        """The simple testcases ``start`` to ``end`` (exclusive) of a chunk's columns."""
        opened = self.opened
        if not opened:  # the root is a testcase
            if end - start > 1:
                raise _Decline
            self.start_root("testcase", None)
        elif len(opened) >= MAX_DEPTH - 1:  # its result element would be too deep
            raise _Decline
        classnames, names, times, _, tags, kinds, messages, texts = (c[start:end] for c in columns)
        if any(tags):
            results = [
                _result(tag, kind, message, text) if tag else []
                for tag, kind, message, text in zip(tags, kinds, messages, texts, strict=True)
            ]
            rows = zip(classnames, names, times, results, strict=True)
        else:
            rows = zip(classnames, names, times, repeat([]))
        self.add_rows(rows, opened[-1][1] if opened else 0)

    def between(self, text: str) -> None:
        """Text between simple testcases: containers and other testcases."""
        pieces = text.split(_SPLIT)
        self.containers(pieces[0])
        for piece in islice(pieces, 1, None):
            self.testcase(piece)

    def testcase(self, piece: str) -> None:
        """Another testcase (a ``_SPLIT`` piece), and the tags after it."""
        match = _CASE.match(piece)
        if match is None:
            raise _Decline
        classname, name, rest, body = match.groups()
        if "<" in classname or "<" in name or "<" in rest:
            raise _Decline
        opened = self.opened
        if not opened:  # the root is this testcase
            self.start_root("testcase", None)
        elif len(opened) >= MAX_DEPTH:
            raise _Decline
        row = (attribute_value(classname), attribute_value(name),
               self.time(rest) if rest else None,
               self.children(body, len(opened) + 1) if body else [])  # fmt: skip
        self.add_rows((row,), opened[-1][1] if opened else 0)
        self.containers(piece[match.end() :])

    @staticmethod
    def time(rest: str) -> str | None:
        """``time`` among a testcase's attributes after its classname and name."""
        others = _attributes(rest)
        if "classname" in others or "name" in others:
            raise _Decline
        written = others.get("time")
        return attribute_value(written) if written is not None else None

    def containers(self, text: str) -> None:
        """Tags outside testcases: containers opening and closing."""
        if not text or text.isspace():
            return
        opened = self.opened
        for outside, end, tag, attributes, empty in _tags(text):
            if not opened and outside and not outside.isspace():
                raise _Decline  # text outside the root
            if not tag:
                break
            if end:
                if not opened or opened[-1][0] != tag:
                    raise _Decline
                opened.pop()
                continue
            if tag == "testcase" or len(opened) >= MAX_DEPTH:
                raise _Decline
            found = _attributes(attributes)
            self.numbered += 1
            if not opened:
                self.start_root(tag, found.get("time"))  # a second root: declined there
            elif len(opened) == 1 and tag == "testsuite" and opened[0][0] == "testsuites":
                time = found.get("time")
                if time is not None:
                    self.suite_times.append(attribute_value(time))
            if not empty:
                opened.append((tag, self.numbered))

    def start_root(self, tag: str, time: str | None) -> None:
        if self.root is not None:
            raise _Decline
        self.root = (tag, attribute_value(time) if time is not None else None)

    @staticmethod
    def children(body: str, depth: int) -> list[list[Any]]:
        """The result elements directly inside a testcase at ``depth``, as junit's _Child."""
        if "<testcase" in body:
            raise _Decline
        inside: list[str] = []
        children: list[list[Any]] = []
        text: list[str] | None = None  # the text of the open result element, if kept
        for outside, end, tag, attributes, empty in _tags(body):
            if text is not None and outside:
                text.append(text_value(outside))
            if not tag:
                break
            if end:
                if not inside or inside[-1] != tag:
                    raise _Decline
                inside.pop()
                if not inside:
                    text = None
                continue
            if depth + len(inside) + 1 > MAX_DEPTH:
                raise _Decline
            found = _attributes(attributes)
            if not inside and tag in _RESULT_TAGS:
                (child,) = _result(tag, found.get("type"), found.get("message"), None)
                children.append(child)
                if child[3] is not None and not empty:
                    text = child[3]  # its text, collected until it closes
            if not empty:
                inside.append(tag)
        if inside:
            raise _Decline
        return children


def _tags(text: str) -> Iterator[tuple[str, str, str, str, str]]:
    """``text`` tag by tag: (the text before it, end slash, name, attributes, empty-element
    slash), then (the text after the last, "", "", "", ""). Raises _Decline at a ``<`` that
    begins no tag of the subset, and at an end tag with attributes or a slash after them."""
    pieces = _TAG.split(text)
    for at in range(0, len(pieces) - 1, 5):
        outside, end, tag, attributes, empty = pieces[at : at + 5]
        if "<" in outside or (end and (attributes or empty)):
            raise _Decline
        yield outside, end, tag, attributes, empty
    if "<" in pieces[-1]:
        raise _Decline
    yield pieces[-1], "", "", "", ""


def scan(file: BinaryIO, add_rows: AddRows) -> Root | None:
    """Read the report ``file`` (at its start) into ``add_rows``; what its root says, or
    None when it is outside the subset (``add_rows`` may have been called)."""
    scanner = _Scanner(add_rows)
    pending: list[bytes] = []  # read, not yet cut before a testcase
    first = True
    try:
        while data := file.read(_CHUNK):
            cut = data.rfind(_CUT)
            if cut < 0 or (cut == 0 and not pending):
                pending.append(data)
                continue
            pending.append(data[:cut])
            scanner.chunk(_text(b"".join(pending), first))
            first = False
            pending = [data[cut:]]
        if pending:
            scanner.chunk(_text(b"".join(pending), first))
    except _Decline:
        return None
    if scanner.opened or scanner.root is None:
        return None  # unclosed: truncated, or not XML at all
    return Root(*scanner.root, tuple(scanner.suite_times))
