"""check-kernel in the flows: the migrate chain's check_math stage runs an operator's whole
kernels when it has no element-wise functor (a finding stops the chain before the build);
``check-kernel --all`` over every kernel file, naming the findings new since its last run;
pr-report's section of the changed kernel files, kept through results.json."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.doit_runs import doit

pytestmark = [pytest.mark.slow, pytest.mark.realdata]

FIXTURES = Path(__file__).parents[1] / "fixtures" / "metal_kernel"
MPS = "aten/src/ATen/native/mps"
RIGHT = "acc = c10::metal::max(acc, input[row * args.cols + c]);"
WRONG = "acc = c10::metal::min(acc, input[row * args.cols + c]);"


def plant(tree: Path, specs: Path | None, rename: tuple[str, str] = ("", "")) -> Path:
    """The Reduction fixture (its .metal, its .mm host code and, with ``specs``, its launch
    spec) copied into ``tree``, ``rename`` old -> new in each; the .metal's path."""
    copies = [(f"{MPS}/kernels/Reduction.metal", tree), (f"{MPS}/operations/Reduction.mm", tree)]
    if specs is not None:
        copies.append(("specs/Reduction.yaml", specs / "kernels"))
    for rel, into in copies:
        target = into / (rel if into == tree else Path(rel).name)
        target.parent.mkdir(parents=True, exist_ok=True)
        text = (FIXTURES / rel).read_text()
        target.write_text(text.replace(*rename) if rename[0] else text)
    return tree / MPS / "kernels" / "Reduction.metal"


def test_an_operator_without_a_functor_has_its_whole_kernels_checked(
    tmp_path: Path, host_cxx
) -> None:
    state = tmp_path / "state"
    assert doit(state, "audit", "op=atan2").returncode == 0  # materializes the sandbox
    tree = state / "sandbox"
    # max (a reduction) has no functor; a launch read from the host code, but no entry
    metal = plant(tree, None, ("row_max", "max_rows"))
    skipped = doit(state, "check_math", "op=max")
    assert skipped.returncode == 0, skipped.stdout + skipped.stderr
    record = json.loads((state / "ops" / "max" / "math.json").read_text())
    assert "Reduction.mm:37 launches max_rows_" in record["skipped"], record
    assert "has no registered Metal functor" in record["skipped"]

    plant(tree, state, ("row_max", "max_rows"))  # its launch spec entry: checked
    checked = doit(state, "check_math", "op=max")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    table = (state / "ops" / "max" / "math.md").read_text()
    assert "| `max_rows_float` | ok |" in table and "row_sum" not in table
    assert json.loads((state / "ops" / "max" / "math.json").read_text())["kernels"]

    metal.write_text(metal.read_text().replace(RIGHT, WRONG))  # a wrong kernel stops it
    wrong = doit(state, "check_math", "op=max")
    out = wrong.stdout + wrong.stderr
    assert wrong.returncode == 1, out
    assert "check-kernel: max_rows_float fail(s) on the host" in out
    assert "| `max_rows_float` | failed |" in (state / "ops" / "max" / "math.md").read_text()


def check_all(state: Path, tree: Path) -> subprocess.CompletedProcess[str]:
    yaml = tree / "aten/src/ATen/native/native_functions.yaml"  # what makes it a checkout
    yaml.parent.mkdir(parents=True, exist_ok=True)
    yaml.touch()
    return subprocess.run(
        [sys.executable, "-m", "pipeline", "--root", str(tree), "--state-dir", str(state),
         "check-kernel", "--all", "--json"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def test_all_kernel_files_and_the_findings_new_since_the_last_run(tmp_path: Path) -> None:
    from pipeline.config import load_settings
    from pipeline.flows.kernel_checks import for_files
    from pipeline.report.kernel import render_markdown
    from tests.conftest import settings_env

    state, tree = tmp_path / "state", tmp_path / "tree"
    metal = plant(tree, state)
    first = check_all(state, tree)
    assert first.returncode == 0, first.stdout + first.stderr
    doc = json.loads(first.stdout)
    assert doc["new"] == [] and doc["errors"] == []
    (only,) = doc["files"]
    assert {k["kernel"]: k["status"] for k in only["kernels"]}["row_max_float"] == "ok"

    metal.write_text(metal.read_text().replace(RIGHT, WRONG))
    second = check_all(state, tree)
    assert second.returncode == 1, second.stdout + second.stderr
    new = json.loads(second.stdout)["new"]
    assert new and all("row_max_float" in f for f in new), new
    third = check_all(state, tree)  # the same finding again is no news
    assert third.returncode == 0 and json.loads(third.stdout)["new"] == []

    # pr-report's section: the changed file's report, as results.json keeps it
    settings = load_settings(
        {"root": str(tree), "state_dir": str(state)}, env=settings_env(), cwd=tmp_path
    )
    kept = for_files(settings, [metal])
    assert kept is not None and kept.errors == () and kept.skipped is None
    assert "| `row_max_float` | failed |" in render_markdown(kept.files)


def test_a_changed_file_without_a_launch_spec_is_check_maths(tmp_path: Path) -> None:
    from pipeline.config import load_settings
    from pipeline.flows.kernel_checks import for_files
    from tests.conftest import settings_env

    metal = plant(tmp_path / "tree", None)
    settings = load_settings(
        {"root": str(tmp_path / "tree"), "state_dir": str(tmp_path / "state")},
        env=settings_env(), cwd=tmp_path,
    )  # fmt: skip
    assert for_files(settings, [metal]) is None


def test_a_tree_without_kernel_files_checks_none(tmp_path: Path) -> None:
    done = check_all(tmp_path / "state", tmp_path / "tree")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"schema": 1, "files": [], "errors": [], "new": []}


def test_a_bad_launch_spec_is_a_file_not_checked(tmp_path: Path) -> None:
    state, tree = tmp_path / "state", tmp_path / "tree"
    plant(tree, state)
    (state / "kernels" / "Reduction.yaml").write_text("kernels:\n  - kernel: row_sum_{T}\n")
    done = check_all(state, tree)
    assert done.returncode == 1
    (error,) = json.loads(done.stdout)["errors"]
    assert error.startswith("Reduction.metal:") and "reference" in error
