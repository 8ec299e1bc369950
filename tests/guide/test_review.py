"""The review checks on real git diffs of the upstream-shaped fixtures (tests/fixtures/upstream):
for each check one change it passes and one it flags, through the review flow."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.config import load_settings
from pipeline.errors import ConfigError
from pipeline.flows.review import check_changes, helper_headers
from pipeline.guide.review import CHECKS
from pipeline.guide.review.base import MathResult
from pipeline.impact.changes import changed_files
from pipeline.tree.metal_functions import helpers
from tests.conftest import FIXTURES, git_init, settings_env

METAL = "aten/src/ATen/native/mps/kernels/BinaryKernel.metal"
OPS_MM = "aten/src/ATen/native/mps/operations/BinaryOps.mm"
OPINFO = "torch/testing/_internal/opinfo_table.yaml"
COMMON_MPS = "torch/testing/_internal/common_mps.py"
# a c10/metal header of our own, in the shape of utils.h: one helper by name, one by shape
HEADER = """\
#pragma once
#include <metal_stdlib>
namespace c10 {
namespace metal {
template <typename T>
inline T safe_mod(T x, T y) {
  return x - y * ::metal::floor(x / y);
}
template <typename T>
inline T clamp_to_unit(T value, T low) {
  return value < low ? low : (value > T(1) ? T(1) : value);
}
} // namespace metal
} // namespace c10
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "pytorch"
    shutil.copytree(FIXTURES / "upstream", root)
    (root / "c10/metal").mkdir(parents=True)
    (root / "c10/metal/utils.h").write_text(HEADER)
    git_init(root)
    return root


def _settings(root: Path, **review):
    settings = load_settings(
        {"root": str(root), "state_dir": str(root.parent / "state"), "opinfo_table": OPINFO},
        env=settings_env(), cwd=root.parent,
    )  # fmt: skip
    if review:
        import dataclasses

        settings = dataclasses.replace(
            settings, review=dataclasses.replace(settings.review, **review)
        )
    return settings


def edit(root: Path, path: str, old: str, new: str) -> None:
    file = root / path
    text = file.read_text()
    assert old in text, old
    file.write_text(text.replace(old, new, 1))


def findings(root: Path, check: str | None = None, **kw):
    # each check on its own: check-math's own results only where a test passes them
    kw.setdefault("math_results", {})
    settings = _settings(root)
    report = check_changes(settings, changed_files(root, "HEAD"), base="HEAD", **kw)
    return [f for f in report.findings if check is None or f.check == check]


def line_of(root: Path, path: str, needle: str) -> int:
    lines = (root / path).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if needle in line)


# -- mpsgraph-left ---------------------------------------------------------------------------


def test_mpsgraph_left_flags_a_kernel_beside_the_old_graph(tree):
    edit(tree, METAL, "const float m = ::metal::max(float(a), float(b));",
         "const float m = c10::metal::max(float(a), float(b));")  # fmt: skip
    (found,) = findings(tree, "mpsgraph-left")
    assert (found.path, found.line) == (OPS_MM, line_of(tree, OPS_MM, "TORCH_IMPL_FUNC(logaddexp"))
    assert found.severity.value == "error"
    assert "logaddexp has a Metal kernel, but its MPSGraph implementation logaddexp_out_mps" in (
        found.reason
    )


MINIMUM_FUNCTOR = """
struct minimum_functor {
  template <typename T>
  inline T operator()(const T a, const T b) {
    return c10::metal::min(a, b);
  }
};
REGISTER_FLOAT_BINARY_OP(minimum);
"""


def test_mpsgraph_left_flags_a_new_kernel_while_the_yaml_still_dispatches_to_mpsgraph(tree):
    text = (tree / METAL).read_text()
    (tree / METAL).write_text(text + MINIMUM_FUNCTOR)
    flagged = findings(tree, "mpsgraph-left")
    found = {(f.path, f.reason.split(",")[0].split(":")[0]) for f in flagged}
    yaml = "aten/src/ATen/native/native_functions.yaml"
    assert (yaml, "minimum.out still dispatches MPS to minimum_out_mps") in found
    assert (OPS_MM, "minimum has a Metal kernel") in found  # CREATE_MPS_..._FUNC(minimum_out_mps


def test_mpsgraph_left_passes_a_migration_that_removed_the_graph(tree):
    edit(tree, METAL, "return precise::atan2(float(a), float(b));\n  }\n};",
         "return precise::atan2(static_cast<float>(a), float(b));\n  }\n};")  # fmt: skip
    assert findings(tree, "mpsgraph-left") == []


# -- fast-math ----------------------------------------------------------------------------------


def test_fast_math_in_a_changed_functor_is_flagged(tree):
    edit(tree, METAL, "return precise::atan2(float(a), float(b));\n  }\n};",
         "return metal::fast::atan2(float(a), float(b));\n  }\n};")  # fmt: skip
    (found,) = findings(tree, "fast-math")
    assert found.line == line_of(tree, METAL, "metal::fast::atan2")
    assert "atan2_functor calls metal::fast::atan2" in found.reason
    assert "precise::atan2" in found.reason


def test_precise_math_and_fast_in_a_comment_pass(tree):
    edit(
        tree,
        METAL,
        "return precise::atan2(float(a), float(b));\n  }\n};",
        "// not fast::atan2: precision\n    return precise::atan2(float(a), float(b));\n  }\n};",
    )
    assert findings(tree, "fast-math") == []


# -- bare-minmax ---------------------------------------------------------------------------------


def test_bare_max_in_a_functor_is_flagged(tree):
    edit(tree, METAL, "return c10::metal::max(a, b);", "return max(a, b);")
    (found,) = findings(tree, "bare-minmax")
    assert found.line == line_of(tree, METAL, "return max(a, b);")
    assert "maximum_functor calls max(), which is metal::max" in found.reason
    assert "c10::metal::max" in found.reason


def test_c10_metal_max_and_numeric_limits_pass(tree):
    edit(
        tree,
        METAL,
        "return c10::metal::max(a, b);",
        "return a == ::metal::numeric_limits<T>::max() ? a : c10::metal::max(a, b);",
    )
    assert findings(tree, "bare-minmax") == []


def test_metal_qualified_max_and_fmin_are_flagged_too(tree):
    edit(tree, METAL, "return c10::metal::max(a, b);", "return ::metal::fmin(a, metal::max(a, b));")
    found = findings(tree, "bare-minmax")
    assert [f.reason.split(": ")[0] for f in found] == [
        "maximum_functor calls ::metal::fmin(), which is metal::fmin",
        "maximum_functor calls metal::max(), which is metal::max",
    ]


# -- helper-exists -------------------------------------------------------------------------------

NEW_HELPERS = """
template <typename T>
inline T safe_mod(T a, T b) {
  return a - b;
}
template <typename U>
inline U unit_clamp(U x, U lo) {
  return x < lo ? lo : (x > U(1) ? U(1) : x);
}
"""


def test_a_helper_c10_metal_has_is_flagged_by_name_and_by_shape(tree):
    edit(tree, METAL, "using namespace metal;\n", "using namespace metal;\n" + NEW_HELPERS)
    by_name, by_shape = findings(tree, "helper-exists")
    assert by_name.line == line_of(tree, METAL, "inline T safe_mod") - 1  # its template line
    assert "safe_mod() is new, but c10/metal has a function of that name: c10::metal::safe_mod" in (
        by_name.reason
    )
    assert "same signature and body shape: c10::metal::clamp_to_unit" in by_shape.reason
    assert "(c10/metal/utils.h:9)" in by_shape.reason


def test_a_new_helper_of_its_own_passes(tree):
    edit(
        tree,
        METAL,
        "using namespace metal;\n",
        "using namespace metal;\ninline float half_of(float x) {\n  return x * 0.5f;\n}\n",
    )
    assert findings(tree, "helper-exists") == []


@pytest.mark.realdata
def test_the_wheels_c10_metal_headers_know_floor_divide(tree):
    shutil.rmtree(tree / "c10")
    texts, where = helper_headers(tree)
    if where is None:
        pytest.skip("torch==2.13.0 is not installed (its include/c10/metal headers)")
    known = helpers(texts)
    assert {"floor_divide", "fmod", "max", "min"} <= {f.name for f in known}
    edit(tree, METAL, "using namespace metal;\n",
         "using namespace metal;\ntemplate <typename T>\ninline T floor_divide(T x, T y) {\n"
         "  return ::metal::floor(x / y);\n}\n")  # fmt: skip
    (found,) = findings(tree, "helper-exists", helper_functions=known)
    assert "c10::metal::floor_divide (c10/metal/utils.h:" in found.reason


# -- dtype-coverage ------------------------------------------------------------------------------


def test_dtypes_the_opinfo_tests_but_no_kernel_registers_are_flagged(tree):
    edit(tree, METAL, "REGISTER_INT2FLOAT_BINARY_OP(atan2);\n", "")
    edit(tree, METAL, "return precise::atan2(float(a), float(b));\n  }\n};",
         "return precise::atan2(float(a), float(b)); // integers\n  }\n};")  # fmt: skip
    (found,) = findings(tree, "dtype-coverage")
    assert "atan2: the OpInfo tests int64, bool on MPS, but no kernel is registered" in found.reason


def test_full_coverage_passes_and_xfails_left_for_registered_dtypes_are_noted(tree):
    edit(tree, METAL, "return precise::atan2(float(a), float(b));\n  }\n};",
         "return precise::atan2(float(a), float(b)); // integers\n  }\n};")  # fmt: skip
    assert findings(tree, "dtype-coverage") == []
    (tree / COMMON_MPS).write_text(
        "def mps_ops_modifier(ops):\n"
        "    UNIMPLEMENTED_XFAILLIST = {\n"
        '        "atan2": [torch.float16],\n'
        "    }\n"
    )
    (found,) = findings(tree, "dtype-coverage")
    assert (found.path, found.line, found.severity.value) == (COMMON_MPS, 3, "info")
    assert "atan2 stays in UNIMPLEMENTED_XFAILLIST for float16" in found.reason


# -- check-math ------------------------------------------------------------------------------------


@pytest.mark.slow  # compiles the changed kernels file for check-math
def test_check_math_results_fail_or_pass_each_changed_functor(tree):
    edit(tree, METAL, "return precise::atan2(float(a), float(b));\n  }\n};",
         "return precise::atan2(float(b), float(a));\n  }\n};")  # fmt: skip
    wrong = {"atan2": MathResult("atan2", False, "float32 (1, 2): got 1.107, torch 0.4636")}
    (found,) = findings(tree, "check-math", math_results=wrong)
    assert found.severity.value == "error" and "got 1.107, torch 0.4636" in found.reason
    right = {"atan2": MathResult("atan2", True, "")}
    assert findings(tree, "check-math", math_results=right) == []
    # without results given, the flow runs check-math itself on the changed kernels file
    report = check_changes(_settings(tree), changed_files(tree, "HEAD"))
    ran = [f for f in report.findings if f.check == "check-math"]
    if report.notes and any(n.startswith("check-math: not run: ") for n in report.notes):
        pytest.skip(f"check-math cannot run here: {report.notes}")
    assert [(f.severity.value, "atan2_functor disagrees" in f.reason) for f in ran] == [
        ("error", True)
    ]


# -- configuration and the command ---------------------------------------------------------------


def test_a_check_turned_off_in_the_config_does_not_run(tree):
    edit(tree, METAL, "return c10::metal::max(a, b);", "return max(a, b);")
    # check-math off too: it would find what this max loses (NaN), as it should
    settings = _settings(tree, disable=("bare-minmax", "check-math"))
    report = check_changes(settings, changed_files(tree, "HEAD"))
    assert "bare-minmax" not in report.ran and not report.findings
    with pytest.raises(ConfigError, match="unknown review check bare-max"):
        check_changes(_settings(tree, disable=("bare-max",)), changed_files(tree, "HEAD"))


def test_every_check_has_an_id_severity_and_title():
    assert list(CHECKS) == [
        "mpsgraph-left", "fast-math", "bare-minmax", "helper-exists", "dtype-coverage",
        "check-math",
    ]  # fmt: skip
    assert all(m.SEVERITY.value in ("error", "warning") and m.TITLE for m in CHECKS.values())


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPS_PIPELINE_")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    return subprocess.run(
        [sys.executable, "-m", "pipeline", "review", "--root", str(root), "--opinfo-table",
         OPINFO, "--state-dir", str(root.parent / "state"), *args],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip


@pytest.mark.slow
def test_the_review_command_exits_1_on_an_error_and_0_when_clean(tree):
    proc = _cli(tree, "--base", "HEAD")
    assert proc.returncode == 0, proc.stderr
    assert "review: 0 errors, 0 warnings" in proc.stdout
    edit(tree, METAL, "return c10::metal::max(a, b);", "return max(a, b);")
    proc = _cli(tree, "--base", "HEAD")
    assert proc.returncode == 1, proc.stderr
    assert f"{METAL}:{line_of(tree, METAL, 'return max(a, b);')}: error [bare-minmax]" in (
        proc.stdout
    )
    doc = json.loads(_cli(tree, "--base", "HEAD", "--json").stdout)
    # the bare max, and (where check-math can run) the NaN it loses
    assert doc["schema"] == 1 and "bare-minmax" in {f["check"] for f in doc["findings"]}
    listed = _cli(tree, "--list")
    assert listed.returncode == 0 and "mpsgraph-left" in listed.stdout
    bad = _cli(tree, "--base", "no-such-rev")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].startswith("error: git")
