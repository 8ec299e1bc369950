"""Read pytest JUnit XML into per-test outcomes; merge shard reports into one file.

Two readers, one collector (:func:`_collector`, where a testcase becomes a result):

- :mod:`pipeline.results.junit_plain` first: a regex scanner for the plain XML that pytest
  writes, which splits a chunk at each simple testcase in C and builds its results by runs;
  it declines anything outside its subset (a comment, CDATA, a DOCTYPE, damage, depth...).
  On the 100,000-testcase report of ``bench/synthetic.py`` its process takes 0.45x the time
  of junitparser's ``JUnitXml.fromfile`` plus a walk over every case, in 0.6x the memory
  (``python -m bench --only junit-peer`` measures both side by side);
- else :mod:`pipeline.results.junit_expat`, a streaming state machine on expat's own
  start/end handlers: no element tree is built and nothing of an element is kept after its
  end. Its per-element Python callbacks cost as much as reading the results (0.6x
  junitparser's time).

What the scanner accepts it reads exactly as expat does (tests compare the two on fixtures,
generated and damaged files); what it declines, expat reads and judges. Expat's handlers
give the safety:

- the start handler counts the nesting: a file nested deeper than ``MAX_DEPTH`` elements
  (pytest writes 4: testsuites/testsuite/testcase/failure) is skipped whole with a warning
  as soon as the 65th level opens. Nothing recurses per level (before the limit, 1,000
  nested ``<testsuite>`` elements were a RecursionError in the merge, 200,000 a crash);
- a DOCTYPE that declares an entity or names an external DTD is refused (skipped with a
  warning) from expat's declaration handlers, before its first element is read and before
  any entity is expanded: no JUnit writer emits one, and "billion laughs" style files are
  how XML bombs are made;
- every testcase whose end came before the damage is kept, so a truncated file (what a
  runner killed mid-sweep leaves) gives a warning and the testcases it holds.

``merge_reports`` writes elements back, so it reads with ElementTree, within the same
guards: see :mod:`pipeline.results.junit_merge`.

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

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, NamedTuple
from xml.parsers import expat

# one id format, spelled in pipeline.testid; re-exported here for the readers of results
from pipeline.heap import collector_paused
from pipeline.results import junit_expat, junit_plain
from pipeline.results.junit_limits import (
    MAX_SECONDS,
    deep_warning,
    refused_warning,
    truncated_warning,
)
from pipeline.results.junit_limits import seconds as _seconds
from pipeline.results.junit_plain import AddRows, Row
from pipeline.testid import DTYPES as _DTYPES
from pipeline.testid import parse_head
from pipeline.testid import parse_parts as parse_test_id


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


class CaseResult(NamedTuple):
    """One test id's final result in one report.

    ``kind``/``stem``/``dtype`` are set for consistency tests
    (``test_output_match_<stem>_mps_<dtype>``) and None for any other test. ``attempts``
    counts reruns; ``flaky`` is True when the attempts disagreed (e.g. failed, then passed).
    ``time`` is the total over all attempts; ``source`` is the report file it came from.

    A named tuple, not a frozen dataclass: a report's 100,000 results are built by C
    (``tuple.__new__`` over zipped columns, see :mod:`pipeline.results.junit_plain`)
    without a Python call each, which a dataclass's ``__init__`` cannot be. It is as
    immutable; ``_replace`` and ``_asdict`` stand for ``dataclasses.replace``/``asdict``.
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


_UNEXPECTED_SUCCESS = "Unexpected success"
_XPASS_STRICT = "[XPASS(strict)]"
_XPASS_SKIP_MESSAGE = "xfail-marked test passes unexpectedly"
# Interim results: each one is an attempt that did not count. Surefire's flaky* elements sit
# in a testcase that passed in the end; rerun* ones in a testcase whose failure is final.
_RERUN_TAGS = frozenset({"rerun", "flakyFailure", "flakyError", "rerunFailure", "rerunError"})
_FINAL_TAGS = frozenset({"failure", "error", "skipped"})


# A test id: its name alone when its classname is the report's first (one tuple fewer per
# result for the common case, which is most of a report's memory and so of its time), else
# (classname, name). A string never equals a tuple: the two kinds cannot collide.
_Key = str | tuple[str, str]
# What one <testcase> element says: (suite number, final outcome, message, time, outcomes of
# the interim attempts it records, number of earlier xpass markers)
_Summary = tuple[int, Outcome, str, float, tuple[Outcome, ...], int]
# A result element directly inside a <testcase>: [tag, message attribute (None when it has
# none), type attribute, its text pieces (collected only when there is no message)]
_Child = list[Any]


def _message(child: _Child) -> str:
    message = child[1]
    if message is None:
        message = "".join(child[3]).strip().split("\n", 1)[0]
    return message


def _says_xpass(child: _Child) -> bool:
    message = child[1]
    if message is None:
        message = "".join(child[3])
    return _UNEXPECTED_SUCCESS in message or message.startswith(_XPASS_STRICT)


def _is_xpass_marker(child: _Child) -> bool:
    return child[0] == "skipped" and child[1] == _XPASS_SKIP_MESSAGE


def _classify(child: _Child) -> Outcome:
    """Outcome of one final-result element (<failure>, <error>, <skipped>)."""
    if child[0] == "skipped":
        if child[2] == "pytest.xfail":
            return Outcome.XFAIL
        if child[1] == _XPASS_SKIP_MESSAGE:
            return Outcome.XPASS
        return Outcome.SKIP
    if _says_xpass(child):
        return Outcome.XPASS
    return Outcome.ERROR if child[0] == "error" else Outcome.FAIL


def _classify_rerun(child: _Child) -> Outcome:
    if _says_xpass(child):
        return Outcome.XPASS
    return Outcome.ERROR if child[0].endswith("Error") else Outcome.FAIL


def _summarise(children: list[_Child], suite: int, time: float) -> _Summary:
    """Fold the result elements of one <testcase> (see the module docstring for the shapes)."""
    final: _Child | None = None
    markers = 0
    reruns: list[Outcome] = []
    rerun_message = ""
    for child in children:
        tag = child[0]
        if tag in _RERUN_TAGS:
            reruns.append(_classify_rerun(child))
            rerun_message = _message(child)
        elif final is None:
            final = child
        elif final[0] == "skipped" and (tag != "skipped" or _is_xpass_marker(final)):
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


class _Read:
    """What a reader found: the results, and what the report's root says."""

    __slots__ = ("attempts", "cases", "wall")

    def __init__(self) -> None:
        self.cases: dict[_Key, CaseResult] = {}  # the first attempt's place decides the order
        self.attempts: dict[_Key, list[_Summary]] = {}  # of ids found more than once
        self.wall: float | None = None  # see ReportWall; None unless the whole file was read

    def complete(self) -> int:
        """How many <testcase> elements were closed (attempts included)."""
        return len(self.cases) + sum(len(found) - 1 for found in self.attempts.values())


# A classname or name no XML can hold (it has no NUL): it matches no testcase's
_NO_NAME = "\x00"
_TIMES_KEPT = 4096  # distinct ``time`` strings whose float is shared (pytest writes "%.3f")
# parse_head's answer for a name's head: (kind, stem), or None for no consistency test's
_Head = tuple[str, str] | None


class _Firsts:
    """What the first attempt of an id said that its CaseResult does not, kept only where it
    matters (rare): what folding its attempts needs once a second one turns up."""

    __slots__ = ("common", "other_suite", "summaries")

    def __init__(self) -> None:
        self.common = -1  # the first testcase's container number
        self.summaries: dict[_Key, _Summary] = {}  # first attempts with reruns or xpass markers
        self.other_suite: dict[_Key, int] = {}  # first attempts outside the common container


def _another_attempt(read: _Read, key: _Key, summary: _Summary, firsts: _Firsts) -> None:
    """Another attempt of a known id (rare): the first one's summary, then this one."""
    found = read.attempts.get(key)
    if found is None:
        first = firsts.summaries.get(key)
        if first is None:  # one result, no rerun inside: the case says it all
            case = read.cases[key]
            first = (firsts.other_suite.get(key, firsts.common), case.outcome, case.message,
                     case.time, (), 0)  # fmt: skip
        found = read.attempts[key] = [first]
    found.append(summary)


def _head_of(text: str, heads: dict[str, _Head], stems: dict[str, str]) -> _Head:
    """parse_head(text), kept in ``heads`` (an operator's dtypes share it), its stem one
    string of ``stems``."""
    found = parse_head(text)
    if found:
        found = (found[0], stems.setdefault(found[1], found[1]))
    heads[text] = found
    return found


def _seconds_of(written: str | None, times: dict[str | None, float]) -> float:
    """junit_limits.seconds, kept in ``times`` for each distinct string (up to _TIMES_KEPT)."""
    seconds = 0.0
    if written:
        try:
            seconds = float(written)
        except ValueError:
            pass
        else:
            if not 0.0 <= seconds <= MAX_SECONDS:
                seconds = 0.0
    if len(times) < _TIMES_KEPT:
        times[written] = seconds
    return seconds


def _collector(read: _Read, source: str) -> AddRows:
    """The one place a testcase becomes a result in ``read``: the expat stream
    (:mod:`pipeline.results.junit_expat`) and the plain-subset scanner
    (:mod:`pipeline.results.junit_plain`) hand what this returns their testcases, one at a
    time or as runs of them.

    Repeated ids (reruns) are rare: only the first attempt of each id keeps what it said
    (``summaries`` when it had reruns inside, its suite when not the common one; the
    CaseResult says the rest), so that the attempts can be folded once a second one turns
    up; :func:`_fold_attempts` folds them at the end.
    """
    cases = read.cases
    firsts = _Firsts()
    summaries, other_suite = firsts.summaries, firsts.other_suite
    passed = Outcome.PASS
    dtypes = {dtype: dtype for dtype in _DTYPES}  # get(): the one string of each name
    classnames: dict[str, str] = {}  # one string for a class's 10,000 results, not one each
    last = _NO_NAME  # the last testcase's classname
    first_class: str | None = None  # the first testcase's classname (see _Key)
    heads: dict[str, _Head] = {}  # a name's head (before its last _mps_) -> parse_head of it
    stems: dict[str, str] = {}  # one string per stem
    times: dict[str | None, float] = {}  # one float for each time string
    new, case_class = tuple.__new__, CaseResult
    summarise, fold, seconds_of, head_of = _summarise, _fold, _seconds_of, _head_of

    def add_rows(rows: Iterable[Row], suite: int) -> None:
        """Testcases of one container, in file order. The common case first: a test id
        seen once, with one result element or none. One Python loop for a run of them:
        a call per testcase was a fifth of the reading."""
        nonlocal last, first_class
        if firsts.common < 0:
            firsts.common = suite
        common = firsts.common
        kind: str | None  # None with stem: not a consistency test
        stem: str | None
        for classname, name, written, children in rows:
            if classname != last:
                last = classnames.setdefault(classname, classname)
                if first_class is None:
                    first_class = last
            key = name if last is first_class else (last, name)
            seconds = times.get(written)
            if seconds is None:
                seconds = seconds_of(written, times)
            outcome = passed
            message = ""
            if key in cases:
                _another_attempt(read, key, summarise(children, suite, seconds) if children
                                 else (suite, passed, "", seconds, (), 0), firsts)  # fmt: skip
                continue
            if children:
                summary = summarise(children, suite, seconds)
                if summary[4] or summary[5]:  # reruns inside: what _fold is for
                    summaries[key] = summary
                    cases[key] = fold(last, name, [summary], source)
                    continue
                outcome, message = summary[1], summary[2]
            text, _, dtype = name.rpartition("_mps_")
            try:  # a miss is once per operator: its dtypes share the head
                parsed = heads[text]
            except KeyError:
                parsed = head_of(text, heads, stems)
            found = dtypes.get(dtype)
            if parsed and found:
                kind, stem = parsed
            else:
                kind = stem = found = None
            cases[key] = new(case_class, (last, name, kind, stem, found, outcome, False, 1,
                                          message, seconds, source))  # fmt: skip
            if suite != common:
                other_suite[key] = suite

    return add_rows


def _fold_attempts(read: _Read, source: str) -> None:
    """What the attempts of each repeated id add up to."""
    cases = read.cases
    for key, found in read.attempts.items():
        first = cases[key]
        cases[key] = _fold(first.classname, first.name, found, source)


def _suite_time(tag: str, time: str | None, suites: Sequence[str]) -> float | None:
    """The wall time a whole report's root says (see :class:`ReportWall`), or None."""
    if tag not in ("testsuites", "testsuite"):
        return None
    if time is not None:
        return _seconds(time)
    if tag == "testsuite" or not suites:
        return None
    return sum(map(_seconds, suites))


def _fold(classname: str, name: str, summaries: list[_Summary], source: str) -> CaseResult:
    """One test id's result from its <testcase> elements in file order (the last decides)."""
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
    return CaseResult(classname, name, kind, stem, dtype, outcome, flaky, attempts, message,
                      total, source)  # fmt: skip


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
    try:
        with collector_paused():
            return _parse(path)
    except OSError as exc:  # unreadable (permissions, I/O error) or gone since is_file()
        warning = f"{path}: cannot read the JUnit report ({exc.strerror or exc}); skipped"
        return ParsedReport((), (warning,), (str(path),))


def _parse(path: Path, plain: bool = True) -> ParsedReport:
    """The report at ``path``: read by junit_plain's scanner if it is in its subset (and
    ``plain``: tests compare the two readers), else by expat."""
    source = str(path)
    if path.stat().st_size == 0:
        warning = f"{path}: empty JUnit report (the test run wrote nothing)"
        return ParsedReport((), (warning,), (source,))
    read = _Read()
    if plain:
        with open(path, "rb") as file:
            root = junit_plain.scan(file, _collector(read, source))
        if root is not None:
            read.wall = _suite_time(root.tag, root.time, root.suite_times)
            return _report(source, read, [])
        read = _Read()  # outside the subset: expat reads it, and says what is wrong
    warnings: list[str] = []
    try:
        said = junit_expat.stream(path, _collector(read, source), _RERUN_TAGS | _FINAL_TAGS)
        read.wall = _suite_time(said.tag, said.time, said.suite_times)
    except junit_expat.Refused as exc:
        return ParsedReport((), (refused_warning(path, str(exc)),), (source,))
    except junit_expat.TooDeep:
        return ParsedReport((), (deep_warning(path),), (source,))
    except (expat.ExpatError, LookupError, ValueError) as exc:
        # LookupError, ValueError: an unknown or multi-byte encoding in the XML declaration
        warnings.append(truncated_warning(path, exc, read.complete()))
    return _report(source, read, warnings)


def _report(source: str, read: _Read, warnings: list[str]) -> ParsedReport:
    """What ``read`` found, the attempts of each repeated id folded (also when the file is
    damaged), as the report."""
    _fold_attempts(read, source)
    cases = read.cases
    if cases:
        wall, measured = read.wall, "suite"
        if wall is None:
            wall, measured = sum(c.time for c in cases.values()), "cases"
        found = ReportWall(source, round(wall, 6), measured, len(cases))
        return ParsedReport(tuple(cases.values()), tuple(warnings), (), (found,))
    if warnings:  # damaged before the first testcase
        return ParsedReport((), tuple(warnings), (source,))
    return ParsedReport((), (f"{source}: JUnit report holds no testcases",))


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
    """Merge the JUnit files of several shards/runners into one valid file at ``out_path``;
    the warnings. See :func:`pipeline.results.junit_merge.merge` (junitparser did this before:
    its suite bookkeeping re-counted every suite at each file added, 2.7 s for 3 runners × 4
    shards of 5,000 tests against 0.5 s)."""
    from pipeline.results.junit_merge import merge  # it reads with ElementTree: only here

    return merge(paths, out_path)
