"""`audit` and `backlog`: the checklist, its JSON schema, the backlog on sandbox and real data."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from pipeline.__main__ import main
from pipeline.config import load_settings
from pipeline.guide import backlog
from pipeline.guide import checklist as audit
from pipeline.tree.index import load_index
from pipeline.tree.native_yaml import parse as parse_yaml
from tests.conftest import per_release

CHECK_IDS = [
    "dispatch",
    "functor",
    "dtypes",
    "stub",
    "mpsgraph",
    "old_names",
    "xfails",
    "decorators",
]


def _cli(capsys, state: Path, *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--state-dir", str(state)])
    out, err = capsys.readouterr()
    return code, out, err


def test_audit_json_schema_for_atan2(capsys, tmp_path: Path) -> None:
    code, out, _ = _cli(capsys, tmp_path / "state", "audit", "arctan2", "--json")
    assert code == 1  # checks fail before the migration
    doc = json.loads(out)
    assert doc["schema"] == audit.SCHEMA_VERSION
    assert doc["op"] == "atan2" and doc["workflow"] == "migrate"
    assert {o["func"]: o["kind"] for o in doc["overloads"]}["atan2.out"] == "mps_specific"
    assert {o["func"]: o["kernel"] for o in doc["overloads"]}["atan2.out"] == "atan2_out_mps"
    functor = doc["functors"][0]
    assert functor["name"] == "atan2" and functor["file"].endswith("BinaryKernel.metal")
    assert ["int64", "float32"] in functor["dtypes"]
    assert doc["mpsgraph"][0]["name"] == "atan2_out_mps"
    assert doc["mpsgraph"][0]["file"].endswith("BinaryOps.mm")
    (xfail,) = doc["xfails"]
    assert (xfail["list"], xfail["key"]) == ("UNIMPLEMENTED_XFAILLIST", "atan2")
    assert xfail["dtypes"] == ["int64", "int32", "int16", "int8", "uint8", "bool"]
    assert isinstance(xfail["line"], int)
    assert "TestConsistencyMPS::test_output_match_atan2_mps_float32" in doc["tests"]
    checks = {c["id"]: c for c in doc["checklist"]}
    assert list(checks) == CHECK_IDS
    assert not checks["dispatch"]["ok"] and checks["functor"]["ok"] and checks["dtypes"]["ok"]
    assert not checks["stub"]["ok"] and not checks["mpsgraph"]["ok"]
    assert checks["dispatch"]["details"][0]["file"].endswith("native_functions.yaml")


def test_audit_terminal_output_has_marks_and_locations(capsys, tmp_path: Path) -> None:
    code, out, _ = _cli(capsys, tmp_path / "state", "audit", "atan2")
    assert code == 1
    assert "✗ MPS dispatch on every overload" in out
    assert "✓ Metal functor" in out
    assert "BinaryOps.mm:" in out and "native_functions.yaml:" in out
    assert "3/8 checks pass" in out


def test_audit_of_a_finished_operator_passes(capsys, tmp_path: Path) -> None:
    code, out, _ = _cli(capsys, tmp_path / "state", "audit", "copysign", "--json")
    doc = json.loads(out)
    failing = [c["id"] for c in doc["checklist"] if not c["ok"]]
    assert doc["workflow"] == "done"
    assert code == (1 if failing else 0)
    assert "dispatch" not in failing and "stub" not in failing


def test_unknown_operator_exits_2_with_suggestions(capsys, tmp_path: Path) -> None:
    code, out, err = _cli(capsys, tmp_path / "state", "audit", "atan")
    assert code == 2 and out == ""
    assert "unknown operator 'atan'" in err and "atan2" in err
    code, _, err = _cli(capsys, tmp_path / "state", "audit", "ATAN3")
    assert code == 2 and "Did you mean: atan2" in err  # case does not hide the suggestion


def test_operator_names_ignore_case_when_only_one_name_matches(capsys, tmp_path: Path) -> None:
    code, out, err = _cli(capsys, tmp_path / "state", "audit", "ATAN2")
    # resolved: atan2's checklist (it fails before migrating), no error after the root line
    assert code == 1 and err.startswith("root: the bundled sandbox") and "error" not in err
    assert out.startswith("atan2  workflow: migrate")
    code, out, _ = _cli(capsys, tmp_path / "state", "audit", "ArcTan2", "--json")
    assert json.loads(out)["op"] == "atan2"  # an alias, in any case


def test_backlog_on_the_sandbox_puts_easy_wins_first(sandbox_settings) -> None:
    items = backlog.backlog(load_index(sandbox_settings.tree))
    by_op = {i.op: i for i in items}
    assert by_op["atan2"].workflow == "migrate" and by_op["hypot"].workflow == "add"
    assert "copysign" not in by_op  # already native
    # one workflow rule: MPSGraph behind a stub is "migrate" in the backlog as in the audit
    assert by_op["trunc"].workflow == by_op["ceil"].workflow == "migrate"
    # a half-done migration: only erfinv's include is left in UnaryOps.mm
    assert by_op["erfinv"].workflow == "migrate" and by_op["erfinv"].overloads == 0
    assert [i.effort for i in items] == sorted(i.effort for i in items)
    assert items.index(by_op["atan2"]) < items.index(by_op["xlogy"])  # functor exists


def test_backlog_cli_json(capsys, tmp_path: Path) -> None:
    code, out, _ = _cli(capsys, tmp_path / "state", "backlog", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["schema"] == backlog.SCHEMA_VERSION
    rows = doc["items"]
    assert {"op", "workflow", "overloads", "xfail_dtypes", "has_functor"} <= set(rows[0])


# the yaml entries with an MPS row of their own, read from each release's file
REAL_MPS_SPECIFIC = {"2.13.0": 293, "2.15.0": 279}


@pytest.mark.slow
@pytest.mark.realdata
def test_backlog_on_the_real_yaml_groups_every_mps_specific_row(
    real_native_yaml: Path, real_release, tmp_path: Path
) -> None:
    root = tmp_path / "pytorch"
    dest = root / "aten/src/ATen/native/native_functions.yaml"
    dest.parent.mkdir(parents=True)
    shutil.copyfile(real_native_yaml, dest)
    (tmp_path / "opinfo.yaml").write_text("[]\n")
    settings = dataclasses.replace(
        load_settings({"root": str(root), "state_dir": str(tmp_path / "state")}, env={}),
        opinfo_table=tmp_path / "opinfo.yaml",
    )
    items = backlog.backlog(load_index(settings.tree))
    entries = parse_yaml(dest.read_text(), "native_functions.yaml").entries
    specific = [e for e in entries if e.mps_kind == "mps_specific"]
    assert len(specific) == per_release(REAL_MPS_SPECIFIC, real_release)
    assert {i.op for i in items} == {e.operator for e in specific}
    assert all(i.workflow == "migrate" for i in items)
    assert {k for i in items for k in i.mps_kernels} == {e.kernel_for("MPS") for e in specific}


def test_a_closed_pipe_is_not_a_traceback(tmp_path: Path) -> None:
    # `mps-pipeline backlog --json | head -1`: the reader goes away before the output ends
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "pipeline", "backlog", "--json", "--state-dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    proc.stdout.close()  # nobody reads
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 0
    assert "Traceback" not in err and "BrokenPipeError" not in err
