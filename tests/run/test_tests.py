"""pipeline/run/tests.py: pure helpers, real pytest runs on a small test_mps-shaped file."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import pytest

from pipeline.errors import PipelineError
from pipeline.results import junit
from pipeline.run import tests
from pipeline.run.tests import (
    TestRequest,
    junit_path_for,
    k_expression,
    last_error,
    new_run_dir,
    parse_collected,
    parse_test_line,
    pytest_command,
    selector_batches,
)

# Shaped like test_mps.py's instantiated consistency tests (our own content).
TEST_FILE = """\
import os
import time
import unittest


class TestConsistencyMPS(unittest.TestCase):
    def test_output_match_foo_mps_float32(self):
        self.assertEqual(os.environ.get("MPS_PIPELINE_PROBE"), "on")

    def test_output_match_foo_mps_float16(self):
        self.assertEqual(1.0, 1.5)

    @unittest.expectedFailure
    def test_output_match_foo_mps_int64(self):
        raise AssertionError("no int64 kernel")

    @unittest.skip("complex32 not supported")
    def test_output_match_foo_mps_complex32(self):
        pass

    def test_output_match_foobar_mps_float32(self):
        pass

    def test_output_match_nn_functional_pad_constant_mps_float32(self):
        pass

    def test_output_grad_match_foo_mps_float32(self):
        pass

    def test_output_match_sleepy_mps_float32(self):
        time.sleep(60)

    @unittest.expectedFailure
    def test_output_match_fixed_mps_int64(self):
        pass  # the kernel exists now: an unexpected success
"""


def make_request(
    tmp_path: Path, *selectors: str, timeout: float = 60, **kwargs: object
) -> TestRequest:
    test_dir = tmp_path / "test"
    if not test_dir.exists():
        test_dir.mkdir()
        (test_dir / "test_mps.py").write_text(TEST_FILE)
        # like PyTorch's; also stops pytest from finding this repository's configuration
        (tmp_path / "pytest.ini").write_text("[pytest]\nxfail_strict = True\n")
    out = tmp_path / "results"
    return TestRequest(
        python=sys.executable,
        test_file="test/test_mps.py",
        cwd=tmp_path,
        selectors=selectors,
        junit_path=out / "junit.xml",
        log_path=out / "pytest.log",
        timeout=timeout,
        **kwargs,  # type: ignore[arg-type]
    )


def junit_names(*paths: Path) -> list[str]:
    return sorted(case.get("name", "") for p in paths for case in ET.parse(p).iter("testcase"))


# -- pure helpers ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("collecting ... collected 9 items / 5 deselected / 4 selected", 4),
        ("collected 12 items", 12),
        ("collected 1 item", 1),
        ("collected 10 items / 3 deselected", 7),
        ("collecting ... collected 0 items", 0),
        ("test_mps.py::TestConsistencyMPS::test_x PASSED", None),
    ],
)
def test_parse_collected(line: str, expected: int | None) -> None:
    assert parse_collected(line) == expected


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("t.py::TestConsistencyMPS::test_output_match_a_mps_float32 PASSED [ 50%]", "pass"),
        # PyTorch's conftest appends the duration to the verbose word
        ("t.py::TestConsistencyMPS::test_output_match_a_mps_int8 FAILED [0.0123s] [ 1%]", "fail"),
        ("t.py::TestConsistencyMPS::test_output_match_a_mps_int64 XFAIL  [ 75%]", "xfail"),
        ("t.py::TestConsistencyMPS::test_output_match_a_mps_bool XPASS", "xpass"),
        ("t.py::TestConsistencyMPS::test_output_match_a_mps_complex32 SKIPPED (no) [ 9%]", "skip"),
        ("t.py::TestConsistencyMPS::test_output_match_a_mps_float16 ERROR [100%]", "error"),
    ],
)
def test_parse_test_line(line: str, expected: str) -> None:
    parsed = parse_test_line(line)
    assert parsed is not None and parsed[1] == expected
    assert parsed[0].startswith("t.py::TestConsistencyMPS::test_output_match_a_mps_")


@pytest.mark.parametrize(
    "line",
    [
        "t.py::TestConsistencyMPS::test_output_match_a_mps_float32 RERUN [ 50%]",
        "FAILED t.py::TestConsistencyMPS::test_x - AssertionError",
        "E   AssertionError: PASSED",
        "t.py::TestConsistencyMPS::test_output_match_a_mps_float32 ",
    ],
)
def test_parse_test_line_ignores_other_lines(line: str) -> None:
    assert parse_test_line(line) is None


def test_k_expression_and_command() -> None:
    req = TestRequest(
        python="/py",
        test_file="test/test_mps.py",
        cwd=Path("/src"),
        selectors=("test_output_match_atan2_", "test_output_match_nn_functional_pad_constant_"),
        junit_path=Path("/r/j.xml"),
        log_path=Path("/r/l.log"),
        timeout=10,
        extra_args=("--timeout=600",),
    )
    expr = k_expression(req.selectors)
    assert expr == "test_output_match_atan2_ or test_output_match_nn_functional_pad_constant_"
    command = pytest_command(req, req.selectors, req.junit_path)
    assert command[:4] == ["/py", "-m", "pytest", "test/test_mps.py"]
    assert command[command.index("-k") + 1] == expr
    assert "--junitxml=/r/j.xml" in command and "no:cacheprovider" in command
    assert command[-1] == "--timeout=600"
    assert "-k" not in pytest_command(req, (), req.junit_path)


@pytest.mark.parametrize("bad", ["a b", "not", "x or y", "(x)", "", "a'b"])
def test_request_rejects_selectors_that_are_not_names(bad: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="selector"):
        make_request(tmp_path, bad)


def test_selector_batches_respect_the_limit() -> None:
    selectors = [f"test_output_match_op{i}_" for i in range(500)]
    batches = selector_batches(selectors, limit=1_000)
    assert len(batches) > 1
    assert [s for batch in batches for s in batch] == selectors
    assert all(len(k_expression(batch)) <= 1_000 for batch in batches)
    # a batch is only cut when the next selector would not fit
    assert all(len(k_expression((*a, b[0]))) > 1_000 for a, b in pairwise(batches))
    assert selector_batches(["x" * 50], limit=10) == (("x" * 50,),)
    assert selector_batches([]) == ()
    assert len(selector_batches(selectors[:100])) == 1  # the real limit fits a PR selection


def test_junit_path_for() -> None:
    assert junit_path_for(Path("r/junit.xml"), 0) == Path("r/junit.xml")
    assert junit_path_for(Path("r/junit.xml"), 2) == Path("r/junit.2.xml")


# -- real pytest runs -----------------------------------------------------------------------


@pytest.mark.slow
def test_run_selected_tests(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    req = make_request(tmp_path, "test_output_match_foo_", env={"MPS_PIPELINE_PROBE": "on"})
    result = tests.run(req, progress=True)
    assert result.returncode == 1 and not result.timed_out and result.ran
    assert result.collected == 4
    assert result.counts == {"pass": 1, "fail": 1, "error": 0, "xfail": 1, "xpass": 0, "skip": 1}
    assert result.junit_paths == (req.junit_path,)
    # only the asked operator: not foobar (trailing "_"), not the grad test
    assert junit_names(req.junit_path) == [
        "test_output_match_foo_mps_complex32",
        "test_output_match_foo_mps_float16",
        "test_output_match_foo_mps_float32",
        "test_output_match_foo_mps_int64",
    ]
    log = req.log_path.read_text()
    assert log.startswith(f"$ {sys.executable} -m pytest test/test_mps.py -k ")
    assert "AssertionError: 1.0 != 1.5" in log  # failure details are kept in the log
    assert result.message == "pass 1 fail 1 xfail 1 skip 1"
    # not a terminal: compact progress lines on stderr, ending at 100%
    assert capsys.readouterr().err.splitlines()[-1].startswith("tests: 100% (4/4)")


@pytest.mark.slow
def test_unexpected_success_counts_as_xpass_live_as_in_the_junit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    req = make_request(tmp_path, "test_output_match_fixed_")
    result = tests.run(req, progress=True)
    assert result.returncode == 1  # pytest's own verdict is kept: the run did not pass
    assert result.counts["xpass"] == 1 and result.counts["fail"] == 0
    (case,) = junit.parse_report(req.junit_path).cases
    assert case.outcome is junit.Outcome.XPASS
    assert "xpass 1" in capsys.readouterr().err.splitlines()[-1]


@pytest.mark.slow
def test_run_in_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tests, "K_EXPRESSION_LIMIT", 40)
    req = make_request(
        tmp_path,
        "test_output_match_foobar_",
        "test_output_grad_match_foo_",
        "test_output_match_nn_functional_pad_",
    )
    result = tests.run(req, progress=False)
    assert result.batches == 3 and result.returncode == 0 and result.ran
    assert result.junit_paths == (
        req.junit_path,
        req.junit_path.with_suffix(".1.xml"),
        req.junit_path.with_suffix(".2.xml"),
    )
    assert junit_names(*result.junit_paths) == [
        "test_output_grad_match_foo_mps_float32",
        "test_output_match_foobar_mps_float32",
        "test_output_match_nn_functional_pad_constant_mps_float32",
    ]
    assert result.collected == 3 and result.counts["pass"] == 3
    assert req.log_path.read_text().count("$ ") == 3  # one log for all batches


@pytest.mark.slow
def test_timeout(tmp_path: Path) -> None:
    req = make_request(tmp_path, "test_output_match_foobar_", "test_output_match_sleepy_")
    req.junit_path.parent.mkdir(parents=True)
    req.junit_path.write_text("<stale/>")
    started = time.monotonic()
    result = tests.run(replace(req, timeout=2.0), progress=False)
    assert time.monotonic() - started < 10
    assert result.timed_out and not result.ran
    assert result.running is not None
    assert result.running.endswith("::test_output_match_sleepy_mps_float32")
    assert "timed out after 2s" in result.message and "sleepy" in result.message
    assert result.counts["pass"] == 1 and result.collected == 2
    # no report from the killed run, and the stale one from before is gone
    assert result.junit_paths == () and not req.junit_path.exists()


@pytest.mark.slow
def test_nothing_selected(tmp_path: Path) -> None:
    result = tests.run(make_request(tmp_path, "test_output_match_atan2_"), progress=False)
    assert result.returncode == 5 and not result.ran and result.collected == 0
    assert "no test in test/test_mps.py matches" in result.message
    assert "test_output_match_atan2_" in result.message


def test_missing_python(tmp_path: Path) -> None:
    req = make_request(tmp_path, "test_output_match_foo_")
    req = replace(req, python=str(tmp_path / "no-python"))
    with pytest.raises(PipelineError, match="no-python.*not found"):
        tests.run(req, progress=False)


def bare_python(tmp_path: Path) -> Path:
    """The interpreter of a fresh venv without pip: no pytest (about 50 ms to make)."""
    venv = tmp_path / "bare-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return venv / "bin" / "python"


def test_interpreter_without_pytest_stops_before_running(tmp_path: Path) -> None:
    python = bare_python(tmp_path)
    req = replace(make_request(tmp_path, "test_output_match_foo_"), python=str(python))
    with pytest.raises(PipelineError) as raised:
        tests.run(req, progress=False)
    assert str(raised.value) == (
        f"python={python} has no pytest: pip install pytest into it "
        "(or set python= / MPS_PIPELINE_PYTHON to an interpreter that has it)"
    )
    assert raised.value.exit_code == 2  # a setup error, not failing tests
    assert not req.log_path.exists()  # refused before any pytest run


def test_check_pytest_sees_what_the_run_sees(tmp_path: Path) -> None:
    python = str(bare_python(tmp_path))
    with pytest.raises(PipelineError, match="has no pytest"):
        tests.check_pytest(python, cwd=tmp_path)
    # a pytest the run's PYTHONPATH (or its working directory) provides counts
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "pytest.py").write_text("")
    tests.check_pytest(python, cwd=tmp_path, env={"PYTHONPATH": str(tmp_path / "site")})
    tests.check_pytest(python, cwd=tmp_path / "site")
    tests.check_pytest(sys.executable, cwd=tmp_path)


def test_pytest_that_dies_before_its_report_says_why(tmp_path: Path) -> None:
    # found by the probe, but it cannot start: a broken install
    site = tmp_path / "broken-site"
    site.mkdir()
    (site / "pytest.py").write_text("import pluggy_is_not_installed\n")
    req = make_request(tmp_path, "test_output_match_foo_", env={"PYTHONPATH": str(site)})
    result = tests.run(req, progress=False)
    assert result.returncode == 1 and result.junit_paths == ()
    assert result.message == (
        "pytest exited with status 1: "
        "ModuleNotFoundError: No module named 'pluggy_is_not_installed'"
    )


@pytest.mark.parametrize(
    ("log", "expected"),
    [
        (
            "$ /v/bin/python -m pytest test/test_mps.py -k x\n"
            "/v/bin/python: No module named pytest\n",
            "/v/bin/python: No module named pytest",
        ),
        (
            "$ python -m pytest t.py\n"
            "==================================== ERRORS ====================================\n"
            "_____________________ ERROR collecting test/test_mps.py ______________________\n"
            "ImportError while importing test module '/x/test/test_mps.py'.\n"
            "E   ModuleNotFoundError: No module named 'yaml'\n"
            "=========================== short test summary info ============================\n"
            "ERROR test/test_mps.py\n"
            "!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!\n"
            "=============================== 1 error in 0.05s ===============================\n",
            "ModuleNotFoundError: No module named 'yaml'",
        ),
        ("$ python -m pytest t.py\none\n\ntwo\nthree\nfour\n", "two\nthree\nfour"),
        ("$ python -m pytest t.py\n", ""),
    ],
)
def test_last_error(tmp_path: Path, log: str, expected: str) -> None:
    path = tmp_path / "pytest.log"
    path.write_text(log)
    assert last_error(path) == expected
    assert last_error(tmp_path / "missing.log") == ""


# -- results folders ------------------------------------------------------------------------


def test_new_run_dir_unique_and_latest(tmp_path: Path) -> None:
    results = tmp_path / "results"
    first = new_run_dir(results, "atan2")
    second = new_run_dir(results, "atan2")
    third = new_run_dir(results, "pr 123/atan2")
    assert len({first, second, third}) == 3
    assert all(p.is_dir() and p.parent == results for p in (first, second, third))
    assert first.name.endswith("Z-atan2") and first.name[:8].isdigit()
    assert "/" not in third.name[17:] and third.name.endswith("-pr-123-atan2")
    assert (results / "latest").is_symlink()
    assert not os.readlink(results / "latest").startswith("/")  # relative: survives a move
    assert (results / "latest").resolve() == third.resolve()
    assert sorted(p.name for p in results.iterdir()) == sorted(
        [first.name, second.name, third.name, "latest"]
    )


def test_latest_file_where_symlinks_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError("symlinks not supported here")

    monkeypatch.setattr(Path, "symlink_to", refuse)
    results = tmp_path / "results"
    run_dir = new_run_dir(results, "nightly")
    assert (results / "LATEST").read_text().strip() == run_dir.name
    assert not (results / "latest").exists()


def test_missing_working_directory(tmp_path: Path) -> None:
    req = replace(make_request(tmp_path, "test_output_match_foo_"), cwd=tmp_path / "nowhere")
    with pytest.raises(PipelineError, match="nowhere does not exist"):
        tests.run(req, progress=False)
