"""`affected --changed`: the path forms it accepts, and the paths it warns about instead of
quietly finding "no effect on MPS". The real CLI on a private copy of the sandbox."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline import sandbox
from pipeline.__main__ import main
from pipeline.errors import PipelineError
from pipeline.impact.changes import parse_changed, tree_path

MPS = "aten/src/ATen/native/mps"
BINARY_METAL = f"{MPS}/kernels/BinaryKernel.metal"


def _line(root: Path, rel: str, needle: str) -> int:
    lines = (root / rel).read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if needle in line)


def _affected(capsys, root: Path, state: Path, *argv: str) -> tuple[int, str, str]:
    code = main(
        [
            "affected",
            "--root",
            str(root),
            "--state-dir",
            str(state),
            "--opinfo-table",
            str(root / sandbox.OPINFO_TABLE),
            *argv,
        ]
    )
    out, err = capsys.readouterr()
    first, _, rest = err.partition("\n")
    assert first == f"root: {root.resolve()} (--root)"  # every command says which tree first
    return code, out, rest


def _json(capsys, root: Path, state: Path, *changed: str) -> tuple[dict, str]:
    argv = [a for c in changed for a in ("--changed", c)]
    code, out, err = _affected(capsys, root, state, *argv, "--json")
    assert code == 0, err
    return json.loads(out), err


def _ops(doc: dict) -> list[str]:
    return [o["operator"] for o in doc["operators"]]


@pytest.mark.slow
def test_root_relative_absolute_and_cwd_relative_paths_agree(
    sandbox_tree: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    state = tmp_path / "state"
    line = _line(sandbox_tree, BINARY_METAL, "struct atan2_functor")
    monkeypatch.chdir(tmp_path)  # outside the tree: root-relative, as before
    by_root, err = _json(capsys, sandbox_tree, state, f"{BINARY_METAL}:{line}")
    assert _ops(by_root) == ["atan2"] and by_root["warnings"] == [] and err == ""

    absolute, err = _json(capsys, sandbox_tree, state, f"{sandbox_tree / BINARY_METAL}:{line}")
    assert absolute == by_root and err == ""

    monkeypatch.chdir(sandbox_tree / MPS)
    from_cwd, err = _json(capsys, sandbox_tree, state, f"kernels/BinaryKernel.metal:{line}")
    assert from_cwd == by_root and err == ""
    dotted, _ = _json(
        capsys, sandbox_tree, state, f"./kernels/../kernels/BinaryKernel.metal:{line}"
    )
    assert dotted == by_root
    # standing in the tree, a root-relative path still works (no such file under the cwd)
    root_form, err = _json(capsys, sandbox_tree, state, f"{BINARY_METAL}:{line}")
    assert root_form == by_root and err == ""

    # the tree reached through a symlink: the root is compared with its symlinks resolved
    link = tmp_path / "link"
    link.symlink_to(sandbox_tree, target_is_directory=True)
    via_link, err = _json(capsys, sandbox_tree, state, f"{link / BINARY_METAL}:{line}")
    assert via_link == by_root and err == ""
    monkeypatch.chdir(link / MPS)
    via_link_cwd, _ = _json(capsys, link, state, f"kernels/BinaryKernel.metal:{line}")
    assert via_link_cwd == by_root


def test_outside_and_missing_paths_are_warnings_in_json_and_on_stderr(
    sandbox_tree: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    state = tmp_path / "state"
    outside = tmp_path / "elsewhere" / "BinaryKernel.metal"
    outside.parent.mkdir()
    outside.write_text("kernel void k() {}\n")
    line = _line(sandbox_tree, BINARY_METAL, "struct atan2_functor")
    monkeypatch.chdir(sandbox_tree / MPS)
    doc, err = _json(
        capsys,
        sandbox_tree,
        state,
        f"kernels/BinaryKernel.metal:{line}",
        f"{outside}:1",
        "kernels/NoSuchKernel.metal:3-4",
        "kernels",
    )
    assert _ops(doc) == ["atan2"]  # the valid path still counts
    root = sandbox_tree.resolve()
    warnings = doc["warnings"]
    assert warnings[0] == f"--changed {outside} ignored: outside the tree {root}"
    assert warnings[1].startswith(
        f"--changed kernels/NoSuchKernel.metal ignored: no such file in the tree {root} "
        f"(looked for {MPS}/kernels/NoSuchKernel.metal, kernels/NoSuchKernel.metal)"
    )
    assert "--base REV" in warnings[1]  # what to do for a deleted file
    assert warnings[2] == f"--changed kernels ignored: a directory, not a file, in the tree {root}"
    assert err.splitlines() == [f"warning: {w}" for w in warnings]
    # "no effect on MPS" is for files in the tree only
    assert doc["ignored"] == [] and not doc["full_sweep"]

    # the terminal report: the same warnings on stderr, not in the report on stdout
    monkeypatch.chdir(tmp_path)
    code, out, err = _affected(
        capsys, sandbox_tree, state, "--changed", f"{BINARY_METAL}:{line}", "--changed", "../x.mm"
    )
    assert code == 0 and "warning" not in out and "\n  atan2\n" in out
    assert err == f"warning: --changed ../x.mm ignored: outside the tree {root}\n"


def test_lines_past_the_end_are_a_warning(sandbox_tree: Path, tmp_path: Path, capsys) -> None:
    count = len((sandbox_tree / BINARY_METAL).read_text().splitlines())
    doc, err = _json(capsys, sandbox_tree, tmp_path / "state", f"{BINARY_METAL}:{count + 5}")
    assert doc["operators"] == []
    expected = f"--changed {BINARY_METAL}: line(s) {count + 5} past its end ({count} lines)"
    assert doc["warnings"][0].startswith(expected)
    assert err.startswith(f"warning: {expected}")


def test_no_path_in_the_tree_exits_2_and_says_why(
    sandbox_tree: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = _affected(
        capsys,
        sandbox_tree,
        tmp_path / "state",
        "--changed",
        "/etc/hostname",
        "--changed",
        "aten/src/ATen/native/mps/kernels/Gone.metal",
        "--json",
    )
    assert code == 2 and out == ""
    assert err.startswith("error: affected: no --changed path is a file in the tree; ")
    assert "/etc/hostname: outside the tree" in err
    assert "kernels/Gone.metal: no such file in the tree" in err
    assert "relative to the tree root or to the current directory" in err


def test_a_bad_line_suffix_exits_2(sandbox_tree: Path, tmp_path: Path, capsys) -> None:
    code, out, err = _affected(
        capsys, sandbox_tree, tmp_path / "state", "--changed", f"{BINARY_METAL}:9-3"
    )
    assert code == 2 and out == "" and "1 <= START <= END" in err


def test_help_names_the_path_forms(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["affected", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "relative to the tree root" in help_text
    assert "relative to the current directory" in help_text
    assert "absolute inside the tree" in help_text
    assert "exit 2 if no PATH is a file in the tree" in help_text


def test_parse_changed_splits_only_a_line_suffix() -> None:
    assert parse_changed("a/b.mm:3-5,9") == ("a/b.mm", [(3, 5), (9, 9)])
    assert parse_changed("/abs/b.mm:7") == ("/abs/b.mm", [(7, 7)])
    assert parse_changed("we:ird/b.mm:2") == ("we:ird/b.mm", [(2, 2)])  # the last colon
    assert parse_changed("we:ird/b.mm") == ("we:ird/b.mm", [])
    assert parse_changed("b.mm:x1") == ("b.mm:x1", [])  # not a suffix: part of the path
    for bad in ("b.mm:", "b.mm:3-", "b.mm:5-2", "b.mm:0", "b.mm:1,,2", ":3"):
        with pytest.raises(PipelineError, match="START-END"):
            parse_changed(bad)


def test_tree_path_resolution(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "f.mm").write_text("x\n")
    (root / "top.mm").write_text("x\n")
    (tmp_path / "top.mm").write_text("outside\n")
    (root / "sub" / "alias.mm").symlink_to(root / "top.mm")
    assert tree_path(root, "sub/f.mm", cwd=tmp_path) == ("sub/f.mm", None)
    assert tree_path(root, "f.mm", cwd=root / "sub") == ("sub/f.mm", None)
    assert tree_path(root, str(root / "sub/f.mm"), cwd=tmp_path) == ("sub/f.mm", None)
    # the cwd's file wins when it is in the tree; else the path is root-relative
    assert tree_path(root, "top.mm", cwd=root / "sub") == ("top.mm", None)
    assert tree_path(root, "top.mm", cwd=tmp_path) == ("top.mm", None)
    # a symlink in the tree keeps its name (it is what the diff would show)
    assert tree_path(root, "alias.mm", cwd=root / "sub") == ("sub/alias.mm", None)
    rel, why = tree_path(root, "../top.mm", cwd=tmp_path)
    assert rel is None and why == f"outside the tree {root.resolve()}"
    rel, why = tree_path(root, str(root), cwd=tmp_path)
    assert rel is None and why.startswith("a directory, not a file")


def test_an_unreadable_changed_file_is_an_input_error_naming_it(
    sandbox_tree: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    from tests.conftest import deny_read

    metal = sandbox_tree / BINARY_METAL
    metal.write_text(metal.read_text() + "\n// changed\n")
    deny_read(metal, monkeypatch)
    code, out, err = _affected(capsys, sandbox_tree, tmp_path / "state", "--base", "HEAD")
    assert code == 2 and out == "" and "Traceback" not in err
    assert f"error: {BINARY_METAL}: cannot be read: Permission denied" in err
