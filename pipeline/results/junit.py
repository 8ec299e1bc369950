"""Read pytest JUnit XML into per-test outcomes; merge shard reports into one file.

Reading uses the standard library's ElementTree, not junitparser: junitparser wraps every
element in Python objects and took 0.62 s just to walk a 100,000-testcase report on this
2-core machine, before any classification, and it gives up on a file that is not well
formed. Every file is fed in 1 MiB chunks to the C incremental parser (``XMLPullParser``),
which builds the elements without a Python call each; the loop over its start/end events
is the only Python work per element, and it does two things:

- it keeps every testcase closed so far, so a damaged file (what a runner killed mid-sweep
  leaves) gives a warning and every testcase before the damage;
- it counts the nesting: a file nested deeper than ``MAX_DEPTH`` elements (pytest writes
  4: testsuites/testsuite/testcase/failure) is skipped whole with a warning, as soon as the
  65th level opens. Nothing here recurses per level, and what does further on
  (ElementTree's writer in :func:`merge_reports`, a frame or two per level) only ever
  sees files within the limit. Before it, 1,000 nested ``<testsuite>`` elements were a
  RecursionError in the merge and 200,000 a segmentation fault.

A file whose DOCTYPE declares entities or names an external DTD is refused (skipped with a
warning) before its first element is read (:func:`_refused_dtd`): no JUnit writer emits
one, ElementTree never fetches external entities but expat does expand internal ones (up
to its amplification limit), and "billion laughs" style files are how XML bombs are made.

``merge_reports`` writes the elements read here back with ElementTree, suites as they are.

Outcomes follow what pytest and PyTorch's CI really write (FORMATS.md, "Tests and results"):
an expected failure that failed is ``<skipped type="pytest.xfail">``; a
``unittest.expectedFailure`` that passed is a ``<failure>`` saying "Unexpected success"; a
strict pytest xfail that passed is a ``<failure>`` starting "[XPASS(strict)]" (older pytest
and PyTorch's rerun writer: ``<skipped message="xfail-marked test passes unexpectedly">``).
Retries come in two shapes: child elements (PyTorch's ``<rerun>``, Surefire's
``<flakyFailure>``/``<rerunFailure>``...) inside one ``<testcase>``, or, from
pytest-rerunfailures >= 16.6.1, one ``<testcase>`` per attempt with the last one the result.
"""

from __future__ import annotations

import contextlib
import gc
import os
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from xml.parsers import expat

from pipeline.dtypes import TORCH_ALIASES


class Outcome(str, Enum):
    """What one test did in the end (after any reruns)."""

    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"
    XFAIL = "xfail"
    XPASS = "xpass"
    SKIP = "skip"


# Outcomes that make pytest rerun a test (a strict xpass is reported as a failure), and
# that leave an operator's chain unfinished.
FAILING: frozenset[Outcome] = frozenset({Outcome.FAIL, Outcome.ERROR, Outcome.XPASS})
# A test "worked" (pass, or an expected failure that now passes) or is broken: what a
# regression moves between from one night to the next.
WORKED: frozenset[Outcome] = frozenset({Outcome.PASS, Outcome.XPASS})
BROKEN: frozenset[Outcome] = frozenset({Outcome.FAIL, Outcome.ERROR, Outcome.XFAIL})
# The order every count line, table summary and progress bar lists outcomes in.
DISPLAY_ORDER: tuple[Outcome, ...] = (
    Outcome.PASS,
    Outcome.XPASS,
    Outcome.FAIL,
    Outcome.ERROR,
    Outcome.XFAIL,
    Outcome.SKIP,
)


def count_text(cases: Iterable[CaseResult]) -> str:
    """``pass 3, xpass 6`` over ``cases``, in display order, zero counts left out."""
    counts = Counter(c.outcome for c in cases)
    return ", ".join(f"{o.value} {counts[o]}" for o in DISPLAY_ORDER if counts[o])


@dataclass(frozen=True)
class CaseResult:
    """One test id's final result in one report.

    ``kind``/``stem``/``dtype`` are set for consistency tests
    (``test_output_match_<stem>_mps_<dtype>``) and None for any other test. ``attempts``
    counts reruns; ``flaky`` is True when the attempts disagreed (e.g. failed, then passed).
    ``time`` is the total over all attempts; ``source`` is the report file it came from.
    """

    classname: str
    name: str
    kind: str | None
    stem: str | None
    dtype: str | None
    outcome: Outcome
    flaky: bool
    attempts: int
    message: str
    time: float
    source: str


_new = object.__new__
_set = object.__setattr__


def _case(
    classname: str,
    name: str,
    kind: str | None,
    stem: str | None,
    dtype: str | None,
    outcome: Outcome,
    flaky: bool,
    attempts: int,
    message: str,
    time: float,
    source: str,
) -> CaseResult:
    """``CaseResult(...)``, about 2.5x faster.

    A frozen dataclass's ``__init__`` calls ``object.__setattr__`` once per field; for a
    100,000-testcase report that alone was a third of the time budget. The instance is
    identical (tests compare it with one built the ordinary way).
    """
    case = _new(CaseResult)
    _set(case, "__dict__", {"classname": classname, "name": name, "kind": kind, "stem": stem,
                            "dtype": dtype, "outcome": outcome, "flaky": flaky,
                            "attempts": attempts, "message": message, "time": time,
                            "source": source})  # fmt: skip
    return case


@dataclass(frozen=True)
class ParsedReport:
    """Every complete testcase found, in file order, plus warnings (missing/truncated files).

    ``skipped`` names the files nothing could be taken from (missing, empty, unreadable,
    refused, nested too deep, or damaged before the first complete testcase); each has a
    warning saying why.
    """

    cases: tuple[CaseResult, ...]
    warnings: tuple[str, ...]
    skipped: tuple[str, ...] = ()
    walls: tuple[ReportWall, ...] = ()  # one per file something was read from


@dataclass(frozen=True)
class ReportWall:
    """How long one report's run took: a shard's wall time, for the shard balance.

    ``seconds`` is the wall time the test runner wrote (``measured`` ``"suite"``): the
    ``time`` of the root ``<testsuites>`` when it has one, else the sum of the ``time`` of
    its ``<testsuite>`` children (pytest writes one, timed from session start to end). A
    file that has none, or was truncated, gets the sum of its testcases' times
    (``"cases"``), which leaves out collection and fixtures. ``tests``: its test ids.
    """

    source: str
    seconds: float
    measured: str  # "suite" | "cases"
    tests: int


_DTYPES = frozenset(TORCH_ALIASES.values())
_UNEXPECTED_SUCCESS = "Unexpected success"
_XPASS_STRICT = "[XPASS(strict)]"
_XPASS_SKIP_MESSAGE = "xfail-marked test passes unexpectedly"
# Interim results: each one is an attempt that did not count. Surefire's flaky* elements sit
# in a testcase that passed in the end; rerun* ones in a testcase whose failure is final.
_RERUN_TAGS = frozenset({"rerun", "flakyFailure", "flakyError", "rerunFailure", "rerunError"})
_FINAL_TAGS = frozenset({"failure", "error", "skipped"})
_CHUNK = 1 << 20
_PROLOG_CHUNK = 1 << 16
# Deepest element nesting read (the root is level 1); pytest writes 4 levels, Surefire and
# merged reports a few more. Deeper files are skipped: see the module docstring.
MAX_DEPTH = 64


def parse_test_id(name: str) -> tuple[str, str, str] | None:
    """``test_output_match_nn_functional_pad_constant_mps_float16`` -> (kind, stem, dtype).

    The dtype is whatever follows the last ``_mps_`` (stems contain underscores and may
    contain '-'); it must be a known dtype name, else the test is not a consistency test.
    """
    # Written out rather than looped over TEST_KINDS: it runs once per testcase.
    if name.startswith("test_output_match_"):
        kind, rest = "output_match", name[18:]
    elif name.startswith("test_output_grad_match_"):
        kind, rest = "output_grad_match", name[23:]
    else:
        return None
    stem, sep, dtype = rest.rpartition("_mps_")
    if sep and stem and dtype in _DTYPES:
        return kind, stem, dtype
    return None


_Key = tuple[str, str]  # (classname, name)
# What one <testcase> element says: (suite number, final outcome, message, time, outcomes of
# the interim attempts it records, number of earlier xpass markers)
_Summary = tuple[int, Outcome, str, float, tuple[Outcome, ...], int]


def _message(child: ET.Element) -> str:
    message = child.get("message")
    if message is None:
        message = "".join(child.itertext()).strip().split("\n", 1)[0]
    return message


def _says_xpass(child: ET.Element) -> bool:
    message = child.get("message")
    if message is None:
        message = "".join(child.itertext())
    return _UNEXPECTED_SUCCESS in message or message.startswith(_XPASS_STRICT)


def _is_xpass_marker(child: ET.Element) -> bool:
    return child.tag == "skipped" and child.get("message") == _XPASS_SKIP_MESSAGE


def _classify(child: ET.Element) -> Outcome:
    """Outcome of one final-result element (<failure>, <error>, <skipped>)."""
    if child.tag == "skipped":
        if child.get("type") == "pytest.xfail":
            return Outcome.XFAIL
        if child.get("message") == _XPASS_SKIP_MESSAGE:
            return Outcome.XPASS
        return Outcome.SKIP
    if _says_xpass(child):
        return Outcome.XPASS
    return Outcome.ERROR if child.tag == "error" else Outcome.FAIL


def _classify_rerun(child: ET.Element) -> Outcome:
    if _says_xpass(child):
        return Outcome.XPASS
    return Outcome.ERROR if child.tag.endswith("Error") else Outcome.FAIL


# A duration longer than this (about 11 days) is no test's: a corrupt or hostile report.
MAX_SECONDS = 1e6


def _time(elem: ET.Element) -> float:
    """The ``time`` attribute in seconds; 0.0 (unknown) when it is missing, not a number,
    ``NaN``, infinite, negative or beyond :data:`MAX_SECONDS` (a sum of two ``1e308`` would
    be infinite, and JSON has no infinity)."""
    try:
        seconds = float(elem.get("time") or 0.0)
    except ValueError:
        return 0.0
    return seconds if 0.0 <= seconds <= MAX_SECONDS else 0.0


def _summarise(elem: ET.Element, suite: int) -> _Summary:
    """Fold the result elements of one <testcase> (see the module docstring for the shapes)."""
    time = _time(elem)
    final: ET.Element | None = None
    markers = 0
    reruns: list[Outcome] = []
    rerun_message = ""
    for child in elem:
        tag = child.tag
        if tag in _RERUN_TAGS:
            reruns.append(_classify_rerun(child))
            rerun_message = _message(child)
        elif tag not in _FINAL_TAGS:
            continue  # <system-out>, <properties>...
        elif final is None:
            final = child
        elif final.tag == "skipped" and (tag != "skipped" or _is_xpass_marker(final)):
            # PyTorch's rerun writer records an xpass attempt as a <skipped> marker before
            # the final result; a <failure>/<error> decides over any skip.
            markers += _is_xpass_marker(final)
            final = child
        elif _is_xpass_marker(child):
            markers += 1
    if final is None:
        # passed in the end; a flaky pass keeps the last failure's message
        return suite, Outcome.PASS, rerun_message, time, tuple(reruns), markers
    return suite, _classify(final), _message(final), time, tuple(reruns), markers


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
        warnings.append(f"{path}: refused and skipped: {refused}, which no JUnit writer emits")
        return None, []
    parser = ET.XMLPullParser(events=("start", "end"))
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
                for event, elem in parser.read_events():
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
        warnings.append(
            f"{path}: skipped: its XML nests deeper than {MAX_DEPTH} elements (pytest writes "
            "4: testsuites/testsuite/testcase/failure), which no test report needs"
        )
        return None, []
    except (ET.ParseError, LookupError, ValueError) as exc:
        # LookupError, ValueError: an unknown or multi-byte encoding in the XML declaration
        warnings.append(
            f"{path}: truncated or malformed JUnit XML ({exc}); kept the {len(found)} complete"
            " testcase(s) before that point (was the test runner killed?)"
        )
        return None, found
    if root is None and found:
        root = found[0][1]  # a lone <testcase> as the document
    return root, found


def _fold(key: _Key, summaries: list[_Summary], source: str) -> CaseResult:
    """One test id's result from its <testcase> elements in file order (the last decides)."""
    classname, name = key
    parsed = parse_test_id(name)
    kind, stem, dtype = parsed if parsed else (None, None, None)
    earlier: set[Outcome] = set()  # outcomes of attempts before the final one, where known
    unknown = False  # an earlier attempt failed without saying how
    attempts = 0
    total = 0.0
    previous: _Summary | None = None
    for summary in summaries:
        suite, outcome, message, time, reruns, markers = summary
        if previous is not None:
            if previous[1] is Outcome.PASS and not previous[4] and previous[0] == suite:
                # pytest-rerunfailures writes its "rerun" attempts as empty <testcase>s in the
                # same suite: they did fail (only failures are rerun), the report does not say
                # how. In another suite (a merged report) an empty testcase is a plain pass.
                unknown = True
            else:
                earlier.add(previous[1])
        earlier.update(reruns)
        if markers:
            earlier.add(Outcome.XPASS)
        attempts += 1 + len(reruns) + markers
        total += time
        previous = summary
    flaky = bool(earlier - {outcome}) or (unknown and outcome not in FAILING)
    return _case(classname, name, kind, stem, dtype, outcome, flaky, attempts, message, total,
                 source)  # fmt: skip


def parse_report(path: str | os.PathLike[str]) -> ParsedReport:
    """Parse one JUnit XML file written by pytest (any junit_family) or PyTorch's CI.

    Repeated ``<testcase>`` elements with one classname+name are rerun attempts (the last
    is the result). A missing, empty, unreadable, truncated or malformed file gives a
    warning naming it and every complete testcase before the damage; a file nested deeper
    than MAX_DEPTH or with entity declarations gives a warning and nothing. It never raises.
    """
    path = Path(path)
    if not path.is_file():
        warning = f"{path}: JUnit report not found (did the test run start?)"
        return ParsedReport((), (warning,), (str(path),))
    # Nothing built here can form a cycle, and with the collector on, its passes over the
    # growing heap doubled the time of a 100,000-testcase report (2.2 s -> 1.0 s measured).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _parse(path)
    except OSError as exc:  # unreadable (permissions, I/O error) or gone since is_file()
        warning = f"{path}: cannot read the JUnit report ({exc.strerror or exc}); skipped"
        return ParsedReport((), (warning,), (str(path),))
    finally:
        if collecting:
            gc.enable()


def _parse(path: Path) -> ParsedReport:
    warnings: list[str] = []
    source = str(path)
    _root, testcases = _read(path, warnings)
    cases: dict[_Key, CaseResult] = {}
    repeated: set[_Key] = set()
    passed = Outcome.PASS
    for suite, elem in testcases:
        key = (elem.get("classname", ""), elem.get("name", ""))
        if key in cases:
            repeated.add(key)
        elif len(elem):
            cases[key] = _fold(key, [_summarise(elem, suite)], source)
        else:
            # the common case, inlined: a single attempt that passed
            classname, name = key
            parsed = parse_test_id(name)
            kind, stem, dtype = parsed if parsed else (None, None, None)
            cases[key] = _case(classname, name, kind, stem, dtype, passed, False, 1, "",
                               _time(elem), source)  # fmt: skip
    if repeated:
        # rare (reruns): a second pass collects every attempt of just those ids, in order
        attempts: dict[_Key, list[_Summary]] = {}
        for suite, elem in testcases:
            key = (elem.get("classname", ""), elem.get("name", ""))
            if key in repeated:
                attempts.setdefault(key, []).append(_summarise(elem, suite))
        for key, summaries in attempts.items():
            cases[key] = _fold(key, summaries, source)
    if cases:
        wall = _suite_time(_root)
        measured = "suite"
        if wall is None:
            wall, measured = sum(c.time for c in cases.values()), "cases"
        found = ReportWall(source, round(wall, 6), measured, len(cases))
        return ParsedReport(tuple(cases.values()), tuple(warnings), (), (found,))
    if warnings:  # damaged before the first testcase, or refused
        return ParsedReport((), tuple(warnings), (source,))
    return ParsedReport((), (f"{path}: JUnit report holds no testcases",))


def _suite_time(root: ET.Element | None) -> float | None:
    """The wall time a whole report's root says (see :class:`ReportWall`), or None."""
    if root is None or root.tag not in ("testsuites", "testsuite"):
        return None
    if root.get("time") is not None:
        return _time(root)
    if root.tag == "testsuite":
        return None
    suites = [s for s in root if s.tag == "testsuite" and s.get("time") is not None]
    return sum(_time(s) for s in suites) if suites else None


def combine_results(earlier: CaseResult, later: CaseResult) -> CaseResult:
    """One test id reported twice (a retried job, overlapping shards): the later one wins.

    Attempts and time add up; disagreeing outcomes make the result flaky.
    """
    return CaseResult(
        later.classname,
        later.name,
        later.kind,
        later.stem,
        later.dtype,
        later.outcome,
        earlier.flaky or later.flaky or earlier.outcome != later.outcome,
        earlier.attempts + later.attempts,
        later.message,
        earlier.time + later.time,
        later.source,
    )


def parse_reports(paths: Iterable[str | os.PathLike[str]]) -> ParsedReport:
    """Parse several reports (shards of one run) into one result set, in the given order.

    A test id found in more than one file is folded with ``combine_results`` (later file
    wins). Warnings and skipped files of every file are kept.
    """
    cases: dict[tuple[str, str], CaseResult] = {}
    warnings: list[str] = []
    skipped: list[str] = []
    walls: list[ReportWall] = []
    for path in paths:
        report = parse_report(path)
        warnings.extend(report.warnings)
        skipped.extend(report.skipped)
        walls.extend(report.walls)
        for case in report.cases:
            key = (case.classname, case.name)
            previous = cases.get(key)
            cases[key] = case if previous is None else combine_results(previous, case)
    return ParsedReport(tuple(cases.values()), tuple(warnings), tuple(skipped), tuple(walls))


def merge_reports(
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
    this before: its suite bookkeeping re-counted every suite at each file added, 2.7 s
    for 3 runners × 4 shards of 5,000 tests against 0.5 s here.
    """
    merged = ET.Element("testsuites", {"name": "merged"})
    warnings: list[str] = []
    collecting = gc.isenabled()
    gc.disable()  # as in parse_report: nothing read here forms a cycle
    try:
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
    finally:
        if collecting:
            gc.enable()
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
