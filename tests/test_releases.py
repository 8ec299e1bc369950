"""tests/releases.py and the real-data fixtures built on it: the layout a wheel is unpacked
into, a cache made with another layout, and what a release that cannot be fetched does."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from tests import conftest, releases

WHEEL_FILES = {
    "torchgen/packaged/ATen/native/native_functions.yaml": "- func: a(Tensor self) -> Tensor\n",
    "torchgen/packaged/ATen/native/tags.yaml": "- tag: pointwise\n",
    "torchgen/packaged/ATen/templates/Function.h": "// not taken\n",
    "torchgen/model.py": "X = 1\n",
    "torchgen/api/types/types.py": "Y = 2\n",
    "torch/testing/_internal/common_mps.py": "XFAILLIST = {}\n",
    "torch/testing/_internal/common_utils.py": "# not taken\n",
    "torch/include/ATen/native/BinaryOps.h": "DECLARE_DISPATCH(f, atan2_stub);\n",
    "torch/include/ATen/native/cpu/Loops.h": "// one level deeper: not taken\n",
    "torch/include/c10/metal/utils.h": "#pragma once\n",
}
TREE_FILES = {
    "aten/src/ATen/native/native_functions.yaml",
    "aten/src/ATen/native/tags.yaml",
    "torchgen/model.py",
    "torchgen/api/types/types.py",
    "torch/testing/_internal/common_mps.py",
    "aten/src/ATen/native/BinaryOps.h",
    "c10/metal/utils.h",
}


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache holding a made-up release 0.0.1's wheel: nothing is downloaded."""
    folder = tmp_path / "wheels"
    folder.mkdir()
    with zipfile.ZipFile(folder / "torch-0.0.1-cp311-none-any.whl", "w") as wheel:
        for name, text in WHEEL_FILES.items():
            wheel.writestr(name, text)
    monkeypatch.setenv(releases.CACHE_ENV, str(folder))
    return folder


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()} - {".complete"}


def test_a_wheel_is_unpacked_into_the_tree_layout(cache: Path) -> None:
    release = releases.release("0.0.1")
    assert release.root == cache / "torch-0.0.1"
    assert _files(release.root) == TREE_FILES
    assert (
        release.native_yaml.read_text()
        == WHEEL_FILES["torchgen/packaged/ATen/native/native_functions.yaml"]
    )
    assert (release.c10_include / "c10/metal/utils.h").is_file()
    assert (release.stub_headers / "BinaryOps.h").is_file()
    assert release.common_mps.name == "common_mps.py"


def test_a_tree_unpacked_with_another_layout_is_unpacked_again(cache: Path) -> None:
    tree = cache / "torch-0.0.1"
    (tree / "c10/metal").mkdir(parents=True)
    (tree / "c10/metal/stale.h").write_text("// an older unpacking\n")
    (tree / ".complete").write_text("torch-0.0.1-cp311-none-any.whl\n")  # no layout id
    assert releases.release_tree("0.0.1") == tree
    assert _files(tree) == TREE_FILES
    assert [p.name for p in cache.iterdir() if p.name.startswith(".")] == []  # nothing left
    # a whole tree of today's layout is used as it is
    (tree / "c10/metal/utils.h").write_text("// kept\n")
    releases.release_tree("0.0.1")
    assert (tree / "c10/metal/utils.h").read_text() == "// kept\n"


def _unavailable(version: str) -> releases.Release:
    raise releases.WheelUnavailable(f"pip download torch=={version} failed: no network")


def test_a_release_that_cannot_be_fetched_skips_saying_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(conftest, "release", _unavailable)
    monkeypatch.delenv("MPS_PIPELINE_CI", raising=False)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"torch 9\.9\.9.*no network"):
        conftest.fetched("9.9.9")


@pytest.mark.parametrize(("name", "value"), [("MPS_PIPELINE_CI", "1"), ("CI", "true")])
def test_under_ci_a_release_that_cannot_be_fetched_fails(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setattr(conftest, "release", _unavailable)
    monkeypatch.delenv("MPS_PIPELINE_CI", raising=False)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv(name, value)
    with pytest.raises(pytest.fail.Exception, match=r"torch 9\.9\.9.*CI must read them"):
        conftest.fetched("9.9.9")


def test_a_release_without_expectations_fails_naming_it(tmp_path: Path) -> None:
    with pytest.raises(pytest.fail.Exception, match="no expectation for torch 9.9.9"):
        conftest.per_release({"2.13.0": 1}, releases.Release("9.9.9", tmp_path))
