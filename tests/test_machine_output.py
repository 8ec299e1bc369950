"""docs/machine-output.md: every documented JSON Schema is valid, and real output matches it.

Each schema is read from the document itself (the first ```json block under its heading),
so the document cannot drift from the code unnoticed: the outputs come from the real
commands on a sandbox copy, and the negative tests show that the schemas do reject a
document with a field missing, a field too many or a value outside its vocabulary.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pipeline import sandbox
from pipeline import state as layout
from pipeline.__main__ import main
from pipeline.commands import config as config_command
from pipeline.commands import history as history_command
from pipeline.config import load_settings
from pipeline.guide import backlog, checklist, exec_paths
from pipeline.guide import review as review_checks
from pipeline.impact.analyze import SCHEMA as AFFECTED_SCHEMA
from pipeline.report import dashboard
from pipeline.results import kernel as kernel_results
from pipeline.results import math as math_results
from pipeline.results import nightly, pr, shards
from pipeline.results import speed as speeds
from tests.commands.test_pr_report import (
    ATAN2_BOOL_XFAIL,
    COMMON_MPS,
    COPYSIGN_INTS,
    COPYSIGN_NO_INT64,
    build_now,
    record_nights,
    sweep,
    touch_atan2,
)
from tests.conftest import commit, git, settings_env
from tests.impact.test_suspects import three_commits
from tests.results.nightly_runs import RUNNERS
from tests.sandbox.edits import BINARY_METAL, edit

DOC = Path(__file__).resolve().parents[1] / "docs" / "machine-output.md"
# heading in docs/machine-output.md -> the schema version the code writes
OUTPUTS = {
    "audit --json": checklist.SCHEMA_VERSION,
    "backlog --json": backlog.SCHEMA_VERSION,
    "paths --json": exec_paths.SCHEMA_VERSION,
    "affected --json": AFFECTED_SCHEMA,
    "config --json": config_command.SCHEMA,
    "nightly summary.json": nightly.SCHEMA,
    "pr-report results.json": pr.SCHEMA,
    "shards --json": shards.SCHEMA,
    "check-math --json": math_results.SCHEMA,
    "check-kernel --json": kernel_results.SCHEMA,
    "review --json": review_checks.SCHEMA_VERSION,
    "backlog --claims --json": 1,
    "speed.json": speeds.SCHEMA_VERSION,
    "history copy --json": history_command.SCHEMA,
}
_HEADING = re.compile(r"^## (.+?)\s*$", re.MULTILINE)
_JSON_BLOCK = re.compile(r"^```json\n(.*?)^```$", re.MULTILINE | re.DOTALL)


@cache
def schemas() -> dict[str, dict[str, Any]]:
    """Heading -> the schema in the first ```json block of its section."""
    text = DOC.read_text(encoding="utf-8")
    found = {}
    headings = list(_HEADING.finditer(text))
    for heading, following in zip(headings, [*headings[1:], None], strict=True):
        section = text[heading.end() : following.start() if following else len(text)]
        block = _JSON_BLOCK.search(section)
        if block is not None:
            found[heading.group(1)] = json.loads(block.group(1))
    return found


def errors(output: str, doc: Any) -> list[str]:
    """Where ``doc`` breaks the schema of ``output`` (empty: it is valid)."""
    validator = jsonschema.Draft202012Validator(schemas()[output])
    return [
        f"{e.json_path}: {e.message}"
        for e in sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    ]


def assert_valid(output: str, doc: Any) -> None:
    problems = errors(output, doc)
    assert not problems, f"{output} does not match docs/machine-output.md:\n" + "\n".join(
        problems[:20]
    )
    broken = copy.deepcopy(doc)
    del broken["schema"]
    assert errors(output, broken), f"{output}: a document without 'schema' passed"


def cli_json(capsys, *argv: str) -> tuple[int, Any]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    return code, json.loads(out)


# ------------------------------------------------------------------- the document itself


def test_every_output_has_one_valid_draft_2020_12_schema() -> None:
    found = schemas()
    assert set(found) == set(OUTPUTS)
    for output, version in OUTPUTS.items():
        schema = found[output]
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert schema["properties"]["schema"] == {"const": version}, output
        assert "schema" in schema["required"] and schema["additionalProperties"] is False


def test_every_json_help_points_at_the_document(capsys) -> None:
    commands = (
        "audit", "backlog", "paths", "affected", "config", "nightly", "pr-report", "shards"
    )  # fmt: skip
    for command in (*commands, "check-math", "check-kernel"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        help_text = "".join(capsys.readouterr().out.split())  # argparse wraps at the "-"
        assert "schema:docs/machine-output.md" in help_text, command
    readme = (DOC.parents[1] / "README.md").read_text(encoding="utf-8")
    assert "docs/machine-output.md" in readme


def test_shared_parts_are_documented_alike() -> None:
    """results.json embeds affected's object and summary.json's table and decisions; the
    nightly's backlog items are backlog --json's: the copies in the document must agree."""
    found = schemas()
    affected, summary = found["affected --json"], found["nightly summary.json"]
    results, items = found["pr-report results.json"], found["backlog --json"]
    impact = results["$defs"]["impact"]
    embedded = {k: v for k, v in affected["properties"].items() if k != "schema"}
    assert impact["properties"] == embedded
    assert impact["required"] == [k for k in affected["required"] if k != "schema"]
    for name in ("decision", "counts", "outcome", "dtypes_or_all", "strings"):
        assert results["$defs"][name] == summary["$defs"][name], name
    # summary.json's table is results.json's, but a plain cell may be just its outcome
    compact = summary["$defs"]["nightly_table"]
    full = results["$defs"]["table"]
    cells = full["properties"]["rows"]["items"]["properties"]["cells"]
    assert cells["additionalProperties"] == summary["$defs"]["cell"]
    one_of = [{"$ref": "#/$defs/outcome"}, {"$ref": "#/$defs/cell"}]
    compact_cells = {**cells, "additionalProperties": {"oneOf": one_of}}
    rows = {**full["properties"]["rows"], "items": {**full["properties"]["rows"]["items"]}}
    rows["items"]["properties"] = {**rows["items"]["properties"], "cells": compact_cells}
    assert compact == {**full, "properties": {**full["properties"], "rows": rows}}
    assert summary["$defs"]["backlog_item"] == items["$defs"]["item"]


# -------------------------------------------------------------------- real output, valid


@pytest.mark.parametrize(
    ("op", "workflow"), [("atan2", "migrate"), ("hypot", "add"), ("copysign", "done")]
)
def test_audit_json(capsys, sandbox_settings, op, workflow) -> None:
    _, doc = cli_json(capsys, "audit", op, "--json", "--state-dir", str(sandbox_settings.state_dir))
    assert doc["workflow"] == workflow
    assert_valid("audit --json", doc)


@pytest.mark.slow
@pytest.mark.realdata
def test_check_math_json(capsys, sandbox_settings, host_cxx) -> None:
    state = str(sandbox_settings.state_dir)
    code, doc = cli_json(
        capsys, "check-math", "--file", "BinaryKernel.metal", "--json", "--state-dir", state
    )
    assert code == 1 and not doc["ok"]  # the sandbox's hypot overflows (see tests/flows)
    assert_valid("check-math --json", doc)
    code, doc = cli_json(capsys, "check-math", "atan2", "--json", "--state-dir", state)
    assert code == 0 and doc["ok"] and doc["functors"][0]["cached"]
    assert_valid("check-math --json", doc)


def test_backlog_json(capsys, sandbox_settings) -> None:
    _, doc = cli_json(capsys, "backlog", "--json", "--state-dir", str(sandbox_settings.state_dir))
    assert {i["workflow"] for i in doc["items"]} == {"migrate", "add"}
    assert_valid("backlog --json", doc)
    assert all(sum(i["paths"].values()) >= i["overloads"] for i in doc["items"])


def test_paths_json(capsys, sandbox_settings) -> None:
    state = str(sandbox_settings.state_dir)
    _, doc = cli_json(capsys, "paths", "--json", "--state-dir", state)
    assert doc["counts"]["metal"] and doc["counts"]["mpsgraph"] and doc["counts"]["composite"]
    assert_valid("paths --json", doc)
    _, one = cli_json(capsys, "paths", "arctan2", "--json", "--state-dir", state)
    assert [o["op"] for o in one["operators"]] == ["atan2"]  # an alias is resolved
    assert_valid("paths --json", one)


@pytest.mark.parametrize(
    ("changed", "what"),
    [
        (f"{BINARY_METAL}:1-400", "operators"),
        ("test/test_mps.py:1", "full_sweep_reasons"),
        ("README.md:1", "ignored"),
    ],
)
def test_affected_json(capsys, sandbox_settings, changed, what) -> None:
    state = str(sandbox_settings.state_dir)
    _, doc = cli_json(capsys, "affected", "--changed", changed, "--json", "--state-dir", state)
    assert doc[what], f"{changed}: no {what}"
    assert_valid("affected --json", doc)


def test_config_json(capsys, sandbox_settings, monkeypatch) -> None:
    monkeypatch.setenv("MPS_PIPELINE_TEST_KINDS", "output_match output_grad_match")
    monkeypatch.setenv("MPS_PIPELINE_TEST_KIND", "output_match")  # no setting: a warning
    _, doc = cli_json(capsys, "config", "--json", "--state-dir", str(sandbox_settings.state_dir))
    assert doc["settings"]["test.kinds"]["origin"] == "MPS_PIPELINE_TEST_KINDS"
    assert doc["warnings"]
    assert_valid("config --json", doc)
    del doc["settings"]["runners"]
    assert errors("config --json", doc) == ["$.settings: 'runners' is a required property"]


@pytest.mark.slow
def test_nightly_summary_json(capsys, sandbox_settings, nights) -> None:
    """Three nightlies (the third with a regression and a flaky test), each summary.json
    valid; the last one has every list filled, so no part of the schema goes unchecked.
    atan2 int64 fails on macos-m1-14 only, every night: a move to a macOS-version list."""
    state = ["--state-dir", str(sandbox_settings.state_dir)]
    summary_json = sandbox_settings.state_dir / "dashboard" / dashboard.SUMMARY_JSON
    for results in (nights.results(macos_m1_14="old"), nights.results(macos_m1_14="old")):
        assert main(["nightly", "--results", str(results), *state]) == 0
        capsys.readouterr()
        assert_valid("nightly summary.json", json.loads(summary_json.read_text()))
    third = nights.results(macos_m1_14="bad", macos_m2_15="flaky")
    three_commits(sandbox_settings.root)  # tonight's HEAD: the regressions have suspects
    # and a report the nightly skips (nested far too deep)
    (third / "macos-m2-26" / "shard-9.xml").write_text("<testsuite>" * 100 + "</testsuite>" * 100)
    code, printed = cli_json(capsys, "nightly", "--results", str(third), "--json", *state)
    assert code == 1  # regressions
    summary = json.loads(summary_json.read_text())
    assert printed == summary
    for key in ("regressions", "flaky", "proposals", "history", "judged_nightlies"):
        assert summary[key], f"the third nightly has no {key}"
    assert all(r["suspects"] for r in summary["regressions"])
    assert summary["reports"]["skipped"] == [str(third / "macos-m2-26" / "shard-9.xml")]
    assert summary["backlog"]["items"] and summary["table"]["rows"]
    # shard times from the real pytest reports (the skipped one has none)
    assert [r["report"] for r in summary["shards"]["macos-m2-26"]["reports"]] == [
        "macos-m2-26/shard-1.xml",
        "macos-m2-26/shard-2.xml",
    ]
    assert all(r["measured"] == "suite" for s in summary["shards"].values() for r in s["reports"])
    assert_valid("nightly summary.json", summary)
    (i,) = [i for i, p in enumerate(summary["proposals"]) if p["action"] == "move"]
    assert summary["proposals"][i]["to_list"] == "MACOS_BEFORE_15_0_XFAILLIST"
    broken = copy.deepcopy(summary)
    del broken["proposals"][i]["to_list"]
    assert errors("nightly summary.json", broken)  # a move says where to
    broken = copy.deepcopy(summary)
    other = next(p for p in broken["proposals"] if p["action"] != "move")
    other["to_list"] = "MACOS_BEFORE_15_0_XFAILLIST"
    assert errors("nightly summary.json", broken)  # and only a move does


@pytest.mark.slow  # over 0.5 CPU-s: out of the fast tier
def test_shards_json(capsys, sandbox_settings, nights) -> None:
    """A plan by count (no history yet), then one by the durations of a real nightly."""
    state = ["--state-dir", str(sandbox_settings.state_dir)]
    _, by_count = cli_json(capsys, "shards", "--num-shards", "3", "--json", *state)
    assert {s["seconds"] for s in by_count["shards"]} == {None}
    assert_valid("shards --json", by_count)
    assert main(["nightly", "--results", str(nights.results()), *state]) == 0
    capsys.readouterr()
    _, timed = cli_json(capsys, "shards", "--num-shards", "3", "--json", *state)
    # JUnit times have 3 decimals: a shard of fast sandbox tests may add up to 0
    assert all(s["seconds"] >= 0 for s in timed["shards"])
    assert_valid("shards --json", timed)
    timed["shards"][0]["index"] = 0
    assert errors("shards --json", timed)
    timed["shards"][0] = {"index": 1, "tests": ["test_output_match_atan2_mps_float32"],
                          "seconds": 1.0}  # fmt: skip
    (problem,) = errors("shards --json", timed)
    assert problem.startswith("$.shards[0].tests[0]: ") and "does not match" in problem


@pytest.fixture
def pr_tree(sandbox_tree: Path) -> Path:
    """The committed sandbox copy with its build.ninja, as tests/commands/test_pr_report.py."""
    (sandbox_tree / "build").mkdir()
    (sandbox_tree / "build" / "build.ninja").write_text(sandbox.build_ninja(sandbox_tree))
    return sandbox_tree


def _pr_report(capsys, tree: Path, state: Path, base: str) -> dict[str, Any]:
    table = tree / sandbox.OPINFO_TABLE
    argv = ["pr-report", "--pr", "7", "--base", base, "--results-only", "--root", str(tree),
            "--state-dir", str(state), "--opinfo-table", str(table)]  # fmt: skip
    assert main(argv) == 0
    capsys.readouterr()
    return json.loads((state / "results" / "pr-7" / pr.RESULTS_JSON).read_text())


@pytest.mark.slow
def test_pr_report_results_json(capsys, pr_tree: Path, tmp_path: Path) -> None:
    """A change that selects atan2's tests (built, run, judged) and one that selects none."""
    build_now(pr_tree)
    base = git(pr_tree, "rev-parse", "HEAD")
    path = pr_tree / COMMON_MPS
    text = path.read_text()
    path.write_text(text.replace("                torch.uint8,\n                torch.bool,\n",
                                 "                torch.uint8,\n", 1))  # fmt: skip
    commit(pr_tree, "expect atan2 bool to work")
    tested = _pr_report(capsys, pr_tree, tmp_path / "state", base)
    assert tested["table"]["rows"] and tested["xfails"]["decisions"] and tested["tests"]["run"]
    assert_valid("pr-report results.json", tested)
    assert tested["math"] is not None  # check-math's document, or why it was skipped
    skipped = {"schema": 1, "skipped": "none of atan2 has a registered Metal functor"}
    assert_valid("pr-report results.json", tested | {"math": skipped})

    base = git(pr_tree, "rev-parse", "HEAD")
    (pr_tree / "README.md").write_text("docs only\n")
    commit(pr_tree, "docs")
    untested = _pr_report(capsys, pr_tree, tmp_path / "state-2", base)
    assert untested["table"] is None and untested["tests"]["run"] is None
    assert_valid("pr-report results.json", untested)
    # no history: nothing compared, every failure new
    assert tested["baseline"]["nightly"] is None and tested["baseline"]["cases"]
    assert {c["class"] for c in tested["baseline"]["cases"]} == {"new"}


@pytest.mark.slow
def test_pr_report_results_json_with_every_class(capsys, pr_tree: Path, tmp_path: Path) -> None:
    """Nightlies of real sweeps of main in the state dir's history; a PR run against them
    with one failing test of each class: copysign int64 new (it passes on main), atan2 bool
    already failing (main dropped its xfail), atan2 uint8 flaky (its xfail came and went)."""
    state = tmp_path / "state"
    settings = load_settings({"root": str(pr_tree), "state_dir": str(state)}, env=settings_env())
    settings = replace(settings, opinfo_table=pr_tree / sandbox.OPINFO_TABLE)
    edit(pr_tree, COMMON_MPS, ATAN2_BOOL_XFAIL, "                torch.uint8,\n")
    commit(pr_tree, "main: expect atan2 bool to work")
    uint8_xfails = sweep(settings, "before")
    edit(pr_tree, COMMON_MPS, "                torch.int8,\n                torch.uint8,\n",
         "                torch.int8,\n")  # fmt: skip
    main_sha = commit(pr_tree, "main: expect atan2 uint8 to work")
    uint8_fails = sweep(settings, "after")
    nights = [dict.fromkeys(RUNNERS, r) for r in (uint8_fails, uint8_xfails, uint8_fails)]
    record_nights(settings, state / layout.HISTORY, nights, main_sha)
    edit(pr_tree, BINARY_METAL, COPYSIGN_INTS, COPYSIGN_NO_INT64)
    touch_atan2(pr_tree)
    commit(pr_tree, "the PR")

    data = _pr_report(capsys, pr_tree, state, main_sha)
    assert {c["test"]: c["class"] for c in data["baseline"]["cases"]} == {
        "test_output_match_atan2_mps_uint8": "flaky",
        "test_output_match_atan2_mps_bool": "already_failing",
        "test_output_match_copysign_mps_int64": "new",
    }
    assert data["baseline"]["nightly"]["commit"] == main_sha
    assert data["status"]["state"] == "failure"
    assert data["status"]["description"].startswith(
        "1 new failure (1 already failing on main, 1 flaky): 3 failed"
    )
    assert_valid("pr-report results.json", data)
    for path, value in [
        (("baseline", "cases", 0, "class"), "old"),
        (("baseline", "cases", 0, "outcome"), "pass"),
        (("baseline", "nightly", "commit"), "main"),
    ]:
        bad = copy.deepcopy(data)
        _set(*path, value=value)(bad)
        assert errors("pr-report results.json", bad), path


# ---------------------------------------------------------- mutated output, rejected


def _set(*path: str | int, value: Any = None, delete: bool = False):
    """A mutation of a document: ``path`` deleted, or set to ``value``."""

    def mutate(doc: Any) -> None:
        *parents, last = path
        for key in parents:
            doc = doc[key]
        if delete:
            del doc[last]
        else:
            doc[last] = value

    return mutate


MUTATIONS = {
    "a required key dropped": _set("workflow", delete=True),
    "a required list dropped": _set("checklist", delete=True),
    "a nested required key dropped": _set("checklist", 0, "ok", delete=True),
    "a key too many": _set("unexpected", value=True),
    "a nested key too many": _set("overloads", 0, "note", value="x"),
    "a value outside the enum": _set("workflow", value="finished"),
    "another schema version": _set("schema", value=2),
    "a line number as a string": _set("overloads", 0, "line", value="329"),
    "a dtype pair of three": _set("functors", 0, "dtypes", 0, value=["int8", "int8", "x"]),
}


def test_a_mutated_real_output_fails_validation(capsys, sandbox_settings) -> None:
    state = str(sandbox_settings.state_dir)
    _, real = cli_json(capsys, "audit", "atan2", "--json", "--state-dir", state)
    assert not errors("audit --json", real)
    for what, mutate in MUTATIONS.items():
        doc = copy.deepcopy(real)
        mutate(doc)
        assert errors("audit --json", doc), f"{what}: still valid"


def test_a_real_nightly_summary_missing_a_nested_key_fails(sandbox_settings, nights) -> None:
    from tests.results.nightly_runs import run

    summary = run(sandbox_settings, nights.results())
    assert not errors("nightly summary.json", summary)
    cells = [c for row in summary["table"]["rows"] for c in row["cells"].values()]
    assert "pass" in cells  # plain cells are just their outcome
    del next(c for c in cells if isinstance(c, dict))["runners"]
    assert errors("nightly summary.json", summary)


# ------------------------------------------------- review, backlog --claims, speed.json


@pytest.mark.slow
def test_review_json(capsys, sandbox_tree: Path, tmp_path: Path) -> None:
    edit(sandbox_tree, BINARY_METAL, "return c10::metal::max(a, b);", "return max(a, b);")
    table = sandbox_tree / sandbox.OPINFO_TABLE
    code, doc = cli_json(capsys, "review", "--base", "HEAD", "--json", "--root",
                         str(sandbox_tree), "--state-dir", str(tmp_path / "state"),
                         "--opinfo-table", str(table))  # fmt: skip
    assert code == 1 and "bare-minmax" in [f["check"] for f in doc["findings"]]
    assert_valid("review --json", doc)
    broken = copy.deepcopy(doc)
    broken["findings"][0]["severity"] = "fatal"
    assert errors("review --json", broken)


@pytest.mark.slow
def test_backlog_claims_json(capsys, sandbox_settings, httpserver, monkeypatch) -> None:
    from tests.flows.github_fake import REPO, FakeTrackerGitHub

    fake = FakeTrackerGitHub(httpserver).install()
    fake.add_pull(3, "[MPS] atan2 to Metal", {"BinaryOps.mm": "@@ -1 +0,0 @@\n-atan2_out_mps\n"})
    fake.add_pull(4, "Port atan2", {"x.mm": "@@ -1 +1 @@\n+atan2_functor\n"})
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_test")
    monkeypatch.setenv("MPS_PIPELINE_GITHUB_API_URL", httpserver.url_for(""))
    monkeypatch.setenv("MPS_PIPELINE_GITHUB_REPO", REPO)
    code, doc = cli_json(capsys, "backlog", "--claims", "--json", "--root",
                         str(sandbox_settings.root), "--state-dir",
                         str(sandbox_settings.state_dir))  # fmt: skip
    assert code == 0
    atan2 = next(o for o in doc["operators"] if o["op"] == "atan2")
    assert atan2["state"] == "duplicate"
    assert_valid("backlog --claims --json", doc)


@pytest.mark.slow
@pytest.mark.realdata
def test_speed_json(sandbox_settings, tmp_path: Path) -> None:
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed (nox installs it)")
    from pipeline.flows.speed import measure

    result = measure(sandbox_settings, ["hypot"], device="cpu", folder=tmp_path,
                     shapes={"small": (16,)}, min_run_time=0.001, repeats=3,
                     max_run_time=0.01)  # fmt: skip
    doc = json.loads(result.path.read_text())
    assert_valid("speed.json", doc)
    broken = copy.deepcopy(doc)
    del broken["results"][0]["times"]
    assert errors("speed.json", broken)
