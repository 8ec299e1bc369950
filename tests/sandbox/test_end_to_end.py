"""Real ninja builds and real pytest runs on a materialized sandbox."""

from __future__ import annotations

import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pipeline.sandbox import backend
from tests.sandbox.conftest import ninja, run
from tests.sandbox.edits import (
    BINARY_KERNEL,
    add_atan2_stub,
    add_hypot_dispatch,
    add_hypot_stub,
    fold_atan2_yaml,
    line_of,
    remove_atan2_impl,
)

pytestmark = pytest.mark.slow

FLOATS = ("float32", "float16", "bfloat16")
INTS = ("int64", "int32", "int16", "int8", "uint8", "bool")


def touch(path: Path) -> None:
    """Bump the mtime to now (ninja compares nanosecond mtimes)."""
    os.utime(path)


def pytest_junit(root: Path, selector: str, report: Path) -> dict[str, tuple[str, str]]:
    """Run the sandbox's test_mps.py like the pipeline does; {dtype: (outcome, message)}."""
    proc = run(
        [
            sys.executable,
            "-m",
            "pytest",
            "test/test_mps.py",
            "-k",
            selector,
            f"--junitxml={report}",
        ],
        root,
    )
    assert report.is_file(), proc.stdout + proc.stderr
    outcomes = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        assert case.get("classname") == "test.test_mps.TestConsistencyMPS"
        dtype = case.get("name").rsplit("_mps_", 1)[1]
        child = next(iter(case), None)
        if child is None:
            outcomes[dtype] = ("pass", "")
        elif child.tag == "skipped" and child.get("type") == "pytest.xfail":
            outcomes[dtype] = ("xfail", child.get("message", ""))
        else:
            outcomes[dtype] = (child.tag, child.get("message", ""))
    return outcomes


def test_ninja_builds_once_and_rebuilds_on_build_inputs_only(sandbox_copy):
    first = ninja(sandbox_copy)
    assert first.returncode == 0, first.stdout + first.stderr
    # the shader steps (one header per .metal file) and the link
    assert "[3/3] Building torch_cpu" in first.stdout
    assert backend.artifact_path(sandbox_copy).is_file()

    again = ninja(sandbox_copy)
    assert "ninja: no work to do." in again.stdout

    touch(sandbox_copy / "test" / "test_mps.py")
    touch(sandbox_copy / "torch/testing/_internal/common_mps.py")
    assert "ninja: no work to do." in ninja(sandbox_copy).stdout

    touch(sandbox_copy / "aten/src/ATen/native/mps/kernels/UnaryKernel.metal")
    rebuilt = ninja(sandbox_copy)
    assert "[2/2] Building torch_cpu" in rebuilt.stdout  # its shader step, then the link

    (sandbox_copy / "aten/src/ATen/native/mps/kernels/Extra.metal").write_text("// new\n")
    assert "[1/1] Building torch_cpu" in ninja(sandbox_copy).stdout
    assert "ninja: no work to do." in ninja(sandbox_copy).stdout


def test_compile_error_fails_the_build_with_a_clang_style_line(sandbox_copy):
    add_atan2_stub(sandbox_copy, name="atan3")
    proc = ninja(sandbox_copy)
    assert proc.returncode != 0
    line, col = line_of(sandbox_copy, BINARY_KERNEL, '"atan3"')
    assert (
        f"{BINARY_KERNEL}:{line}:{col + 1}: error: no Metal kernel named 'atan3' is registered"
        in proc.stdout
    )
    assert "FAILED:" in proc.stdout
    assert not backend.artifact_path(sandbox_copy).exists()


def test_unbuilt_sandbox_errors_every_test(sandbox_copy, tmp_path):
    outcomes = pytest_junit(sandbox_copy, "test_output_match_atan2", tmp_path / "r.xml")
    assert {o for o, _ in outcomes.values()} == {"error"}
    assert all("torch_cpu not built" in m for _, m in outcomes.values())


def test_atan2_migration_turns_integer_xfails_into_unexpected_successes(sandbox_copy, tmp_path):
    assert ninja(sandbox_copy).returncode == 0
    before = pytest_junit(sandbox_copy, "test_output_match_atan2", tmp_path / "before.xml")
    assert {d: o for d, (o, _) in before.items()} == {
        **dict.fromkeys(FLOATS, "pass"),
        **dict.fromkeys(INTS, "xfail"),
    }

    # What `doit migrate_op op=atan2` does to the sources, by hand
    fold_atan2_yaml(sandbox_copy)
    remove_atan2_impl(sandbox_copy)
    add_atan2_stub(sandbox_copy)
    build = ninja(sandbox_copy)
    assert build.returncode == 0 and "[1/1]" in build.stdout, build.stdout

    after = pytest_junit(sandbox_copy, "test_output_match_atan2", tmp_path / "after.xml")
    assert {d: o for d, (o, _) in after.items() if d in FLOATS} == dict.fromkeys(FLOATS, "pass")
    for dtype in INTS:
        outcome, message = after[dtype]
        assert outcome == "failure" and "Unexpected success" in message, (dtype, after[dtype])


def test_hypot_add_mps_workflow(sandbox_copy, tmp_path):
    assert ninja(sandbox_copy).returncode == 0
    before = pytest_junit(sandbox_copy, "test_output_match_hypot", tmp_path / "before.xml")
    assert {o for o, _ in before.values()} == {"xfail"}  # UNIMPLEMENTED_XFAILLIST: None

    add_hypot_dispatch(sandbox_copy)
    add_hypot_stub(sandbox_copy)
    assert ninja(sandbox_copy).returncode == 0
    after = pytest_junit(sandbox_copy, "test_output_match_hypot", tmp_path / "after.xml")
    assert {o for o, _ in after.values()} == {"failure"}
    assert all("Unexpected success" in m for _, m in after.values())
