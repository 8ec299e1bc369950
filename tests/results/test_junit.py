"""pipeline/results/junit.py: outcomes, both rerun shapes, damaged files, real pytest output."""

from __future__ import annotations

import gc
import importlib.metadata
import inspect
import os
import re
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from bench.synthetic import make_report
from pipeline.results.junit import (
    CaseResult,
    Outcome,
    combine_results,
    merge_reports,
    parse_report,
    parse_reports,
    parse_test_id,
)
from pipeline.results.junit_limits import MAX_DEPTH
from pipeline.sandbox import TEST_ENV

FIXTURES = Path(__file__).parent.parent / "fixtures" / "junit"


def by_name(cases: tuple[CaseResult, ...]) -> dict[str, CaseResult]:
    return {c.name: c for c in cases}


def by_dtype(cases: tuple[CaseResult, ...]) -> dict[str, CaseResult]:
    return {c.dtype: c for c in cases if c.dtype}


# --- test ids ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("test_output_match_atan2_mps_float32", ("output_match", "atan2", "float32")),
        (
            "test_output_grad_match_nn_functional_conv2d_mps_float16",
            ("output_grad_match", "nn_functional_conv2d", "float16"),
        ),
        # variant names may contain '-'
        (
            "test_output_match_nn_functional_interpolate_bilinear-aa_mps_bfloat16",
            ("output_match", "nn_functional_interpolate_bilinear-aa", "bfloat16"),
        ),
        # the dtype is the segment after the LAST _mps_
        (
            "test_output_match_foo_mps_bar_mps_complex64",
            ("output_match", "foo_mps_bar", "complex64"),
        ),
        ("test_output_match_add_mps_bool", ("output_match", "add", "bool")),
    ],
)
def test_parse_test_id(name: str, expected: tuple[str, str, str]) -> None:
    assert parse_test_id(name) == expected


@pytest.mark.parametrize(
    "name",
    [
        "test_matmul_strided",
        "test_output_match_atan2_mps_notadtype",
        "test_output_match_atan2_float32",
        "test_output_match__mps_float32",
        "test_output_matchatan2_mps_float32",
    ],
)
def test_parse_test_id_rejects_other_tests(name: str) -> None:
    assert parse_test_id(name) is None


# --- outcomes -----------------------------------------------------------------------------


def test_every_outcome_shape() -> None:
    report = parse_report(FIXTURES / "outcomes.xml")
    assert report.warnings == ()
    got = {c.name: c.outcome for c in report.cases}
    p = "test_output_match_hypot_mps_"
    assert got == {
        p + "float32": Outcome.PASS,
        p + "float16": Outcome.FAIL,
        p + "bfloat16": Outcome.XFAIL,
        p + "int32": Outcome.XPASS,  # unittest.expectedFailure that passed
        p + "int16": Outcome.XPASS,  # strict pytest xfail that passed (pytest >= 8)
        p + "int8": Outcome.XPASS,  # strict xfail that passed, older writers
        p + "uint8": Outcome.SKIP,
        p + "bool": Outcome.SKIP,
        "test_output_grad_match_nn_functional_pad_reflect-2d_mps_float32": Outcome.ERROR,
        "test_matmul_strided": Outcome.PASS,
    }
    assert not any(c.flaky for c in report.cases)
    assert {c.attempts for c in report.cases} == {1}


def test_case_fields() -> None:
    cases = by_name(parse_report(FIXTURES / "outcomes.xml").cases)
    fail = cases["test_output_match_hypot_mps_float16"]
    assert fail == CaseResult(
        classname="test_mps.TestConsistencyMPS",
        name="test_output_match_hypot_mps_float16",
        kind="output_match",
        stem="hypot",
        dtype="float16",
        outcome=Outcome.FAIL,
        flaky=False,
        attempts=1,
        message="AssertionError: Tensor-likes are not close!\n\nMismatched elements: 2 / 25 (8.0%)",
        time=0.08,
        source=str(FIXTURES / "outcomes.xml"),
    )
    grad = cases["test_output_grad_match_nn_functional_pad_reflect-2d_mps_float32"]
    assert (grad.kind, grad.stem, grad.dtype) == (
        "output_grad_match",
        "nn_functional_pad_reflect-2d",
        "float32",
    )
    assert grad.message == 'failed on setup with "RuntimeError: MPS device lost"'
    other = cases["test_matmul_strided"]
    assert (other.kind, other.stem, other.dtype) == (None, None, None)
    # a skipped element without a message: the message is empty, not None
    assert cases["test_output_match_hypot_mps_bool"].message == ""


@pytest.mark.parametrize("name", ["outcomes.xml", "pytorch_reruns.xml"])
def test_results_are_ordinary_immutable_records(name: str) -> None:
    """What tuple.__new__ builds (both readers) is exactly what CaseResult(...) builds."""
    for case in parse_report(FIXTURES / name).cases:
        rebuilt = CaseResult(**case._asdict())
        assert type(case) is CaseResult
        assert case == rebuilt and hash(case) == hash(rebuilt) and repr(case) == repr(rebuilt)
    assert case._replace(outcome=Outcome.FAIL).outcome is Outcome.FAIL
    assert parse_report(FIXTURES / "outcomes.xml").cases[0]._asdict()["outcome"] == "pass"
    with pytest.raises(AttributeError):
        case.outcome = Outcome.FAIL  # type: ignore[misc]


# --- reruns ------------------------------------------------------------------------------


def test_pytorch_rerun_children() -> None:
    report = parse_report(FIXTURES / "pytorch_reruns.xml")
    assert report.warnings == ()
    cases = by_dtype(report.cases)

    flaky_pass = cases["float16"]
    assert (flaky_pass.outcome, flaky_pass.flaky, flaky_pass.attempts) == (Outcome.PASS, True, 3)
    assert flaky_pass.message == "AssertionError: Tensor-likes are not close!"

    real_failure = cases["float32"]
    assert (real_failure.outcome, real_failure.flaky, real_failure.attempts) == (
        Outcome.FAIL,
        False,
        3,
    )

    steady_xpass = cases["bfloat16"]
    assert (steady_xpass.outcome, steady_xpass.flaky, steady_xpass.attempts) == (
        Outcome.XPASS,
        False,
        2,
    )

    # xpassed once (the <skipped> marker), then xfailed: flaky
    marker = cases["complex64"]
    assert (marker.outcome, marker.flaky, marker.attempts) == (Outcome.XFAIL, True, 2)

    teardown = cases["int64"]
    assert (teardown.outcome, teardown.flaky, teardown.attempts) == (Outcome.FAIL, False, 1)
    assert teardown.message == "AssertionError: values differ"


def test_rerunfailures_repeated_testcases() -> None:
    report = parse_report(FIXTURES / "rerunfailures.xml")
    assert report.warnings == ()
    # one result per test id, in first-seen order
    assert [c.dtype for c in report.cases] == ["float32", "int32", "float16", "bfloat16", "int8"]
    cases = by_dtype(report.cases)

    passed_on_rerun = cases["float32"]
    assert (passed_on_rerun.outcome, passed_on_rerun.flaky, passed_on_rerun.attempts) == (
        Outcome.PASS,
        True,
        2,
    )
    assert passed_on_rerun.time == pytest.approx(0.21)

    # every attempt failed; the empty rerun elements do not read as passes
    always = cases["int32"]
    assert (always.outcome, always.flaky, always.attempts) == (Outcome.FAIL, False, 3)
    assert always.message == "AssertionError: values differ"

    steady_xpass = cases["float16"]
    assert (steady_xpass.outcome, steady_xpass.flaky, steady_xpass.attempts) == (
        Outcome.XPASS,
        False,
        2,
    )

    # xpassed (strict: a failure, so rerun), then xfailed
    xfail_after_rerun = cases["bfloat16"]
    assert (xfail_after_rerun.outcome, xfail_after_rerun.flaky) == (Outcome.XFAIL, True)

    assert (cases["int8"].outcome, cases["int8"].flaky, cases["int8"].attempts) == (
        Outcome.PASS,
        False,
        1,
    )


def test_surefire_interim_results() -> None:
    cases = by_dtype(parse_report(FIXTURES / "surefire_flaky.xml").cases)
    assert (cases["float32"].outcome, cases["float32"].flaky, cases["float32"].attempts) == (
        Outcome.PASS,
        True,
        2,
    )
    assert (cases["int64"].outcome, cases["int64"].flaky, cases["int64"].attempts) == (
        Outcome.FAIL,
        False,
        2,
    )


def test_same_id_in_two_suites_is_not_a_rerun(tmp_path: Path) -> None:
    """In a merged report an empty testcase in another suite is a pass, not a lost failure."""
    path = tmp_path / "merged.xml"
    case = '<testcase classname="C" name="test_output_match_abs_mps_int8" time="1"{}'
    empty = case.format(" />")
    xfail = case.format('><skipped type="pytest.xfail" /></testcase>')
    path.write_text(
        "<testsuites>"
        f'<testsuite name="a">{empty}</testsuite>'
        f'<testsuite name="b">{empty}</testsuite>'
        f'<testsuite name="c">{xfail}</testsuite></testsuites>'
    )
    (result,) = parse_report(path).cases
    assert (result.outcome, result.attempts, result.flaky) == (Outcome.XFAIL, 3, True)

    path.write_text(
        f'<testsuites><testsuite name="a">{empty}</testsuite>'
        f'<testsuite name="b">{empty}</testsuite></testsuites>'
    )
    (result,) = parse_report(path).cases
    assert (result.outcome, result.attempts, result.flaky) == (Outcome.PASS, 2, False)


# --- damaged and missing files ----------------------------------------------------------------


def test_truncated_mid_testcase_keeps_earlier_cases() -> None:
    path = FIXTURES / "truncated.xml"
    report = parse_report(path)
    assert [(c.dtype, c.outcome) for c in report.cases] == [
        ("float32", Outcome.PASS),
        ("float16", Outcome.FAIL),
    ]
    (warning,) = report.warnings
    assert str(path) in warning and "truncated" in warning


def test_truncated_across_chunks(tmp_path: Path) -> None:
    """A cut far past the first read chunk: every case closed before the cut survives."""
    text = make_report(20_000)
    cut = len(text) * 2 // 3
    assert cut > 1 << 20
    closed = re.findall(r'<testcase [^>]*name="([^"]+)"[^>]*?(?:/>|>.*?</testcase>)', text[:cut])
    report = parse_report(_write(tmp_path / "cut.xml", text[:cut]))
    assert [c.name for c in report.cases] == list(dict.fromkeys(closed))
    (warning,) = report.warnings
    assert "cut.xml" in warning
    # the same results as the intact file gives
    intact = {c.name: c for c in parse_report(_write(tmp_path / "whole.xml", text)).cases}
    last = report.cases[-1].name  # its rerun attempts may lie past the cut
    for case in report.cases:
        if case.name != last:
            assert case._replace(source="") == intact[case.name]._replace(source="")


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"", "empty"),
        (b"<html><body>502 Bad Gateway", "malformed"),
        (b"not xml at all", "malformed"),
        (b'<?xml version="1.0"?><testsuites><testsuite name="x" /></testsuites>', "no testcases"),
    ],
)
def test_damaged_files_warn_and_never_raise(tmp_path: Path, content: bytes, needle: str) -> None:
    path = tmp_path / "report.xml"
    path.write_bytes(content)
    report = parse_report(path)
    assert report.cases == ()
    (warning,) = report.warnings
    assert str(path) in warning and needle in warning


def test_missing_file_warns(tmp_path: Path) -> None:
    report = parse_report(tmp_path / "nope.xml")
    assert report.cases == ()
    assert "nope.xml" in report.warnings[0] and "not found" in report.warnings[0]


@pytest.mark.parametrize("enabled", [True, False])
def test_garbage_collector_state_is_restored(enabled: bool) -> None:
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        parse_report(FIXTURES / "outcomes.xml")
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


# --- hostile files: deep nesting, entities -------------------------------------------------

CASE = '<testcase classname="C" name="test_output_match_abs_mps_int8" time="1"><failure message="m">x</failure></testcase>'  # noqa: E501


def nested(levels: int, inner: str = CASE) -> str:
    """``inner`` inside <testsuites> and ``levels - 1`` nested <testsuite> elements."""
    suites = levels - 1
    return (
        '<?xml version="1.0" encoding="utf-8"?><testsuites>'
        + '<testsuite name="s">' * suites + inner + "</testsuite>" * suites
        + "</testsuites>"
    )  # fmt: skip


@pytest.mark.parametrize("levels", [1_000, 50_000])
def test_deep_nesting_is_skipped_with_a_warning(tmp_path: Path, levels: int) -> None:
    path = _write(tmp_path / "deep.xml", nested(levels))
    start = time.perf_counter()
    report = parse_report(path)
    warnings = merge_reports([path, FIXTURES / "outcomes.xml"], tmp_path / "merged.xml")
    assert time.perf_counter() - start < 2.0
    assert report.cases == () and report.skipped == (str(path),)
    (warning,) = report.warnings
    assert warning.startswith(f"{path}: skipped:") and f"deeper than {MAX_DEPTH}" in warning
    assert warnings == report.warnings
    # the merge keeps the other report, and only it
    assert len(parse_report(tmp_path / "merged.xml").cases) == 10


def test_200000_levels_do_not_crash_the_interpreter(tmp_path: Path) -> None:
    """Before the depth limit this was a segmentation fault: run it where one would show."""
    path = _write(tmp_path / "deep.xml", nested(200_000))
    code = (
        "import sys; from pipeline.results.junit import parse_report, merge_reports; "
        "r = parse_report(sys.argv[1]); w = merge_reports([sys.argv[1]], sys.argv[2]); "
        "print(len(r.cases), len(w), r.skipped == (sys.argv[1],))"
    )
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-c", code, str(path), str(tmp_path / "merged.xml")],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )  # fmt: skip
    assert time.perf_counter() - start < 5.0
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0", "1", "True"]


def test_the_depth_limit_is_exact_and_what_recurses_below_it_is_bounded(tmp_path: Path) -> None:
    at_limit = _write(tmp_path / "64.xml", nested(MAX_DEPTH - 2))  # + testcase + failure
    over = _write(tmp_path / "65.xml", nested(MAX_DEPTH - 1))
    assert [c.outcome for c in parse_report(at_limit).cases] == [Outcome.FAIL]
    assert parse_report(over).skipped == (str(over),)
    # deep inside a testcase counts too
    deep_message = CASE.replace(">x<", ">" + "<b>" * MAX_DEPTH + "</b>" * MAX_DEPTH + "<")
    assert parse_report(_write(tmp_path / "in-case.xml", nested(2, deep_message))).skipped
    # junitparser and ElementTree's writer recurse per level: at the limit they need a few
    # hundred frames at most, far from Python's default limit of 1,000
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack(0)) + 250)
    try:
        assert merge_reports([at_limit], tmp_path / "merged.xml") == ()
    finally:
        sys.setrecursionlimit(limit)
    assert [c.outcome for c in parse_report(tmp_path / "merged.xml").cases] == [Outcome.FAIL]


BILLION_LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, 10))
    + ']><testsuite><testcase classname="C" name="t"><failure message="&lol9;"/></testcase>'
    "</testsuite>"
).replace("&lol0;", "&lol;")


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (BILLION_LAUGHS, "declares the entity 'lol'"),
        # an external entity (XXE): ElementTree never fetches it, and it is refused first
        ('<?xml version="1.0"?><!DOCTYPE t [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
         '<testsuite><testcase classname="C" name="t">&x;</testcase></testsuite>',
         "declares the entity 'x'"),
        ('<!DOCTYPE t [<!ENTITY % p SYSTEM "http://example.invalid/x.dtd"> %p;]><testsuite/>',
         "declares the entity 'p'"),
        ('<!DOCTYPE testsuite SYSTEM "http://example.invalid/junit.dtd"><testsuite/>',
         "names an external DTD (http://example.invalid/junit.dtd)"),
    ],
)  # fmt: skip
def test_entity_declarations_and_external_dtds_are_refused(
    tmp_path: Path, content: str, needle: str
) -> None:
    path = _write(tmp_path / "hostile.xml", content)
    report = parse_report(path)
    assert report.cases == () and report.skipped == (str(path),)
    (warning,) = report.warnings
    assert warning.startswith(f"{path}: refused and skipped:") and needle in warning
    assert merge_reports([path], tmp_path / "merged.xml") == report.warnings
    assert "lol" not in (tmp_path / "merged.xml").read_text()


def test_a_harmless_doctype_is_read(tmp_path: Path) -> None:
    path = _write(tmp_path / "ok.xml", nested(3).replace("?><", "?><!DOCTYPE testsuites><", 1))
    assert [c.outcome for c in parse_report(path).cases] == [Outcome.FAIL]


def test_an_unreadable_file_is_a_warning(tmp_path: Path, monkeypatch) -> None:
    path = _write(tmp_path / "r.xml", nested(2))
    real_open = open

    def broken_open(file, *args, **kwargs):
        if str(file) == str(path):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr("builtins.open", broken_open)
    report = parse_report(path)
    assert report.skipped == (str(path),)
    (warning,) = report.warnings
    assert warning == f"{path}: cannot read the JUnit report (Permission denied); skipped"
    assert "Permission denied" in merge_reports([path], tmp_path / "merged.xml")[0]


# --- several files ---------------------------------------------------------------------------


def test_parse_reports_combines_files(tmp_path: Path) -> None:
    first = _write(
        tmp_path / "a.xml",
        '<testsuite><testcase classname="C" name="test_output_match_abs_mps_int8" time="1">'
        '<failure message="boom" /></testcase>'
        '<testcase classname="C" name="test_output_match_abs_mps_int16" time="1" /></testsuite>',
    )
    second = _write(
        tmp_path / "b.xml",
        '<testsuite><testcase classname="C" name="test_output_match_abs_mps_int8" time="2" />'
        "</testsuite>",
    )
    report = parse_reports([first, second, tmp_path / "missing.xml"])
    cases = by_dtype(report.cases)
    assert list(cases) == ["int8", "int16"]
    retried = cases["int8"]
    assert (retried.outcome, retried.flaky, retried.attempts, retried.time) == (
        Outcome.PASS,
        True,
        2,
        3.0,
    )
    assert retried.source == str(second)
    assert len(report.warnings) == 1 and "missing.xml" in report.warnings[0]


def test_combine_results_agreeing_is_not_flaky() -> None:
    a = parse_report(FIXTURES / "outcomes.xml").cases[0]
    b = a._replace(source="other.xml", time=1.0)
    combined = combine_results(a, b)
    assert (combined.flaky, combined.attempts, combined.source) == (False, 2, "other.xml")


def test_merge_reports(tmp_path: Path) -> None:
    inputs = [
        FIXTURES / "outcomes.xml",
        FIXTURES / "pytorch_reruns.xml",
        FIXTURES / "surefire_flaky.xml",
        FIXTURES / "truncated.xml",
        tmp_path / "missing.xml",
    ]
    out = tmp_path / "out" / "merged.xml"
    warnings = merge_reports(inputs, out)
    assert any("truncated.xml" in w for w in warnings)
    assert any("missing.xml" in w for w in warnings)

    root = ET.parse(out).getroot()  # well formed
    assert root.tag == "testsuites"
    expected = 10 + 5 + 2 + 2
    assert int(root.get("tests")) == expected
    assert len(root.findall("./testsuite/testcase")) == expected
    assert not list(out.parent.glob(".merged.xml.*"))  # no temporary left behind

    merged = parse_report(out)
    assert merged.warnings == ()
    separately = parse_reports(inputs[:4]).cases
    strip = lambda cases: {(c.classname, c.name): c._replace(source="") for c in cases}  # noqa: E731
    assert strip(merged.cases) == strip(separately)


# --- real pytest output ----------------------------------------------------------------------

REAL_TESTS = """
import unittest
import pytest


class TestConsistencyMPS(unittest.TestCase):
    @unittest.expectedFailure
    def test_output_match_foo_mps_float32(self):
        self.assertEqual(1, 2)

    @unittest.expectedFailure
    def test_output_match_foo_mps_float16(self):
        pass

    @pytest.mark.xfail(reason="bf16 is broken")
    def test_output_match_foo_mps_bfloat16(self):
        pass

    @pytest.mark.xfail(reason="not for complex")
    def test_output_match_foo_mps_complex64(self):
        raise RuntimeError("nope")

    @unittest.skip("Skipped!")
    def test_output_match_foo_mps_int64(self):
        pass

    def test_output_match_foo_mps_int32(self):
        self.assertEqual(1, 2, "<b>@someone</b> | mismatch")

    def test_output_match_foo_mps_int8(self):
        pass


class TestConsistencyMPSBroken(unittest.TestCase):
    def setUp(self):
        raise RuntimeError("MPS device lost")

    def test_output_match_bar_mps_int16(self):
        pass


@pytest.fixture
def device():
    raise RuntimeError("no MPS device")


def test_output_grad_match_bar_mps_uint8(device):
    pass
"""


def run_pytest(tmp_path: Path, source: str, *args: str) -> Path:
    (tmp_path / "test_real.py").write_text(textwrap.dedent(source))
    report = tmp_path / "report.xml"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "test_real.py",
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "xfail_strict=True",
            f"--junitxml={report}",
            *args,
        ],  # fmt: skip
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
        check=False,
        env={**os.environ, **TEST_ENV},  # the plugins a test wants: -p NAME
    )
    assert report.is_file()
    return report


def _rerun_plugin_off() -> tuple[str, ...]:
    try:
        importlib.metadata.version("pytest-rerunfailures")
    except importlib.metadata.PackageNotFoundError:
        return ()
    return ("-p", "no:rerunfailures")


def test_real_pytest_junit(tmp_path: Path) -> None:
    report = parse_report(run_pytest(tmp_path, REAL_TESTS, *_rerun_plugin_off()))
    assert report.warnings == ()
    got = {(c.stem, c.dtype): c for c in report.cases}
    assert {k: c.outcome for k, c in got.items()} == {
        ("foo", "float32"): Outcome.XFAIL,  # expectedFailure that failed
        ("foo", "float16"): Outcome.XPASS,  # expectedFailure that passed
        ("foo", "bfloat16"): Outcome.XPASS,  # strict pytest xfail that passed
        ("foo", "complex64"): Outcome.XFAIL,
        ("foo", "int64"): Outcome.SKIP,
        ("foo", "int32"): Outcome.FAIL,
        ("foo", "int8"): Outcome.PASS,
        # pytest reports an exception in a unittest setUp as a failure of the test...
        ("bar", "int16"): Outcome.FAIL,
        # ...and one in a pytest fixture as an error
        ("bar", "uint8"): Outcome.ERROR,
    }
    assert got[("bar", "uint8")].kind == "output_grad_match"
    assert "MPS device lost" in got[("bar", "int16")].message
    assert "@someone" in got[("foo", "int32")].message
    assert not any(c.flaky for c in report.cases)


RERUN_TESTS = """
import pathlib
import unittest

COUNTER = pathlib.Path(__file__).with_name("attempts.txt")


class TestConsistencyMPS(unittest.TestCase):
    def test_output_match_foo_mps_float32(self):
        # fails on the first attempt only
        n = int(COUNTER.read_text()) if COUNTER.exists() else 0
        COUNTER.write_text(str(n + 1))
        self.assertGreater(n, 0)

    def test_output_match_foo_mps_float16(self):
        self.assertEqual(1, 2)

    @unittest.expectedFailure
    def test_output_match_foo_mps_bfloat16(self):
        pass

    @unittest.expectedFailure
    def test_output_match_foo_mps_int32(self):
        self.assertEqual(1, 2)

    def test_output_match_foo_mps_int8(self):
        pass
"""


@pytest.mark.slow
def test_real_pytest_rerunfailures(tmp_path: Path) -> None:
    try:
        version = importlib.metadata.version("pytest-rerunfailures")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("pytest-rerunfailures is not installed (a dev dependency)")
    if tuple(int(p) for p in version.split(".")[:3] if p.isdigit()) < (16, 6, 1):
        pytest.skip(f"pytest-rerunfailures {version} predates the per-attempt testcase shape")
    path = run_pytest(tmp_path, RERUN_TESTS, "-p", "pytest_rerunfailures", "--reruns", "2")
    # the shape this test is about: one <testcase> per attempt
    names = [e.get("name") for e in ET.parse(path).getroot().iter("testcase")]
    assert names.count("test_output_match_foo_mps_float16") == 3

    report = parse_report(path)
    got = {c.dtype: (c.outcome, c.flaky, c.attempts) for c in report.cases}
    assert got == {
        "float32": (Outcome.PASS, True, 2),
        "float16": (Outcome.FAIL, False, 3),
        "bfloat16": (Outcome.XPASS, False, 3),
        "int32": (Outcome.XFAIL, False, 1),
        "int8": (Outcome.PASS, False, 1),
    }


# --- size ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_100k_report_ingests_in_linear_time(tmp_path: Path) -> None:
    """A guard against accidental quadratic behaviour; the timed figure is `nox -s bench`."""
    path = _write(tmp_path / "big.xml", make_report(100_000))
    start = time.perf_counter()
    report = parse_report(path)
    elapsed = time.perf_counter() - start
    assert len(report.cases) == 100_000 and report.warnings == ()
    assert sum(c.flaky for c in report.cases) > 0
    assert elapsed < 5.0


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("xml", "seconds", "measured"),
    [
        ('<testsuites time="9.5"><testsuite time="1.0">{c}</testsuite></testsuites>', 9.5, "suite"),
        ('<testsuites><testsuite time="2.5">{c}</testsuite><testsuite time="1.0"/></testsuites>',
         3.5, "suite"),
        ('<testsuite time="4.0">{c}</testsuite>', 4.0, "suite"),
        ("<testsuite>{c}</testsuite>", 0.75, "cases"),
        ('<testsuites><testsuite time="4.0">{c}', 0.75, "cases"),  # truncated
    ],
)  # fmt: skip
def test_a_reports_wall_time(tmp_path: Path, xml: str, seconds: float, measured: str) -> None:
    cases = '<testcase classname="c" name="a" time="0.5"/>'
    cases += '<testcase classname="c" name="b" time="0.25"/>'
    path = _write(tmp_path / "shard-1.xml", xml.format(c=cases))
    (wall,) = parse_reports([path]).walls
    assert (wall.seconds, wall.measured, wall.tests) == (seconds, measured, 2)
    assert wall.source == str(path)


def test_attribute_orders_read_alike(tmp_path: Path) -> None:
    """pytest's xunit1 family adds ``file`` and ``line``, other writers order attributes as
    they like: every shape reads as pytest's own (the reader has a fast path for it)."""
    name = "test_output_match_atan2_mps_float32"
    shapes = [
        f'<testcase classname="c" name="{name}" time="0.5"/>',
        f'<testcase classname="c" name="{name}" file="test_mps.py" line="3" time="0.5"/>',
        f'<testcase time="0.5" name="{name}" classname="c"/>',
        f'<testcase name="{name}" classname="c" time="0.5" line="3"/>',
    ]
    read = []
    for i, shape in enumerate(shapes):
        path = _write(tmp_path / f"r{i}.xml", f"<testsuite>{shape}</testsuite>")
        (case,) = parse_report(path).cases
        read.append(case._replace(source=""))
    assert all(case == read[0] for case in read)
    first = read[0]
    assert (first.classname, first.stem, first.dtype, first.time) == ("c", "atan2", "float32", 0.5)


def test_ids_of_one_operator_in_a_row_parse_as_testid_does(tmp_path: Path) -> None:
    """The reader remembers the last id's ``test_<kind>_<stem>_mps_`` head for the next
    dtype of the same operator; what it finds must be what parse_test_id finds."""
    names = [
        "test_output_match_atan2_mps_float32",
        "test_output_match_atan2_mps_float16",
        "test_output_match_atan2_mps_notadtype",
        "test_output_match_atan2_mps_mps_int64",
        "test_output_match_atan2_mps_",
        "test_output_grad_match_atan2_mps_bool",
        "test_output_grad_match_atan2_mps_bool_extra",
        "test_output_match_atan2",
    ]
    xml = "".join(f'<testcase classname="c" name="{n}"/>' for n in names)
    cases = parse_report(_write(tmp_path / "r.xml", f"<testsuite>{xml}</testsuite>")).cases
    assert [c.name for c in cases] == names
    assert [(c.kind, c.stem, c.dtype) for c in cases] == [
        parse_test_id(n) or (None, None, None) for n in names
    ]
    assert cases[0].stem == "atan2" and cases[3].stem == "atan2_mps"
