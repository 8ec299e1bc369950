"""Merge the JUnit files of several shards or runners into one (``junit.merge_reports``).

Unlike :func:`pipeline.results.junit.parse_report`, which streams and keeps no element, a
merge writes the elements back, so it reads each file into ElementTree elements: fed in
1 MiB chunks to the C incremental parser (``XMLPullParser``), its start/end events counted
for the same guards the reader has (``MAX_DEPTH``, entities and external DTDs refused
before the first element, a damaged file's complete testcases kept). ElementTree's writer
recurses a frame or two per level and only ever sees files within the limit: before it,
1,000 nested ``<testsuite>`` elements were a RecursionError and 200,000 a segmentation fault.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path
from typing import cast
from xml.parsers import expat

from pipeline.heap import collector_paused
from pipeline.results.junit_limits import (
    MAX_DEPTH,
    deep_warning,
    refused_warning,
    seconds,
    truncated_warning,
)

_CHUNK = 1 << 20
_PROLOG_CHUNK = 1 << 16


def _time(elem: ET.Element) -> float:
    return seconds(elem.get("time"))


class _TooDeep(Exception):
    """The file nests elements deeper than MAX_DEPTH (raised at the first one too deep)."""


class _Refused(Exception):
    """The file's DOCTYPE declares entities or names an external DTD."""


class _RootStarted(Exception):
    """The prolog is over: there is no DOCTYPE after the root element's start tag."""


def _refused_dtd(path: Path) -> str | None:
    """Why ``path``'s DOCTYPE is refused, or None (no DOCTYPE, or a harmless one).

    expat reads the prolog only, up to the root element's start tag (a DOCTYPE can come
    nowhere else), with handlers that stop at the first entity declaration or external
    DTD; a prolog that is not well formed is left to the real parse to report.
    """
    parser = expat.ParserCreate()

    def doctype(name: str, system_id: str | None, public_id: str | None, _: int) -> None:
        if system_id or public_id:
            raise _Refused(f"its DOCTYPE names an external DTD ({system_id or public_id})")

    def entity(name: str, *_: object) -> None:
        raise _Refused(f"its DOCTYPE declares the entity {name!r}")

    def root(*_: object) -> None:
        raise _RootStarted

    parser.StartDoctypeDeclHandler = doctype
    parser.EntityDeclHandler = entity
    parser.StartElementHandler = root
    try:
        with open(path, "rb") as f:
            while chunk := f.read(_PROLOG_CHUNK):
                parser.Parse(chunk, False)
            parser.Parse(b"", True)
    except _Refused as exc:
        return str(exc)
    except (_RootStarted, expat.ExpatError, LookupError, ValueError):
        pass  # LookupError, ValueError: an encoding expat cannot read, for _read to report
    return None


_Found = list[tuple[int, ET.Element]]  # (container number, <testcase>) in document order


def _read(path: Path, warnings: list[str]) -> tuple[ET.Element | None, _Found]:
    """The root (None unless the whole file was read) and every complete <testcase> of
    ``path`` with its container number, in document order.

    Testcases with one parent element share its number (0 for a root testcase); a
    testcase's own children are not searched. The file is fed in chunks to an incremental
    parser: at the first XML error (a runner killed mid-write leaves a truncated file) it
    stops with a warning naming the file, and every testcase whose closing tag came before
    the damage is kept. A file nested deeper than MAX_DEPTH, or refused by
    :func:`_refused_dtd`, gives a warning and nothing.
    """
    if path.stat().st_size == 0:
        warnings.append(f"{path}: empty JUnit report (the test run wrote nothing)")
        return None, []
    refused = _refused_dtd(path)
    if refused is not None:
        warnings.append(refused_warning(path, refused))
        return None, []
    parser: ET.XMLPullParser[ET.Element] = ET.XMLPullParser(events=("start", "end"))
    found: _Found = []
    root: ET.Element | None = None  # the first container: the root, unless that is a testcase
    depth = 0
    in_case = 0  # open <testcase> elements (a testcase inside one is not a testcase)
    numbers: list[int] = [0]  # the number of each open element outside a testcase
    count = 0
    try:
        with open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                parser.feed(chunk)
                for read in parser.read_events():
                    # start and end events carry the element (typeshed allows more)
                    event, elem = cast(tuple[str, ET.Element], read)
                    if event == "start":
                        depth += 1
                        if depth > MAX_DEPTH:
                            raise _TooDeep
                        if elem.tag == "testcase":
                            in_case += 1
                        elif not in_case:
                            count += 1
                            numbers.append(count)
                            if count == 1:
                                root = elem
                    else:
                        depth -= 1
                        if elem.tag == "testcase":
                            in_case -= 1
                            if not in_case:
                                found.append((numbers[-1], elem))
                        elif not in_case:
                            numbers.pop()
            parser.close()
    except _TooDeep:
        warnings.append(deep_warning(path))
        return None, []
    except (ET.ParseError, LookupError, ValueError) as exc:
        # LookupError, ValueError: an unknown or multi-byte encoding in the XML declaration
        warnings.append(truncated_warning(path, exc, len(found)))
        return None, found
    if root is None and found:
        root = found[0][1]  # a lone <testcase> as the document
    return root, found


def merge(
    paths: Iterable[str | os.PathLike[str]], out_path: str | os.PathLike[str]
) -> tuple[str, ...]:
    """Merge the JUnit files of several shards/runners into one valid file at ``out_path``.

    One ``<testsuites>`` holding every input's ``<testsuite>`` elements as they are, in
    order, with their attributes (a suite's ``time`` stays the wall time its runner wrote);
    the root's ``tests``/``failures``/``errors``/``skipped``/``time`` add them up. A
    truncated input contributes its complete testcases in a suite named after the file, as
    does a file whose root is no test suite; a skipped one (see :func:`parse_report`)
    nothing. The file is written atomically. Returns the warnings.

    The files are read by :func:`_read`, within MAX_DEPTH, so ElementTree's writer (a frame
    or two per nesting level) stays far below Python's recursion limit. junitparser did
    this before, and was weighed for it again (issue 30): as fast on 3 runners × 4 shards
    of 5,000 tests when suites are added one by one, but it raises at a killed runner's
    truncated file, where this keeps the complete testcases before the damage, and applies
    neither the depth guard nor the DTD refusal; so it is no dependency of the package.
    """
    merged = ET.Element("testsuites", {"name": "merged"})
    warnings: list[str] = []
    with collector_paused():  # nothing read here forms a cycle
        for path in map(Path, paths):
            if not path.is_file():
                warnings.append(f"{path}: JUnit report not found (did the test run start?)")
                continue
            try:
                root, testcases = _read(path, warnings)
            except OSError as exc:
                warnings.append(f"{path}: cannot read the JUnit report ({exc.strerror or exc})")
                continue
            if root is not None and root.tag == "testsuites":
                suites = [s for s in root if s.tag == "testsuite"]
                merged.extend(suites)
                inside = {id(c) for s in suites for c in s.iter("testcase")}
                testcases = [(n, e) for n, e in testcases if id(e) not in inside]
            elif root is not None and root.tag == "testsuite":
                merged.append(root)
                inside = {id(c) for c in root.iter("testcase")}
                testcases = [(n, e) for n, e in testcases if id(e) not in inside]
            if testcases:
                # truncated, a lone testcase, another root, or testcases outside any suite
                label = path.name if root is not None else f"{path.name} (truncated)"
                suite = ET.SubElement(merged, "testsuite", {"name": label})
                suite.extend(e for _, e in testcases)
                _count_suite(suite)
        totals = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
        time = 0.0
        for suite in merged:
            if suite.get("tests") is None:
                _count_suite(suite)
            for key in totals:
                with contextlib.suppress(ValueError):  # a count that is no number
                    totals[key] += int(suite.get(key) or 0)
            time += _time(suite)
        merged.attrib.update({k: str(v) for k, v in totals.items()}, time=f"{time:.3f}")
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            ET.ElementTree(merged).write(f, encoding="utf-8", xml_declaration=True)
        os.replace(tmp, out)
    except BaseException:
        os.unlink(tmp)
        raise
    return tuple(warnings)


def _count_suite(suite: ET.Element) -> None:
    """Set a suite's tests/failures/errors/skipped/time from its testcases."""
    counts = dict.fromkeys(("failures", "errors", "skipped"), 0)
    tests, time = 0, 0.0
    for case in suite.iter("testcase"):
        tests += 1
        time += _time(case)
        for child in case:
            key = {"failure": "failures", "error": "errors", "skipped": "skipped"}.get(child.tag)
            if key:
                counts[key] += 1
                break
    suite.attrib.update(
        {k: str(v) for k, v in counts.items()}, tests=str(tests), time=f"{time:.3f}"
    )
