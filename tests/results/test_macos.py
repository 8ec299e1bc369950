"""pipeline/results/macos.py: xfails that only the older Macs still need move to a
MACOS_BEFORE_<V> list, on synthetic results night by night."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pipeline.guide import xfails as xfail_plan
from pipeline.results import decide, history, macos, nightly
from pipeline.results.junit import Outcome
from pipeline.results.table import merge_runs
from pipeline.tree.decorations import Decorations
from tests.results.test_decide import entry, info, results

M1, M2, M2_26 = "macos-m1-14", "macos-m2-15", "macos-m2-26"
RUNNERS = (M1, M2, M2_26)
X, XF, P, F = Outcome.XPASS, Outcome.XFAIL, Outcome.PASS, Outcome.FAIL
ATAN2 = info("atan2", "int64", "int32")


def night(outcomes: dict[str, dict[str, Outcome]], *, stem="atan2", kind="output_match", flaky=()):
    """One night's table: runner -> {dtype: outcome}; ``flaky``: (runner, dtype) pairs."""
    return merge_runs(
        {
            runner: results(stem, by_dtype, kind=kind, flaky={d for r, d in flaky if r == runner})
            for runner, by_dtype in outcomes.items()
        }
    )


OLD_ONLY = {M1: {"int64": XF, "int32": XF}, M2: {"int64": X, "int32": XF},
            M2_26: {"int64": X, "int32": XF}}  # fmt: skip


def moves(e, tables, *, opinfo=ATAN2, required=RUNNERS, versions=None, min_passes=3):
    return macos.decide_moves(
        [e], tables, required, versions, opinfos=[opinfo], min_passes=min_passes, span="s"
    )


def test_xfail_before_15_and_xpass_from_15_on_for_three_nights_moves() -> None:
    e = entry("atan2", ("int64", "int32"))
    got = moves(e, [night(OLD_ONLY)] * 3)
    (d,) = got.decisions
    assert (d.action, d.to_list, d.dropped, d.new_dtypes) == (
        "move",
        "MACOS_BEFORE_15_0_XFAILLIST",
        ("int64",),
        ("int32",),
    )
    assert d.reason == (
        "int64: xfail on macos-m1-14 (macOS 14.0) and xpass on macos-m2-15 (macOS 15.0), "
        "macos-m2-26 (macOS 26.0) in each of the last 3 nightlies (s): only macOS before 15.0 "
        "needs the xfail"
    )
    assert d.to_dict()["to_list"] == "MACOS_BEFORE_15_0_XFAILLIST"
    assert (
        "to_list"
        not in decide.XfailDecision("L", "f", "k", decide.XfailAction.KEEP, (), (), "").to_dict()
    )
    assert got.held == ()
    # every dtype goes: the entry goes (new_dtypes empty)
    both = {r: {"int64": o["int64"], "int32": o["int64"]} for r, o in OLD_ONLY.items()}
    (d,) = moves(e, [night(both)] * 3).decisions
    assert (d.dropped, d.new_dtypes) == (("int64", "int32"), ())


def test_a_flaky_night_or_a_short_history_keeps_it() -> None:
    e = entry("atan2", ("int64", "int32"))
    flaky = night(OLD_ONLY, flaky=[(M2, "int64")])
    assert moves(e, [night(OLD_ONLY), flaky, night(OLD_ONLY)]).decisions == ()
    assert moves(e, [night(OLD_ONLY)] * 2).decisions == ()  # two nights of history only
    # tonight flaky: not even a candidate
    assert moves(e, [flaky, night(OLD_ONLY), night(OLD_ONLY)]).decisions == ()
    # a night where it failed on 15 too: the boundary moved, the streak is broken
    wider = {**OLD_ONLY, M2: {"int64": XF, "int32": XF}}
    assert moves(e, [night(OLD_ONLY), night(wider), night(OLD_ONLY)]).decisions == ()
    # a required runner that sent nothing one night
    missing = night({r: o for r, o in OLD_ONLY.items() if r != M2_26})
    assert moves(e, [night(OLD_ONLY), missing, night(OLD_ONLY)]).decisions == ()


def test_only_a_clean_split_by_version_moves() -> None:
    e = entry("atan2", ("int64", "int32"))
    for int64 in ({M1: XF, M2: F, M2_26: X}, {M1: XF, M2: P, M2_26: X}, {M1: X, M2: X, M2_26: X}):
        outcomes = {r: {"int64": o, "int32": XF} for r, o in int64.items()}
        assert moves(e, [night(outcomes)] * 3).decisions == (), int64
    # fails on the newest macOS but not the oldest: not a version boundary
    newest = {r: {"int64": XF if r == M2_26 else X, "int32": XF} for r in RUNNERS}
    assert moves(e, [night(newest)] * 3) == macos.Moves((), ())


def test_the_boundary_is_the_lowest_passing_version() -> None:
    runners = ("macos-m1-14.7", "macos-m2-15.5", "macos-m2-26")
    outcomes = {runners[0]: {"int64": XF}, runners[1]: {"int64": X}, runners[2]: {"int64": X}}
    e = entry("atan2", ("int64",))
    (d,) = moves(e, [night(outcomes)] * 3, required=runners).decisions
    assert d.to_list == "MACOS_BEFORE_15_5_XFAILLIST" and d.new_dtypes == ()
    # a patch release apart: no MACOS_BEFORE_<major>_<minor> list tells them apart
    runners = ("mini-a", "mini-b")
    versions = {"mini-a": (15, 0, 1), "mini-b": (15, 0, 2)}
    outcomes = {"mini-a": {"int64": XF}, "mini-b": {"int64": X}}
    got = moves(e, [night(outcomes)] * 3, required=runners, versions=versions)
    assert got.decisions == () and "would not cover" in got.held[0]


def test_a_runner_without_a_known_version_takes_part_in_no_move() -> None:
    runners = (M1, "mac-mini")
    outcomes = {M1: {"int64": XF}, "mac-mini": {"int64": X}}
    e = entry("atan2", ("int64",))
    got = moves(e, [night(outcomes)] * 3, required=runners)
    assert got.decisions == ()
    assert got.held == (
        "UNIMPLEMENTED_XFAILLIST['atan2'] int64: the macOS version of mac-mini is not known "
        "(its name ends in no version and the runners: table gives none)",
    )
    assert macos.held_warnings(got.held)[0].startswith("no macOS-version move for ")
    # the runners: table names it
    got = moves(e, [night(outcomes)] * 3, required=runners, versions={"mac-mini": (26, 0)})
    (d,) = got.decisions
    assert d.to_list == "MACOS_BEFORE_26_0_XFAILLIST" and "mac-mini (macOS 26.0)" in d.reason
    # a table's version wins over the name's
    versions = {M1: (15, 2), "mac-mini": (15, 4)}
    (d,) = moves(e, [night(outcomes)] * 3, required=runners, versions=versions).decisions
    assert d.to_list == "MACOS_BEFORE_15_4_XFAILLIST" and "macos-m1-14 (macOS 15.2)" in d.reason


def test_grad_entries_go_to_the_grad_list_and_none_is_narrowed() -> None:
    grad = entry("atan2", None, list_name="XFAILLIST_GRAD", function="mps_ops_grad_modifier")
    outcomes = {r: {"float32": XF if r == M1 else X, "float16": XF} for r in RUNNERS}
    tables = [night(outcomes, kind="output_grad_match")] * 3
    opinfo = info("atan2", "float32", "float16", "int64")  # the grad test: floats only
    (d,) = moves(grad, tables, opinfo=opinfo).decisions
    assert (d.list, d.function, d.to_list) == (
        "XFAILLIST_GRAD",
        "mps_ops_grad_modifier",
        "MACOS_BEFORE_15_0_XFAILLIST_GRAD",
    )
    assert (d.old_dtypes, d.new_dtypes, d.dropped) == (None, ("float16",), ("float32",))


@pytest.mark.parametrize(
    ("list_name", "raw"),
    [
        ("SKIPLIST", None),
        ("UNIMPLEMENTED_XFAILLIST_SPARSE", None),
        ("MACOS_BEFORE_14_4_XFAILLIST", None),
        ("UNIMPLEMENTED_XFAILLIST", "[torch.int64] if MACOS_VERSION < 14.0 else []"),
    ],
)
def test_lists_that_never_move(list_name: str, raw: str | None) -> None:
    e = entry("atan2", ("int64", "int32"), list_name=list_name, raw=raw)
    assert macos.not_movable(e) is not None
    assert moves(e, [night(OLD_ONLY)] * 3).decisions == ()


def test_a_version_list_that_now_xpasses_on_its_runners_is_a_plain_removal(tmp_path) -> None:
    """MACOS_BEFORE_14_4: xpass on the 14.0 runner, a plain pass on 15 and 26 (the list
    does not apply there), three nights: delete, not a move; the history-backed
    proposers agree."""
    e = entry("fft.hfft2", ("complex64",), list_name="MACOS_BEFORE_14_4_XFAILLIST")
    opinfo = info("fft.hfft2", "complex64")
    runs = {r: results("fft_hfft2", {"complex64": X if r == M1 else P}) for r in RUNNERS}
    (d,) = decide.decide_xfails([e], runs, RUNNERS, opinfos=[opinfo])
    assert (d.action, d.new_dtypes) == ("delete", ())
    tables = [merge_runs(runs)] * 3
    assert moves(e, tables, opinfo=opinfo).decisions == ()

    index = SimpleNamespace(
        opinfos=(opinfo,), xfails=SimpleNamespace(entries=(e,)), decorations=Decorations(())
    )
    db = history.connect(tmp_path / "h.sqlite")
    try:
        for day in (1, 2, 3):
            started = history.timestamp(f"2026-03-0{day}T03:17:00")
            history.record_nightly(db, runs, commit="", started=started)
        window = history.nightlies(db, 3)
        removals = nightly.propose(db, index, merge_runs(runs), window, RUNNERS, 3)
        got = macos.propose_moves(db, index, merge_runs(runs), window, RUNNERS, {}, 3)
    finally:
        db.close()
    assert [(p.key, p.action) for p in removals.decisions] == [("fft.hfft2", "delete")]
    assert got == macos.Moves((), ())


def test_propose_moves_reads_the_earlier_nights_from_the_history(tmp_path) -> None:
    e = entry("atan2", ("int64", "int32"))
    index = SimpleNamespace(
        opinfos=(ATAN2,), xfails=SimpleNamespace(entries=(e,)), decorations=Decorations(())
    )
    old_only = {r: results("atan2", o) for r, o in OLD_ONLY.items()}
    everywhere = {r: results("atan2", {"int64": XF, "int32": XF}) for r in RUNNERS}
    db = history.connect(tmp_path / "h.sqlite")
    try:
        proposed = []
        for day, runs in enumerate((everywhere, old_only, old_only, old_only), 1):
            started = history.timestamp(f"2026-03-0{day}T03:17:00")
            history.record_nightly(db, runs, commit="", started=started)
            window = history.nightlies(db, 3)
            got = macos.propose_moves(db, index, merge_runs(runs), window, RUNNERS, {}, 3)
            proposed.append([(d.key, d.to_list) for d in got.decisions])
    finally:
        db.close()
    assert proposed == [[], [], [], [("atan2", "MACOS_BEFORE_15_0_XFAILLIST")]]
    assert "(2026-03-02 … 2026-03-04)" in got.decisions[0].reason


def test_to_changes_refuses_a_move() -> None:
    e = entry("atan2", ("int64", "int32"))
    (d,) = moves(e, [night(OLD_ONLY)] * 3).decisions
    with pytest.raises(ValueError, match="move to another list"):
        xfail_plan.to_changes([d])
