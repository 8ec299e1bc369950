"""`python -m pipeline nightly`: the command line, its exit status, and the workflow's call.

The nightly's analysis is tested in tests/results/test_nightly.py, on the same reports.
"""

from __future__ import annotations

import json
import random
import shlex
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline import state as layout
from pipeline.__main__ import build_parser, main
from pipeline.commands import nightly
from pipeline.config import load_settings
from pipeline.errors import PipelineError
from pipeline.flows import nightly as nightly_flow
from pipeline.results import history
from pipeline.results.junit import Outcome, parse_reports
from pipeline.sandbox import backend
from pipeline.tree import paths
from pipeline.workspace import prepare
from tests.conftest import commit, git
from tests.impact.test_suspects import three_commits
from tests.results.nightly_runs import RUNNERS, sandbox_sweep


@pytest.fixture
def settings(tmp_path):
    return prepare(load_settings({"state_dir": str(tmp_path / "state")}))


def test_no_reports_is_an_error_with_the_expected_layout(tmp_path, settings, capsys):
    (tmp_path / "empty").mkdir()
    code = main(["nightly", "--results", str(tmp_path / "empty"), "--state-dir",
                 str(settings.state_dir)])  # fmt: skip
    assert code == 2
    assert "results/<runner>/shard-<n>.xml" in capsys.readouterr().err


def test_results_that_are_a_file_or_missing_say_so(tmp_path, settings, capsys):
    report = tmp_path / "shard-1.xml"
    report.write_text("<testsuites/>")
    for given, what in ((report, "a file, not a folder"), (tmp_path / "nope", "no such folder")):
        code = main(["nightly", "--results", str(given), "--state-dir", str(settings.state_dir)])
        err = capsys.readouterr().err.splitlines()[-1]
        assert code == 2
        assert err.startswith(
            f"error: --results {given}: {what}; --results takes a folder of JUnit reports, one "
            "folder per runner configuration in it"
        )
        assert "directory" not in err


@pytest.mark.slow
def test_regression_is_flagged_and_fails_the_command(settings, nights, capsys):
    state = ["--state-dir", str(settings.state_dir)]
    assert main(["nightly", "--results", str(nights.results()), *state]) == 0
    capsys.readouterr()
    code = main(["nightly", "--results", str(nights.results(macos_m1_14="bad")), "--json",
                 *state])  # fmt: skip
    assert code == 1
    summary = json.loads(capsys.readouterr().out)
    got = {(r["name"], r["runner"], r["before"], r["after"]) for r in summary["regressions"]}
    assert got == {
        ("test_output_match_atan2_mps_float32", "macos-m1-14", "pass", "fail"),
        # worked (xpass) last night, fails again now: the kernel broke although CI is green
        ("test_output_match_atan2_mps_int64", "macos-m1-14", "xpass", "xfail"),
    }
    message = next(r["message"] for r in summary["regressions"] if r["after"] == "fail")
    assert "atan2_float32: mismatch <script>" in message
    html = (settings.state_dir / "dashboard" / "index.html").read_text()
    assert "<svg" in html and "<script" not in html
    assert "atan2_float32: mismatch &lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    # both nights tested the checkout's HEAD: no commit to suspect
    same = "same PyTorch commit as last night: not a code change (flaky or environment)"
    assert {(r["suspects_note"], len(r["suspects"])) for r in summary["regressions"]} == {(same, 0)}
    assert same in html


@pytest.mark.slow
def test_a_regression_names_the_commits_that_can_affect_its_operator(settings, nights, capsys):
    """Last night tested ``before``; tonight HEAD, three commits later: atan2's functor, a
    macro atan2 shares, a docs page. atan2's regressions name the first two, own first."""
    root, state = settings.root, ["--state-dir", str(settings.state_dir)]
    before, shas = three_commits(root)
    assert main(["nightly", "--results", str(nights.results()), "--commit", before, *state]) == 0
    capsys.readouterr()
    assert main(["nightly", "--results", str(nights.results(macos_m1_14="bad")), *state]) == 1
    out = capsys.readouterr().out  # the terminal report names them too
    assert f"suspect {shas['own'][:12]} (own) mps: atan2 takes the float path" in out
    dash = settings.state_dir / "dashboard"
    summary = json.loads((dash / "summary.json").read_text())
    assert summary["commit"] == shas["docs"]
    titles = {
        "own": "mps: atan2 takes the float path for halves",
        "shared": "mps: bool inputs of int-to-float binary ops give half",
    }
    for r in summary["regressions"]:  # atan2 float32 and int64
        assert r["previous_commit"] == before and r["suspects_note"] == ""
        assert [(s["commit"], s["kind"], s["title"]) for s in r["suspects"]] == [
            (shas["own"], "own", titles["own"]),
            (shas["shared"], "shared", titles["shared"]),
        ]
        own, shared = r["suspects"]
        assert own["reasons"] == ["BinaryKernel.metal:49 functor atan2_functor changed"]
        assert "shared macro REGISTER_INT2FLOAT_BINARY_OP changed" in shared["reasons"][0]
    markdown = (dash / "summary.md").read_text()
    regression = "- test\\_output\\_match\\_atan2\\_mps\\_float32 on macos-m1-14: pass → fail"
    at = markdown.index(regression)
    block = markdown[at : markdown.index("\n- ", at + 1)]
    assert block.index(f"  - suspect `{shas['own'][:12]}` (own) mps: atan2") < block.index(
        f"  - suspect `{shas['shared'][:12]}` (shared) mps: bool inputs"
    )
    assert "BinaryKernel.metal:49 functor atan2\\_functor changed" in block
    assert "docs: MPS notes" not in markdown
    html = (dash / "index.html").read_text()
    row = html[html.index("<td>test_output_match_atan2_mps_float32</td>") :].split("</tr>")[0]
    assert row.index(f"<code>{shas['own'][:12]}</code> <b>own</b> mps: atan2") < row.index(
        f"<code>{shas['shared'][:12]}</code> <b>shared</b>"
    )
    assert "docs: MPS notes" not in html


@pytest.mark.slow  # over 0.5 CPU-s: out of the fast tier
def test_a_checkout_lacking_last_nights_commit_says_so(settings, nights, capsys):
    state = ["--state-dir", str(settings.state_dir)]
    gone = "0123456789abcdef0123456789abcdef01234567"
    assert main(["nightly", "--results", str(nights.results()), "--commit", gone, *state]) == 0
    capsys.readouterr()
    assert main(["nightly", "--results", str(nights.results(macos_m1_14="bad")), *state]) == 1
    summary = json.loads((settings.state_dir / "dashboard" / "summary.json").read_text())
    note = f"the checkout lacks {gone}: fetch it to name suspects"
    assert {(r["suspects_note"], len(r["suspects"])) for r in summary["regressions"]} == {(note, 0)}
    assert note in capsys.readouterr().out
    dash = settings.state_dir / "dashboard"
    assert note in (dash / "index.html").read_text()
    assert f"  - {note}" in (dash / "summary.md").read_text()


@pytest.mark.slow  # over 0.5 CPU-s: out of the fast tier
def test_cli_paths_and_history_file(settings, nights, tmp_path, capsys):
    db_path = tmp_path / "elsewhere" / "h.sqlite"
    code = main(["nightly", "--results", str(nights.results()), "--history", str(db_path),
                 "--dashboard", str(tmp_path / "d"), "--state-dir", str(settings.state_dir),
                 "--source", "run-1"])  # fmt: skip
    assert code == 0
    out = capsys.readouterr().out
    assert "MPS nightly" in out and "regressions: 0" in out and "migration backlog: 10" in out
    db = history.connect(db_path)
    try:
        (night,) = history.nightlies(db)
        assert night.runners == RUNNERS and night.runs[0].source == "run-1"
    finally:
        db.close()
    assert (tmp_path / "d" / "index.html").is_file()
    assert not (settings.state_dir / "dashboard").exists()


def test_the_nightly_workflow_calls_this_cli():
    """ci/workflows/mps-nightly.yml's call parses, with the paths the workflow produces."""
    workflow = yaml.safe_load(
        (Path(__file__).parents[2] / "ci/workflows/mps-nightly.yml").read_text()
    )
    aggregate = workflow["jobs"]["aggregate"]
    (step,) = [s for s in aggregate["steps"] if "-m pipeline nightly" in s.get("run", "")]
    (line,) = [ln for ln in step["run"].splitlines() if "-m pipeline nightly" in ln]
    # the step keeps the exit status for the cache step (tests/ci/test_workflows.py)
    argv = shlex.split(line.split("-m pipeline ", 1)[1].removesuffix(" || status=$?"))
    args = build_parser("nightly").parse_args(
        [a.replace("$RUN_URL", "https://x/runs/1") for a in argv]
    )
    assert args.module is nightly and args.results == Path("results")
    assert args.source == "https://x/runs/1" and "RUN_URL" in step["env"]
    # the history lives where the workflow's cache steps save and restore it
    cached = {
        s["with"]["path"]
        for s in aggregate["steps"]
        if "actions/cache/" in s.get("uses", "") and "-history-" in s["with"]["key"]
    }
    assert cached == {".mps-pipeline/history"} and layout.HISTORY.startswith("history/")
    # and its backups, beside it, are uploaded
    uploaded = {s["with"]["name"]: s["with"]["path"] for s in aggregate["steps"]
                if "actions/upload-artifact" in s.get("uses", "")}  # fmt: skip
    assert uploaded["mps-nightly-history-backups"] == f".mps-pipeline/history/{history.BACKUPS}/"
    # the sweep writes results/<runner>/shard-<n>.xml, which collect_reports reads
    sweep = " ".join(s.get("run", "") for s in workflow["jobs"]["sweep"]["steps"])
    assert '"$RUNNER_TEMP/junit/$RUNNER_CONFIG/shard-$SHARD.xml"' in sweep
    # the OpInfo metadata the Macs export lands in the cache `nightly` reads it from
    (export,) = [
        s for s in workflow["jobs"]["sweep"]["steps"] if "-m pipeline backlog" in s.get("run", "")
    ]
    argv = shlex.split(
        " ".join(
            export["run"].replace("\\\n", " ").split("-m pipeline ", 1)[1].split(">")[0].split()
        )
    )
    assert build_parser("backlog").parse_args(argv).state_dir == "$RUNNER_TEMP/mps-state"
    (download,) = [s for s in aggregate["steps"] if s.get("with", {}).get("pattern") == "opinfo-*"]
    assert download["with"]["path"] == ".mps-pipeline/cache"


# -- hostile reports, damaged histories, backups -------------------------------------------------


def _deep(levels: int) -> str:
    return (
        "<testsuites>" + '<testsuite name="s">' * levels
        + '<testcase classname="C" name="test_output_match_atan2_mps_float32"/>'
        + "</testsuite>" * levels + "</testsuites>"
    )  # fmt: skip


def _nights_recorded(db_path: Path) -> int:
    return history.check(db_path).nightlies


@pytest.mark.slow
@pytest.mark.parametrize("levels", [1_000, 50_000, 200_000])
def test_a_deeply_nested_report_is_skipped_and_the_others_recorded(
    settings, nights, capsys, levels
):
    results = nights.results()
    deep = results / "macos-m2-15" / "shard-3.xml"
    deep.write_text(_deep(levels))
    only_deep = results / "macos-m4-26" / "shard-1.xml"  # a runner with nothing else
    only_deep.parent.mkdir()
    only_deep.write_text(_deep(levels))
    code = main(["nightly", "--results", str(results), "--json", "--state-dir",
                 str(settings.state_dir)])  # fmt: skip
    assert code == 0  # a skipped file is a warning, not a regression (1) or an error (2)
    summary = json.loads(capsys.readouterr().out)
    assert summary["reports"] == {"total": 8, "skipped": [str(deep), str(only_deep)]}
    assert any(w.startswith(f"{deep}: skipped: its XML nests deeper than 64") for w in
               summary["warnings"])  # fmt: skip
    assert any(w.startswith("macos-m4-26: no testcase could be read") for w in summary["warnings"])
    assert summary["runners"] == list(RUNNERS)  # macos-m4-26 is left out, the rest is in
    assert all(sum(summary["counts"][r].values()) == 7 for r in RUNNERS)
    markdown = (settings.state_dir / "dashboard" / "summary.md").read_text()
    assert "2 of 8 JUnit reports skipped" in markdown
    assert _nights_recorded(settings.state_dir / layout.HISTORY) == 1


def test_no_readable_report_is_an_input_error_and_records_nothing(settings, nights, capsys):
    state = ["--state-dir", str(settings.state_dir)]
    assert main(["nightly", "--results", str(nights.results()), *state]) == 0
    db_path = settings.state_dir / layout.HISTORY
    before = db_path.read_bytes()
    results = nights.results()
    for report in results.rglob("*.xml"):
        report.write_text(_deep(100) if report.name == "shard-1.xml" else "")
    capsys.readouterr()
    assert main(["nightly", "--results", str(results), *state]) == 2
    err = capsys.readouterr().err
    assert "none of the 6 JUnit report(s) held a testcase that could be read" in err
    assert "no nightly was recorded" in err and "nests deeper than 64" in err
    assert db_path.read_bytes() == before and _nights_recorded(db_path) == 1


def test_a_crash_while_reading_records_nothing_and_is_not_exit_1(
    settings, nights, capsys, monkeypatch
):
    """Every report is read before the history is touched; a bug is exit 70, not 1."""
    from pipeline.results import junit

    state = ["--state-dir", str(settings.state_dir)]
    assert main(["nightly", "--results", str(nights.results()), *state]) == 0
    db_path = settings.state_dir / layout.HISTORY
    before = db_path.read_bytes()
    real = junit.merge_reports

    def merge_then_break(paths, out):  # the first runner's merge works, the second's breaks
        if "macos-m2-15" in str(out):
            raise RuntimeError("a bug")
        return real(paths, out)

    monkeypatch.setattr(junit, "merge_reports", merge_then_break)
    capsys.readouterr()
    assert main(["nightly", "--results", str(nights.results(macos_m1_14="bad")), *state]) == 70
    err = capsys.readouterr().err
    assert "Traceback" in err and "RuntimeError: a bug" in err
    assert "unexpected RuntimeError" in err and "exit 70, not 1" in err
    assert db_path.read_bytes() == before and _nights_recorded(db_path) == 1


def test_a_history_found_damaged_keeps_no_part_of_the_night(settings, nights, capsys, monkeypatch):
    """The night is one transaction, committed only once the history's check has passed
    (it runs beside the recording): the speed figures' own commit took the night with it."""
    state = ["--state-dir", str(settings.state_dir)]
    assert main(["nightly", "--results", str(nights.results()), *state]) == 0
    db_path = settings.state_dir / layout.HISTORY
    real_check = history.check

    def damaged(path, thorough=False):
        if thorough:
            raise PipelineError(f"{path}: integrity_check: row 3 missing from index")
        return real_check(path, thorough=thorough)

    monkeypatch.setattr(history, "sealed", lambda *_a, **_k: False)  # the whole check runs
    monkeypatch.setattr(history, "check", damaged)
    capsys.readouterr()
    assert main(["nightly", "--results", str(nights.results()), *state]) == 2
    assert "row 3 missing from index" in capsys.readouterr().err
    monkeypatch.setattr(history, "check", real_check)
    assert _nights_recorded(db_path) == 1


def test_large_reports_are_merged_apart_as_they_are_here(settings, nights, tmp_path, monkeypatch):
    """Past MERGE_APART_BYTES the runners' reports are merged by a child process: the same
    files, the same warnings, a damaged report included."""
    results = nights.results(macos_m1_14="bad")
    (results / RUNNERS[0] / "shard-9.xml").write_text('<testsuite><testcase name="cut"')
    merged = {}
    for apart, name in ((False, "here"), (True, "apart")):
        if apart:
            monkeypatch.setattr(nightly_flow, "MERGE_APART_BYTES", 0)
        outcome = nightly_flow.run_nightly(
            settings, results, backlog_of=lambda _: [], dashboard_dir=tmp_path / name,
            history_at=tmp_path / f"{name}.sqlite", commit="", source="",
        )  # fmt: skip
        merged[name] = (
            {p.name: p.read_bytes() for p in (tmp_path / name / "junit").iterdir()},
            outcome.summary.warnings,
        )
    assert merged["apart"] == merged["here"] and len(merged["here"][0]) == len(RUNNERS)
    assert any("shard-9.xml" in w for w in merged["here"][1])


def test_a_crash_while_reporting_is_exit_70_not_1(settings, nights, capsys, monkeypatch):
    """A bug in printing the report (after the night is recorded) is exit 70 too: exit 1
    would say "regressions" to the workflow, which would then save the history."""

    def broken(*_args, **_kwargs):
        raise RuntimeError("a rendering bug")

    monkeypatch.setattr(nightly, "render_terminal", broken)
    state = ["--state-dir", str(settings.state_dir)]
    assert main(["nightly", "--results", str(nights.results()), *state]) == 70
    err = capsys.readouterr().err
    assert "RuntimeError: a rendering bug" in err and "exit 70, not 1" in err


def test_a_history_another_process_holds_is_exit_2_said_so_not_a_crash(
    settings, nights, capsys, monkeypatch
):
    """SQLite's own result code says "locked" (SQLITE_BUSY), not a word in its message:
    while waiting for the write lock, and for a statement that met the lock later on."""
    state = ["--state-dir", str(settings.state_dir)]
    assert main(["nightly", "--results", str(nights.results()), *state]) == 0
    db_path = settings.state_dir / layout.HISTORY
    monkeypatch.setenv("MPS_PIPELINE_LOCK_WAIT", "0.2")
    holder = sqlite3.connect(db_path)
    holder.execute("BEGIN EXCLUSIVE")

    def meets_the_lock(*_args, **_kwargs):
        sqlite3.connect(db_path, timeout=0).execute("BEGIN IMMEDIATE")

    try:
        capsys.readouterr()
        waited = main(["nightly", "--results", str(nights.results()), *state, "--source", "x"])
        waited_err = capsys.readouterr().err
        monkeypatch.setattr(nightly, "run_nightly", meets_the_lock)
        later = main(["nightly", "--results", str(nights.results()), *state, "--source", "y"])
        later_err = capsys.readouterr().err
    finally:
        holder.rollback()
        holder.close()
    assert waited == 2 and "the history is locked by another process (waited 0.2 s" in waited_err
    assert later == 2 and "Traceback" not in later_err
    assert f"{db_path}: the history cannot be written now (database is locked)" in later_err
    assert _nights_recorded(db_path) == 1


def _damage(path: Path, form: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if form == "empty":
        path.write_bytes(b"")
    elif form == "random bytes":
        path.write_bytes(bytes(random.Random(0).randrange(256) for _ in range(8192)))
    elif form == "directory":
        path.mkdir()
    else:  # another program's SQLite database
        raw = sqlite3.connect(path)
        raw.execute("CREATE TABLE users (id INTEGER PRIMARY KEY)")
        raw.commit()
        raw.close()


def _state(folder: Path) -> dict[str, bytes | None]:
    return {str(f): f.read_bytes() if f.is_file() else None for f in sorted(folder.rglob("*"))}


@pytest.mark.parametrize("form", ["empty", "random bytes", "directory", "foreign sqlite"])
def test_a_damaged_history_is_refused_untouched(settings, nights, capsys, form):
    db_path = settings.state_dir / layout.HISTORY
    _damage(db_path, form)
    before = _state(db_path.parent)
    state = ["--state-dir", str(settings.state_dir)]
    assert main(["nightly", "--results", str(nights.results()), *state]) == 2
    err = capsys.readouterr().err
    assert f"error: {db_path}: not a valid mps-pipeline history (" in err
    assert "): restore it from a backup, or move it away to start a new history" in err
    assert "Traceback" not in err
    assert _state(db_path.parent) == before
    assert not (settings.state_dir / "dashboard").exists()  # nothing written, no summary
    assert main(["nightly", "--check-history", *state]) == 2
    assert f"{db_path}: not a valid mps-pipeline history" in capsys.readouterr().err
    assert _state(db_path.parent) == before


@pytest.mark.slow
def test_backups_rotate_and_check_history_reads_them(settings, nights, capsys, tmp_path):
    db_path = tmp_path / "h" / "nightly.sqlite"
    argv = ["--state-dir", str(settings.state_dir), "--history", str(db_path)]
    assert main(["nightly", "--check-history", *argv]) == 2  # no history yet
    assert "no history here" in capsys.readouterr().err
    assert build_parser("nightly").parse_args(["nightly", "--backups", "3"]).backups == 3
    for day in range(1, 5):  # as `nightly --backups 3`, on given nights
        outcome = nightly_flow.run_nightly(
            settings, nights.results(), history_at=db_path, backups=3,
            started=history.timestamp(f"2026-03-0{day}T03:17:00Z"), backlog_of=lambda index: (),
        )  # fmt: skip
        assert outcome.summary.warnings == ()
    names = [p.name for p in history.backups(db_path)]
    assert names == [f"nightly-2026-03-0{d}-031700.sqlite" for d in (2, 3, 4)]
    assert [_nights_recorded(p) for p in history.backups(db_path)] == [2, 3, 4]
    capsys.readouterr()
    assert main(["nightly", "--check-history", *argv]) == 0
    out = capsys.readouterr().out
    version = history.SCHEMA_VERSION
    assert f"{db_path}: a valid mps-pipeline history (integrity ok, schema version {version}," in (
        out
    )
    assert "4 nightlies, 2026-03-01T03:17:00.000000Z … 2026-03-04T03:17:00.000000Z" in out
    assert "12 runs, 7 tests, 84 results" in out
    assert "3 backup(s): newest nightly-2026-03-04-031700.sqlite" in out
    # a damaged history: the check names the backups to restore from
    db_path.write_bytes(b"")
    assert main(["nightly", "--check-history", *argv]) == 2
    captured = capsys.readouterr()
    assert "not a valid mps-pipeline history (an empty file, 0 bytes)" in captured.err
    assert "backups (3, newest last):" in captured.out and names[-1] in captured.out
    assert main(["nightly", *argv]) == 2
    assert "--results DIR is required" in capsys.readouterr().err


# runners named without a version: the runners: table says which macOS each one runs
MACOS_TABLE = {"mini-m1": "14.0", "mini-m2": "15.0", "studio-m2": "26.0"}


@pytest.mark.slow
def test_an_xfail_only_the_old_macos_needs_moves_to_a_version_list(tmp_path, capsys, monkeypatch):
    """maximum bfloat16 is xfailed everywhere (ON_MPS_XFAILLIST), but the simulated device
    gets it wrong before macOS 14.4 only (mpsgraph_gaps.yaml). Swept on 14.0, 15.0 and
    26.0, three nights in a row: the nightly proposes moving it into a new
    MACOS_BEFORE_15_0_XFAILLIST; with the diff applied, the sweep is green on all three."""
    monkeypatch.delenv(backend.BUILD_DIR_ENV, raising=False)
    monkeypatch.delenv(backend.MACOS_ENV, raising=False)
    config = tmp_path / "pipeline.yaml"
    config.write_text("runners:\n" + "".join(f'  {r}: "{v}"\n' for r, v in MACOS_TABLE.items()))
    state = tmp_path / "state"
    root = prepare(load_settings({"state_dir": str(state)}, config_path=config, env={})).root
    common_mps = root / paths.COMMON_MPS
    text = common_mps.read_text()
    entry = '            "maximum": [torch.bfloat16],\n'
    assert entry in text and "MACOS_BEFORE_15_0" not in text
    text = text.replace(entry, "", 1)  # out of MACOS_BEFORE_14_4_XFAILLIST, into ON_MPS's
    on_mps = '            "arange": [torch.uint8],\n'
    common_mps.write_text(text.replace(on_mps, on_mps + entry, 1))
    commit(root, "xfail maximum bfloat16 on every macOS")
    ninja = shutil.which("ninja") or str(Path(sys.executable).parent / "ninja")
    build = subprocess.run(
        [ninja, "-C", "build", "torch_cpu"], cwd=root, capture_output=True, text=True, timeout=120
    )
    assert build.returncode == 0, build.stdout + build.stderr
    sandbox_sweep(root, tmp_path / "results", MACOS_TABLE, "test_output_match_maximum")

    argv = ["nightly", "--results", str(tmp_path / "results"), "--state-dir", str(state),
            "--config", str(config), "--json"]  # fmt: skip
    summaries = []
    for _ in range(3):
        assert main(argv) == 0
        summaries.append(json.loads(capsys.readouterr().out))
    assert [s["proposals"] for s in summaries[:2]] == [[], []]
    summary = summaries[2]
    (move,) = summary["proposals"]
    assert {k: move[k] for k in ("list", "key", "action", "to_list", "dropped", "new_dtypes")} == {
        "list": "ON_MPS_XFAILLIST",
        "key": "maximum",
        "action": "move",
        "to_list": "MACOS_BEFORE_15_0_XFAILLIST",
        "dropped": ["bfloat16"],
        "new_dtypes": [],
    }
    assert move["reason"].startswith(
        "bfloat16: xfail on mini-m1 (macOS 14.0) and xpass on mini-m2 (macOS 15.0), "
        "studio-m2 (macOS 26.0) in each of the last 3 nightlies ("
    )
    diff = summary["diff"]
    assert "+        MACOS_BEFORE_15_0_XFAILLIST = {\n" in diff
    assert "+                and (MACOS_VERSION < 15.0)\n" in diff
    assert "+                        dtypes=MACOS_BEFORE_15_0_XFAILLIST[key],\n" in diff
    assert (root / paths.COMMON_MPS).read_text() == common_mps.read_text()  # not applied
    dash = state / "dashboard"
    markdown = (dash / "summary.md").read_text()
    assert (
        "maximum'\\]: move → MACOS\\_BEFORE\\_15\\_0\\_XFAILLIST — bfloat16: xfail on" in markdown
    )
    html = (dash / "index.html").read_text()
    assert "<td>move → MACOS_BEFORE_15_0_XFAILLIST</td>" in html
    assert "xfail on mini-m1 (macOS 14.0) and xpass on mini-m2 (macOS 15.0)" in html

    # the proposal, applied: maximum bfloat16 xfails on 14.0 only, and passes elsewhere
    patch = tmp_path / "move.diff"
    patch.write_text(diff)
    git(root, "apply", str(patch))
    sandbox_sweep(root, tmp_path / "applied", MACOS_TABLE, "test_output_match_maximum")
    for runner, version in MACOS_TABLE.items():
        cases = parse_reports(sorted((tmp_path / "applied" / runner).glob("*.xml"))).cases
        outcomes = {c.dtype: c.outcome for c in cases}
        assert outcomes["bfloat16"] == (Outcome.XFAIL if version == "14.0" else Outcome.PASS)
        assert {o for d, o in outcomes.items() if d != "bfloat16"} == {Outcome.PASS}, runner


def test_the_share_of_each_mps_path_is_kept_night_by_night(settings, nights, tmp_path):
    """Each night records the tree's overloads per path; the dashboard shows tonight's share
    and its change since the night before (issue 31)."""
    db_path, out = tmp_path / "h.sqlite", tmp_path / "d"
    argv = ["nightly", "--results", str(nights.results()), "--history", str(db_path),
            "--dashboard", str(out), "--state-dir", str(settings.state_dir)]  # fmt: skip
    assert main(argv) == 0
    first = json.loads((out / "summary.json").read_text())["paths"]
    assert len(first) == 1 and first[0]["counts"]["mpsgraph"] > 0
    # between the nights exp2.out loses its MPS row: its three overloads leave the graph
    yaml_path = settings.root / paths.NATIVE_YAML
    yaml_path.write_text(yaml_path.read_text().replace("    MPS: exp2_out_mps\n", ""))
    assert main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    before, tonight = summary["paths"]
    assert tonight["started"] == summary["started"] and before == first[0]
    assert tonight["counts"]["mpsgraph"] == before["counts"]["mpsgraph"] - 3
    assert tonight["counts"]["none"] == before["counts"]["none"] + 3
    page = (out / "index.html").read_text()
    assert "MPS paths: overloads by the path they take" in page
    assert "<td>mpsgraph</td>" in page and "<td>-3 (" in page and "<td>+3 (" in page
    db = history.connect(db_path)
    try:
        assert [c for _, c in history.path_counts(db, 60)] == [before["counts"], tonight["counts"]]
    finally:
        db.close()
