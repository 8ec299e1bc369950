"""Hostile or broken tree files, through the real CLI on a copy of the sandbox.

A core file (native_functions.yaml, common_mps.py) that cannot be read as UTF-8 text is one
line on stderr naming file, line, column and byte, and exit 2; a kernel, host or header
file is a warning and is skipped, and the checklist decides the exit status, with the items
resting on what was skipped unknown (``?``), never passed. A missing common_mps.py, kernels/
or operations/ folder is the same kind of gap. Never a traceback.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline.__main__ import main
from pipeline.tree import paths
from tests.conftest import deny_read
from tests.doit_runs import doit
from tests.test_machine_output import assert_valid

NATIVE_YAML = paths.NATIVE_YAML
COMMON_MPS = paths.COMMON_MPS
BINARY_METAL = f"{paths.KERNELS_DIR}/BinaryKernel.metal"
UNARY_METAL = f"{paths.KERNELS_DIR}/UnaryKernel.metal"
BINARY_MM = f"{paths.OPERATIONS_DIR}/BinaryOps.mm"
BINARY_H = f"{paths.NATIVE_DIR}/BinaryOps.h"
TABLE = paths.OPINFO_TABLE
RESAVE = "re-save the file as UTF-8"
# a Mach-O header: NUL bytes from offset 5
BINARY = b"\xcf\xfa\xed\xfe\x07\x00\x00\x01" + bytes(range(256))


def _comment(rel: str) -> bytes:
    return b"#" if rel.endswith((".yaml", ".py")) else b"//"


def latin1(path: Path, rel: str, _monkeypatch) -> str:
    """A latin-1 comment as line 3."""
    lines = path.read_bytes().splitlines(keepends=True)
    lines.insert(2, _comment(rel) + b" caf\xe9\n")
    path.write_bytes(b"".join(lines))
    column = len(_comment(rel)) + 5
    return f"{rel}: not UTF-8: byte 0xe9 at line 3, column {column}; {RESAVE}"


def utf16(path: Path, rel: str, _monkeypatch) -> str:
    path.write_bytes(path.read_text(encoding="utf-8").encode("utf-16"))  # with its mark
    return f"{rel}: a UTF-16 file (byte-order mark FF FE), not UTF-8; {RESAVE}"


def binary(path: Path, rel: str, _monkeypatch) -> str:
    path.write_bytes(BINARY)
    return f"{rel}: not a text file (NUL byte at offset 5)"


def directory(path: Path, rel: str, _monkeypatch) -> str:
    path.unlink()
    path.mkdir()
    (path / "inside.txt").write_text("x")
    return f"{rel}: is a directory, not a file"


def denied(path: Path, rel: str, monkeypatch) -> str:
    deny_read(path, monkeypatch)
    return f"{rel}: cannot be read: Permission denied"


BREAKS: dict[str, Callable[[Path, str, pytest.MonkeyPatch], str]] = {
    "latin1": latin1,
    "utf16": utf16,
    "binary": binary,
    "directory": directory,
    "denied": denied,
}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A plain copy of the sandbox tree (no git: the reference search's fallback reads too)."""
    from pipeline import sandbox

    dest = tmp_path / "pytorch"
    shutil.copytree(sandbox.TREE, dest)
    return dest


def _options(tree: Path) -> list[str]:
    # the sandbox's static OpInfo table: no torch import for op_db
    return ["--state-dir", str(tree.parent / "state"), "--opinfo-table", str(tree / TABLE)]


def cli(capsys, tree: Path, *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--root", str(tree), *_options(tree)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "Error:" not in err, err
    return code, out, err


def warnings_of(err: str) -> list[str]:
    return [line.removeprefix("warning: ") for line in err.splitlines() if line.startswith("warn")]


# ---------------------------------------------------------------------- core files: exit 2


@pytest.mark.parametrize("kind", BREAKS)
@pytest.mark.parametrize("rel", [NATIVE_YAML, COMMON_MPS])
@pytest.mark.parametrize("command", [["audit", "atan2"], ["audit", "atan2", "--json"], ["backlog"]])
def test_an_unreadable_core_file_is_one_line_and_exit_2(
    capsys, monkeypatch, tree: Path, rel: str, kind: str, command: list[str]
) -> None:
    message = BREAKS[kind](tree / rel, rel, monkeypatch)
    code, out, err = cli(capsys, tree, *command)
    assert code == 2 and out == ""
    root_line, error = err.splitlines()
    assert root_line.startswith("root: ")
    assert error == f"error: {message}"


def test_the_doit_chain_stops_at_an_unreadable_core_file(tree: Path, monkeypatch) -> None:
    message = latin1(tree / NATIVE_YAML, NATIVE_YAML, monkeypatch)
    run = doit(
        tree.parent / "state",
        "migrate_op",
        "op=atan2",
        f"root={tree}",
        f"opinfo_table={tree / TABLE}",
    )
    assert run.returncode == 2 and "Traceback" not in run.stdout + run.stderr
    # one line in our words on stderr, not doit's "TaskError - taskid:audit:atan2"
    assert f"error: the checklist of atan2: {message}\n" in run.stderr
    assert "taskid" not in run.stdout + run.stderr


def test_a_sandbox_copy_without_native_functions_yaml_says_how_to_renew_it(
    capsys, sandbox_settings
) -> None:
    (sandbox_settings.root / NATIVE_YAML).unlink()
    expected = (
        f"error: the sandbox's working copy {sandbox_settings.root} has no {NATIVE_YAML}; "
        "delete that folder and the next run makes a fresh copy"
    )
    code = main(["audit", "atan2", "--state-dir", str(sandbox_settings.state_dir)])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.splitlines() == [expected]
    run = doit(sandbox_settings.state_dir, "migrate_op", "op=atan2")
    assert run.returncode == 2 and run.stderr.splitlines() == [expected], run.stderr


# ------------------------------------------------------- kernel, host, header: warn, skip


@pytest.mark.parametrize("kind", BREAKS)
@pytest.mark.parametrize(
    ("rel", "unknown"),
    [
        (BINARY_METAL, {"functor", "dtypes"}),  # atan2_functor is in there
        (BINARY_MM, {"stub", "mpsgraph"}),  # its MPSGraph code is in there
        (BINARY_H, set()),  # its stub's declaration: the plan's business, no check's
    ],
)
def test_an_unreadable_source_file_is_a_warning_and_its_checks_unknown(
    capsys, monkeypatch, tree: Path, rel: str, unknown: set[str], kind: str
) -> None:
    message = BREAKS[kind](tree / rel, rel, monkeypatch)
    code, out, err = cli(capsys, tree, "audit", "atan2", "--json")
    assert code == 1  # atan2 is not migrated: its checklist says 1 anyway
    assert warnings_of(err) == [f"{message} (skipped)"] and "error" not in err
    doc = json.loads(out)
    assert_valid("audit --json", doc)
    assert doc["warnings"] == [f"{message} (skipped)"]
    status = {c["id"]: c["status"] for c in doc["checklist"]}
    assert {i for i, s in status.items() if s == "unknown"} == unknown
    for item in doc["checklist"]:
        if item["status"] == "unknown":
            assert item["details"][-1]["text"] == f"unknown: {message} (skipped)"

    code, out, err = cli(capsys, tree, "backlog", "--json")
    assert code == 0 and warnings_of(err) == [f"{message} (skipped)"]
    assert json.loads(out)["warnings"] == [f"{message} (skipped)"]


def test_a_skipped_file_the_operator_does_not_rest_on_leaves_the_verdict(
    capsys, monkeypatch, tree: Path
) -> None:
    # copysign's functor and registrations are in BinaryKernel.metal: it is still done
    message = binary(tree / UNARY_METAL, UNARY_METAL, monkeypatch)
    code, out, err = cli(capsys, tree, "audit", "copysign")
    assert code == 0 and warnings_of(err) == [f"{message} (skipped)"]
    assert "8/8 checks pass" in out and "?" not in out


def test_a_skipped_kernel_file_the_operator_rests_on_is_not_done(
    capsys, monkeypatch, tree: Path
) -> None:
    message = latin1(tree / BINARY_METAL, BINARY_METAL, monkeypatch)
    code, out, err = cli(capsys, tree, "audit", "copysign")
    assert code == 1 and warnings_of(err) == [f"{message} (skipped)"]
    assert " ? Metal functor in kernels/*.metal" in out
    assert "6/8 checks pass, 2 unknown" in out


# ----------------------------------------------------- missing file or folder: unknown


@pytest.mark.parametrize(
    ("remove", "warning", "unknown"),
    [
        (COMMON_MPS, f"{COMMON_MPS}: missing; no xfail lists were read", {"xfails"}),
        (
            paths.KERNELS_DIR,
            f"no file matches {paths.KERNELS_METAL} under {{root}}",
            {"functor", "dtypes"},
        ),
        (
            paths.OPERATIONS_DIR,
            f"no file matches {paths.OPERATIONS_MM} under {{root}}",
            {"stub", "mpsgraph", "old_names"},
        ),
    ],
)
def test_a_missing_core_part_makes_its_checks_unknown_never_passed(
    capsys, tree: Path, remove: str, warning: str, unknown: set[str]
) -> None:
    target = tree / remove
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    warning = warning.format(root=tree)
    # copysign is done: every check passes on the whole tree
    code, out, err = cli(capsys, tree, "audit", "copysign")
    assert code == 1 and warnings_of(err) == [warning]
    unknown_lines = [line for line in out.splitlines() if line.startswith(" ? ")]
    assert len(unknown_lines) == len(unknown)
    assert f"{8 - len(unknown)}/8 checks pass, {len(unknown)} unknown" in out
    assert f"unknown: {warning}" in out

    code, out, err = cli(capsys, tree, "audit", "copysign", "--json")
    doc = json.loads(out)
    assert_valid("audit --json", doc)
    assert code == 1 and doc["warnings"] == [warning]
    status = {c["id"]: c["status"] for c in doc["checklist"]}
    assert {i for i, s in status.items() if s == "unknown"} == unknown
    assert all(s == "pass" for i, s in status.items() if i not in unknown)
    assert not any(c["ok"] for c in doc["checklist"] if c["id"] in unknown)

    code, out, err = cli(capsys, tree, "backlog", "--json")
    assert code == 0 and warnings_of(err) == [warning]
    assert json.loads(out)["warnings"] == [warning]


def test_the_doit_audit_stage_shows_the_warning_and_the_unknown(tree: Path) -> None:
    (tree / COMMON_MPS).unlink()
    run = doit(
        tree.parent / "state",
        "audit",
        "op=copysign",
        f"root={tree}",
        f"opinfo_table={tree / TABLE}",
    )
    # the stage records the checklist, it does not judge it
    assert run.returncode == 0 and "Traceback" not in run.stdout + run.stderr
    assert f"warning: {COMMON_MPS}: missing; no xfail lists were read" in run.stdout
    assert " ? no xfail/skip entries in common_mps.py" in run.stdout


@pytest.mark.slow
def test_migrate_does_not_call_an_operator_done_with_unknown_checks(
    capsys, sandbox_settings
) -> None:
    (sandbox_settings.root / COMMON_MPS).unlink()
    code = main(["migrate", "copysign", "--state-dir", str(sandbox_settings.state_dir)])
    out, err = capsys.readouterr()
    assert code == 1 and "Traceback" not in out + err
    summary = (sandbox_settings.state_dir / "ops/copysign/summary.md").read_text()
    assert "Every checklist item passes" not in summary
    assert f"Warnings:\n- {COMMON_MPS}: missing; no xfail lists were read" in summary
    assert "- ? no xfail/skip entries in common_mps.py" in summary
    assert "1 checklist item(s) left, 1 of them unknown" in out + err
