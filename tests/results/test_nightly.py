"""The nightly's analysis: real pytest JUnit → history → proposals, regressions, flaky.

The reports come from :mod:`tests.results.nightly_runs`. The slow test runs the bundled
sandbox's own test/test_mps.py, built with ninja, once per simulated macOS version.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from pipeline.config import load_settings
from pipeline.edit.xfails import apply_xfail_changes
from pipeline.guide import xfails as xfail_plan
from pipeline.report import dashboard
from pipeline.results import history, nightly
from pipeline.results.junit import CaseResult, Outcome
from pipeline.results.table import merge_runs
from pipeline.sandbox import backend
from pipeline.tree import common_mps, decorations
from pipeline.tree.decorations import Decorations
from pipeline.tree.opinfo import OpInfoRecord
from pipeline.workspace import prepare
from tests.conftest import per_release
from tests.results.nightly_runs import RUNNERS, proposed, run, sandbox_sweep

NONE = Decorations(())  # a tree with no MPS decorations outside common_mps.py


@pytest.fixture
def settings(tmp_path):
    return prepare(load_settings({"state_dir": str(tmp_path / "state")}))


# ------------------------------------------------------------------------------ layout


def test_collect_reports_matches_the_workflow_layout(tmp_path):
    results = tmp_path / "results"
    for rel in (
        "macos-m2-15/shard-2.xml",
        "macos-m2-15/shard-1.xml",
        "macos-m1-14/shard-1.xml",
        # an artifact downloaded without merge-multiple keeps its own folder on top
        "junit-macos-m2-26-shard-1/macos-m2-26/shard-1.xml",
        "macos-m4-26/shard-1.xml",  # a runner not configured (yet)
        "stray.xml",
        "macos-m1-14/notes.txt",
    ):
        (results / rel).parent.mkdir(parents=True, exist_ok=True)
        (results / rel).write_text("<testsuites/>")
    found, warnings = nightly.collect_reports(results, RUNNERS)
    assert list(found) == ["macos-m1-14", "macos-m2-15", "macos-m2-26", "macos-m4-26"]
    assert [p.name for p in found["macos-m2-15"]] == ["shard-1.xml", "shard-2.xml"]
    assert len(found["macos-m2-26"]) == 1
    assert len(warnings) == 2 and "stray.xml" in warnings[0]
    # a folder no configured runner is named like: recorded, and said, with the runners
    assert warnings[1] == (
        f"{results / 'macos-m4-26'}: runner folder 'macos-m4-26' is not among the config's "
        f"runners ({', '.join(RUNNERS)}); its reports are recorded as a runner of its own (add "
        "it to `runners:` if it is one, or rename the folder)"
    )
    assert nightly.collect_reports(results, ())[1][1:] == tuple(
        f"{results / r}: runner folder {r!r} is not among the config's runners (none); its "
        "reports are recorded as a runner of its own (add it to `runners:` if it is one, or "
        "rename the folder)"
        for r in ("junit-macos-m2-26-shard-1", "macos-m1-14", "macos-m2-15", "macos-m4-26")
    )


# --------------------------------------------------------------------------- proposals


def test_proposals_only_after_min_passes_nightlies_on_every_runner(settings, nights):
    common_mps = settings.root / "torch/testing/_internal/common_mps.py"
    before = common_mps.read_text()
    first = run(settings, nights.results())
    assert first["proposals"] == [] and first["diff"] == ""
    assert "history has 1 so far" in first["proposal_note"]
    assert {c["key"]: c["streaks"] for c in first["candidates"]} == {
        "atan2": {"int32": 1, "int64": 1},
        "fmod": {"float16": 1},
        "hypot": {"float32": 1},
    }
    second = run(settings, nights.results())
    assert second["proposals"] == []
    assert {c["key"]: c["streaks"] for c in second["candidates"]}["atan2"] == {
        "int32": 2,
        "int64": 2,
    }

    third = run(settings, nights.results())
    assert proposed(third) == {
        "atan2": ("drop_dtypes", ["int16", "int8", "uint8", "bool"]),
        "fmod": ("delete", []),
        # None (all dtypes) -> the one still failing, and bfloat16: the sandbox's OpInfo has
        # it, these runs do not, so it was not run
        "hypot": ("narrow_none", ["float16", "bfloat16"]),
    }
    assert third["candidates"] == []
    assert "in each of the last 3 nightlies" in third["proposals"][0]["reason"]
    diff = third["diff"]
    assert diff.startswith("--- a/torch/testing/_internal/common_mps.py\n")
    assert "-                torch.int64,\n-                torch.int32,\n" in diff
    assert '-            "fmod": [torch.float16]' in diff
    assert (
        '-            "hypot": None,\n+            "hypot": [torch.float16, torch.bfloat16],'
        in diff
    )
    # a proposal, not an edit
    assert common_mps.read_text() == before
    written = (settings.state_dir / "dashboard" / dashboard.DIFF).read_text()
    assert written == diff


@pytest.mark.slow
def test_one_failing_runner_holds_the_dtype_back(settings, nights):
    run(settings, nights.results())
    run(settings, nights.results(macos_m2_26="bad"))
    third = run(settings, nights.results())
    # int32 xpassed everywhere three nights in a row; int64 failed on macos-m2-26 last night
    assert proposed(third)["atan2"] == ("drop_dtypes", ["int64", "int16", "int8", "uint8", "bool"])
    assert {c["key"]: c["streaks"] for c in third["candidates"]} == {"atan2": {"int64": 1}}
    fourth = run(settings, nights.results())
    assert {c["key"]: c["streaks"] for c in fourth["candidates"]} == {"atan2": {"int64": 2}}
    fifth = run(settings, nights.results())
    assert proposed(fifth)["atan2"] == ("drop_dtypes", ["int16", "int8", "uint8", "bool"])
    assert fifth["candidates"] == []


def test_a_missing_runner_blocks_every_proposal(settings, nights):
    for _ in range(2):
        run(settings, nights.results())
    summary = run(settings, nights.results(macos_m2_26="missing"))
    assert summary["missing_runners"] == ["macos-m2-26"]
    assert summary["proposals"] == []
    assert any("no results from macos-m2-26" in w for w in summary["warnings"])


def test_min_passes_is_configurable(settings, nights):
    summary = run(settings, nights.results(), min_passes=1)
    assert set(proposed(summary)) == {"atan2", "fmod", "hypot"}


def test_a_rerun_of_the_same_ci_run_does_not_count_twice(settings, nights):
    results = nights.results()
    for _ in range(3):
        summary = run(settings, results, source="https://github.com/o/r/actions/runs/1")
    assert summary["proposals"] == []
    assert "history has 1 so far" in summary["proposal_note"]


# ------------------------------------------------------------------ regressions, flaky


def test_flaky_attempts_and_flipping_outcomes_are_flagged(settings, nights):
    tonight = run(settings, nights.results(macos_m2_15="flaky"))
    (flaky,) = tonight["flaky"]
    assert (flaky["name"], flaky["runner"]) == ("test_output_match_sub_mps_float32", "macos-m2-15")
    assert "attempts disagreed tonight (2 attempts, ended pass)" in flaky["reasons"][0]

    run(settings, nights.results(macos_m2_26="bad"))
    flipped = run(settings, nights.results())
    got = {(f["name"], f["runner"]): f["outcomes"] for f in flipped["flaky"]}
    assert got == {
        ("test_output_match_atan2_mps_float32", "macos-m2-26"): ["pass", "fail", "pass"],
        ("test_output_match_atan2_mps_int64", "macos-m2-26"): ["xpass", "xfail", "xpass"],
    }
    assert all(
        f["reasons"] == ["outcome flipped over the last 3 nightlies"] for f in flipped["flaky"]
    )
    assert flipped["regressions"] == []


# ------------------------------------------------------------------ backlog and outputs


def test_backlog_and_dashboard_files(settings, nights, tmp_path):
    dash = tmp_path / "dash"
    summary = run(settings, nights.results(), dashboard_dir=dash, commit="f00d" * 10)
    # ceil and trunc are served by MPSGraph behind a stub, erfinv's include is left over:
    # audit and backlog agree on them
    assert summary["backlog"]["counts"] == {"migrate": 8, "add": 2}
    assert summary["backlog"]["items"][0]["op"] == "erfinv"  # easiest first
    assert summary["commit"] == "f00d" * 10
    for name in ("index.html", "summary.md", "summary.json", "junit/macos-m1-14.xml"):
        assert (dash / name).is_file(), name
    assert json.loads((dash / "summary.json").read_text()) == summary
    markdown = (dash / "summary.md").read_text()
    assert "## Migration backlog (10)" in markdown and "| Operator |" in markdown
    html = (dash / "index.html").read_text()
    assert "<svg" in html and "Migration backlog (10)" in html
    # the merged JUnit keeps both shards of a runner
    merged = (dash / "junit" / "macos-m1-14.xml").read_text()
    assert "test_output_match_atan2_mps_int64" in merged
    assert "test_output_match_sub_mps_float32" in merged


def test_an_unreadable_tree_still_records_the_night(tmp_path, nights):
    tree = tmp_path / "not-pytorch"
    tree.mkdir()
    settings = load_settings(
        {"root": str(tree), "python": str(tmp_path / "no-python"), "state_dir": str(tmp_path / "s")}
    )
    summary = run(settings, nights.results())
    assert summary["backlog"]["error"] and summary["proposals"] == []
    assert any("cannot read the tree" in w for w in summary["warnings"])
    assert summary["counts"]["macos-m1-14"]["xpass"] == 4
    assert (settings.state_dir / "history" / "nightly.sqlite").is_file()


# ------------------------------------------------------------ the wheel's common_mps.py


def _case(kind: str, stem: str, dtype: str, outcome: Outcome) -> CaseResult:
    name = f"test_{kind}_{stem}_mps_{dtype}"
    return CaseResult("TestConsistencyMPS", name, kind, stem, dtype, outcome, False, 1, "", 0, "x")


# Per release, entries the file holds: a None entry of a forward list, a grad-list entry
# of two dtypes, and an entry of a macOS-version list (counted only on macos-m1-14), as
# (OpInfo name, aten name, list, test kind, its dtypes)
REAL_PROPOSALS = {
    "2.13.0": (
        ("heaviside", "heaviside", "UNIMPLEMENTED_XFAILLIST", "output_match",
         ("float32", "int64")),
        ("_segment_reduce", "_segment_reduce", "XFAILLIST_GRAD", "output_grad_match",
         ("float32", "float16")),
        ("fft.hfft2", "fft_hfft2", "MACOS_BEFORE_14_4_XFAILLIST", "output_match", ("complex64",)),
    ),
    # heaviside and the forward function's macOS lists are gone in 2.15
    "2.15.0": (
        ("special.airy_ai", "special_airy_ai", "UNIMPLEMENTED_XFAILLIST", "output_match",
         ("float32", "int64")),
        ("nn.functional.dropout", "dropout", "XFAILLIST_GRAD", "output_grad_match",
         ("float32", "float16")),
        ("matrix_exp", "matrix_exp", "MACOS_BEFORE_15_0_XFAILLIST_GRAD", "output_grad_match",
         ("float32",)),
    ),
}  # fmt: skip
# the lines the decisions' edit removes and adds, in file order
REAL_PROPOSAL_LINES = {
    "2.13.0": (
        [
            "-            # These ops work fine in 14.4 but fail in 14.2 or 13.x",
            '-            "fft.hfft2": [torch.complex64],',
            '-            "heaviside": None,',
            '-            "_segment_reduce": [torch.float16, torch.float32],',
        ],
        ['+            "_segment_reduce": [torch.float16],'],
    ),
    "2.15.0": (
        [
            '-            "special.airy_ai": None,',
            '-            "nn.functional.dropout": [torch.float16, torch.float32],',
            "-            # matrix_exp is disabled on MPS before macOS 15 (TORCH_CHECK), so the",
            "-            # forward leg of the grad test raises for every dtype.",
            '-            "matrix_exp": None,',
        ],
        ['+            "nn.functional.dropout": [torch.float16],'],
    ),
}


@pytest.mark.realdata
def test_proposals_on_the_real_common_mps(real_common_mps, real_release, tmp_path):
    """Three nights of xpasses against a release's common_mps.py: a None entry, a grad
    list entry and a macOS-version list entry (which counts only macos-m1-14)."""
    rel = common_mps.PATTERNS[0]
    text = real_common_mps.read_text()
    cases = per_release(REAL_PROPOSALS, real_release)
    infos = tuple(OpInfoRecord(name, "", aten, (), dtypes) for name, aten, _, _, dtypes in cases)
    index = SimpleNamespace(opinfos=infos, xfails=common_mps.parse(text, rel), decorations=NONE)
    (none, none_kind), (grad, grad_kind), (macos, macos_kind) = (
        (info, kind) for info, (*_, kind, _) in zip(infos, cases, strict=True)
    )
    runs = {
        runner: [
            *(_case(none_kind, none.stem, d, Outcome.XPASS) for d in none.dtypes),
            _case(grad_kind, grad.stem, grad.dtypes[0], Outcome.XPASS),
            _case(grad_kind, grad.stem, grad.dtypes[1], Outcome.XFAIL),
            # the list applies before a macOS version: elsewhere the test is a plain pass
            _case(
                macos_kind,
                macos.stem,
                macos.dtypes[0],
                Outcome.XPASS if runner == RUNNERS[0] else Outcome.PASS,
            ),
        ]
        for runner in RUNNERS
    }
    db = history.connect(tmp_path / "h.sqlite")
    try:
        for day in (1, 2, 3):
            started = history.timestamp(f"2026-03-0{day}T03:17:00")
            history.record_nightly(db, runs, commit="", started=started)
        window = history.nightlies(db, 3)
        got = nightly.propose(db, index, merge_runs(runs), window, RUNNERS, 3)
        # the None entry's OpInfo also tested for complex64, which never ran: it narrows
        wider = (replace(none, dtypes=(*none.dtypes, "complex64")), *infos[1:])
        index = SimpleNamespace(opinfos=wider, xfails=index.xfails, decorations=NONE)
        narrowed = nightly.propose(db, index, merge_runs(runs), window, RUNNERS, 3)
    finally:
        db.close()
    widened = next(d for d in narrowed.decisions if d.key == none.key)
    assert (widened.action, widened.new_dtypes) == ("narrow_none", ("complex64",))
    assert {(d.list, d.key): (d.action, d.new_dtypes) for d in got.decisions} == {
        (cases[0][2], none.key): ("delete", ()),
        (cases[1][2], grad.key): ("drop_dtypes", (grad.dtypes[1],)),
        (cases[2][2], macos.key): ("delete", ()),
    }
    listed = next(d for d in got.decisions if d.key == macos.key)
    assert listed.reason.startswith(
        f"{macos.dtypes[0]}: xpassed on {RUNNERS[0]}, the runners {cases[2][2]} applies "
        "to (macOS before "
    ), listed.reason
    assert "in each of the last 3 nightlies" in listed.reason
    assert listed.reason.endswith(
        f"; passed on {', '.join(RUNNERS[1:])} tonight, which the list does not cover"
    )
    diff = apply_xfail_changes(text, rel, xfail_plan.to_changes(got.decisions)).diff()
    removed = [line for line in diff.splitlines() if line.startswith("-") and "---" not in line]
    added = [line for line in diff.splitlines() if line.startswith("+") and "+++" not in line]
    assert (removed, added) == per_release(REAL_PROPOSAL_LINES, real_release)


def _three_nights(tmp_path, index, runs, required):
    """``propose`` after the same results on three nights."""
    db = history.connect(tmp_path / "h.sqlite")
    try:
        for day in (1, 2, 3):
            started = history.timestamp(f"2026-03-0{day}T03:17:00")
            history.record_nightly(db, runs, commit="", started=started)
        return nightly.propose(db, index, merge_runs(runs), history.nightlies(db, 3), required, 3)
    finally:
        db.close()


def test_a_macos_list_reason_names_the_runners_it_applies_to_and_apart_the_others(tmp_path):
    """Issue 27: the sandbox's MACOS_BEFORE_14_4_XFAILLIST["maximum"] on four runners, two
    it applies to (xpass) and two it does not cover (the test is not decorated there: a
    plain result). The dtype goes; the reason says where it xpassed and what the others did."""
    from pipeline.sandbox import TREE
    from pipeline.tree import paths

    text = (TREE / paths.COMMON_MPS).read_text()
    rel = common_mps.PATTERNS[0]
    info = OpInfoRecord("maximum", "", "maximum", (), ("float32", "bfloat16"))
    index = SimpleNamespace(opinfos=(info,), xfails=common_mps.parse(text, rel), decorations=NONE)
    runners = ("macos-m1-13", "macos-m1-14.2", "macos-m2-15", "macos-m4-26")
    tonight = {"macos-m1-13": Outcome.XPASS, "macos-m1-14.2": Outcome.XPASS,
               "macos-m2-15": Outcome.PASS, "macos-m4-26": Outcome.FAIL}  # fmt: skip
    runs = {r: [_case("output_match", "maximum", "bfloat16", tonight[r])] for r in runners}
    got = _three_nights(tmp_path, index, runs, runners)
    (decision,) = got.decisions
    assert (decision.list, decision.key, decision.action) == (
        "MACOS_BEFORE_14_4_XFAILLIST",
        "maximum",
        "delete",
    )
    assert decision.reason == (
        "bfloat16: xpassed on macos-m1-13, macos-m1-14.2, the runners "
        "MACOS_BEFORE_14_4_XFAILLIST applies to (macOS before 14.4), in each of the last 3 "
        "nightlies (2026-03-01 … 2026-03-03); passed on macos-m2-15; failed on macos-m4-26 "
        "tonight, which the list does not cover"
    )
    assert "xpassed on macos-m1-13, macos-m1-14.2, macos-m2-15" not in decision.reason

    # a plain list still counts every configured runner
    info = OpInfoRecord("hypot", "", "hypot", (), ("float32",))
    index = SimpleNamespace(opinfos=(info,), xfails=index.xfails, decorations=NONE)
    runs = {r: [_case("output_match", "hypot", "float32", Outcome.XPASS)] for r in runners}
    hypot = next(d for d in _three_nights(tmp_path / "plain", index, runs, runners).decisions
                 if d.list == "UNIMPLEMENTED_XFAILLIST")  # fmt: skip
    assert hypot.reason == (
        f"float32: xpassed on {', '.join(runners)} in each of the last 3 nightlies "
        "(2026-03-01 … 2026-03-03)"
    )


def test_an_opinfo_decorate_info_is_proposed_with_its_diff_and_the_others_kept(tmp_path):
    """Issue 31: atan2's DecorateInfo on test_output_match (tests/fixtures/decorations)
    xpassed on every runner three nights running: proposed, with the diff of
    common_methods_invocations.py; the entries no consistency test reaches are kept, each
    with why."""
    fixture = Path(__file__).parents[1] / "fixtures" / "decorations"
    info = OpInfoRecord("atan2", "", "atan2", (), ("float32", "int64", "int32"))
    index = SimpleNamespace(
        opinfos=(info,), xfails=common_mps.parse("", "x.py"), decorations=decorations.read(fixture)
    )
    runs = {
        r: [_case("output_match", "atan2", d, Outcome.XPASS) for d in ("int64", "int32")]
        for r in RUNNERS
    }
    got = _three_nights(tmp_path, index, runs, RUNNERS)
    (decision,) = got.decisions
    cmi = "torch/testing/_internal/common_methods_invocations.py"
    assert (decision.key, decision.action, decision.at) == ("atan2", "delete", f"{cmi}:21")
    assert decision.reason.startswith("int32, int64: xpassed on " + ", ".join(RUNNERS))
    kept = {d.at.rsplit(":", 1)[1]: d.reason for d in got.not_judged}
    assert kept["38"] == "decorates TestCommon.test_dtypes, which the tool does not run"
    (edit,) = xfail_plan.decoration_edits(fixture, got.decisions)
    assert edit.rel == cmi and edit.before != edit.after
    assert "-                        DecorateInfo(unittest.expectedFailure, 'TestConsistency'" in (
        edit.diff()
    )


# ------------------------------------------------------------- the sandbox's test_mps.py


SANDBOX_TESTS = "test_output_match_hypot or test_output_match_maximum"
HYPOT_STUB = textwrap.dedent(
    """\
    static void hypot_mps_kernel(TensorIteratorBase& iter) {
      lib.exec_binary_kernel(iter, "hypot");
    }

    REGISTER_DISPATCH(hypot_stub, &hypot_mps_kernel)
    """
)


def edit(root: Path, rel: str, old: str, new: str) -> None:
    """Replace ``old`` (which must occur once at least) in one file of the sandbox copy."""
    text = (root / rel).read_text()
    assert old in text, f"{old!r} not in {rel}"
    (root / rel).write_text(text.replace(old, new, 1))


MACOS = {"macos-m1-14": "14.0", "macos-m2-15": "15.0", "macos-m2-26": "26.0"}


@pytest.mark.slow
def test_sandbox_test_mps_on_three_simulated_runners(tmp_path, monkeypatch):
    """Add MPS hypot in a built sandbox, sweep it per runner: after 2 nights it proposes
    deleting hypot's xfail; maximum's macOS<14.4 xfail stays (it still fails on 14.0)."""
    monkeypatch.delenv(backend.BUILD_DIR_ENV, raising=False)
    settings = prepare(load_settings({"state_dir": str(tmp_path / "state")}))
    root = settings.root
    edit(root, "aten/src/ATen/native/native_functions.yaml",
         "CPU, CUDA, XPU: hypot_out", "CPU, CUDA, XPU, MPS: hypot_out")  # fmt: skip
    anchor = "REGISTER_DISPATCH(copysign_stub"
    edit(root, "aten/src/ATen/native/mps/operations/BinaryKernel.mm", anchor, HYPOT_STUB + anchor)
    ninja = shutil.which("ninja") or str(Path(sys.executable).parent / "ninja")
    build = subprocess.run(
        [ninja, "-C", "build", "torch_cpu"], cwd=root, capture_output=True, text=True, timeout=120
    )
    assert build.returncode == 0, build.stdout + build.stderr

    results = tmp_path / "results"
    sandbox_sweep(root, results, MACOS, SANDBOX_TESTS)  # the three runners, side by side

    first = run(settings, results, min_passes=2)
    assert first["proposals"] == []
    m1 = first["counts"]["macos-m1-14"]
    assert m1["xpass"] == 3 and m1["xfail"] == 1  # hypot x3; maximum bfloat16 before 14.4
    second = run(settings, results, min_passes=2)
    assert proposed(second) == {"hypot": ("delete", [])}
    assert '-            "hypot": None,\n' in second["diff"]
    assert "maximum" not in second["diff"]
