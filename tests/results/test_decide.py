"""pipeline/results/decide.py: which xfail entries the results say can go, rule by rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.edit.xfails import XfailChange, apply_xfail_changes
from pipeline.guide.xfails import to_changes
from pipeline.results.decide import XfailAction, XfailDecision, decide_xfails, runner_version
from pipeline.results.junit import CaseResult, Outcome, parse_report
from pipeline.results.table import build_table, merge_runs
from pipeline.tree.common_mps import XfailEntry, parse
from pipeline.tree.opinfo import OpInfoRecord
from pipeline.tree.span import Span

PATH = "torch/testing/_internal/common_mps.py"
M1, M2, M2_26 = "macos-m1-14", "macos-m2-15", "macos-m2-26"
X, XF, P, F = Outcome.XPASS, Outcome.XFAIL, Outcome.PASS, Outcome.FAIL


def entry(
    key: str,
    dtypes: tuple[str, ...] | None,
    list_name: str = "UNIMPLEMENTED_XFAILLIST",
    function: str = "mps_ops_modifier",
    raw: str | None = None,
) -> XfailEntry:
    return XfailEntry(list_name, function, key, dtypes, Span(PATH, 10, 10), None, raw)


def results(
    stem: str,
    outcomes: dict[str, Outcome],
    *,
    kind: str = "output_match",
    flaky: set[str] = frozenset(),
) -> list[CaseResult]:
    return [
        CaseResult(
            "test_mps.TestConsistencyMPS",
            f"test_{kind}_{stem}_mps_{d}",
            kind,
            stem,
            d,
            o,
            d in flaky,
            1,
            "",
            0.1,
            "r.xml",
        )  # fmt: skip
        for d, o in outcomes.items()
    ]


def info(key: str, *dtypes: str, variant: str = "") -> OpInfoRecord:
    """The OpInfo whose xfail key is ``key`` (``name + variant``), tested for ``dtypes``."""
    name = key.removesuffix(variant) if variant else key
    return OpInfoRecord(name, variant, name, (), dtypes)


def decide_one(e: XfailEntry, runs, required=(), opinfo=None) -> XfailDecision:
    """``opinfo`` defaults to one tested for the entry's own dtypes."""
    opinfo = opinfo or info(e.key, *(e.dtypes or ()))
    (decision,) = decide_xfails([e], runs, required, opinfos=[opinfo])
    return decision


# --- the rules, one by one ---------------------------------------------------------------------


def test_drop_the_dtypes_that_xpassed() -> None:
    e = entry("atan2", ("float16", "int8", "bool"))
    d = decide_one(e, {M1: results("atan2", {"float16": X, "int8": X, "bool": XF})})
    assert (d.action, d.old_dtypes, d.new_dtypes) == (
        "drop_dtypes",
        ("float16", "int8", "bool"),
        ("bool",),
    )
    assert d.reason == f"float16, int8: xpass on {M1}; bool: xfail on {M1}"


def test_delete_when_nothing_remains() -> None:
    d = decide_one(
        entry("atan2", ("float16",)), {M1: results("atan2", {"float16": X, "float32": P})}
    )
    assert (d.action, d.new_dtypes) == ("delete", ())


def test_none_narrows_to_the_still_failing_tested_dtypes() -> None:
    runs = {M1: results("atan2", {"int8": X, "bool": XF, "float16": X, "float32": XF})}
    atan2 = info("atan2", "bool", "int8", "float16", "float32")
    d = decide_one(entry("atan2", None), runs, opinfo=atan2)
    assert (d.action, d.old_dtypes) == ("narrow_none", None)
    assert d.new_dtypes == ("float32", "bool")  # display order, whatever the results' order
    assert d.dropped == ("float16", "int8")


def test_none_all_xpassed_is_deleted() -> None:
    runs = {M1: results("atan2", {"float32": X, "int8": X})}
    d = decide_one(entry("atan2", None), runs, opinfo=info("atan2", "float32", "int8"))
    assert (d.action, d.new_dtypes, d.dropped) == ("delete", (), ("float32", "int8"))


def test_none_is_judged_on_every_dtype_the_test_runs_for() -> None:
    """Only float32 ran (a filtered run, a report cut short): the other dtypes the OpInfo
    is tested for were not run, and keep the entry."""
    atan2 = info("atan2", "float32", "float16", "int8")
    d = decide_one(entry("atan2", None), {M1: results("atan2", {"float32": X})}, opinfo=atan2)
    assert (d.action, d.new_dtypes, d.dropped) == ("narrow_none", ("float16", "int8"), ("float32",))
    assert d.reason == f"float32: xpass on {M1}; float16, int8: not run"
    # every dtype the test runs for xpassed: the entry goes
    runs = {M1: results("atan2", {"float32": X, "float16": X, "int8": X})}
    d = decide_one(entry("atan2", None), runs, opinfo=atan2)
    assert (d.action, d.new_dtypes) == ("delete", ())


def test_none_without_a_single_xpass_of_what_ran_keeps() -> None:
    atan2 = info("atan2", "float32", "float16")
    d = decide_one(entry("atan2", None), {M1: results("atan2", {"float32": XF})}, opinfo=atan2)
    assert (d.action, d.new_dtypes, d.dropped) == ("keep", None, ())
    assert d.reason == f"float32: xfail on {M1}; float16: not run"


def test_none_counts_dtypes_that_ran_beyond_the_opinfo() -> None:
    """OpInfo metadata older than the run: a dtype that ran and still fails keeps it."""
    runs = {M1: results("atan2", {"float32": X, "bool": XF})}
    d = decide_one(entry("atan2", None), runs, opinfo=info("atan2", "float32"))
    assert (d.action, d.new_dtypes) == ("narrow_none", ("bool",))


def test_none_grad_entry_is_judged_on_the_grad_dtypes() -> None:
    """The grad test runs for float32 and float16 only, whatever else the OpInfo supports."""
    grad = entry("atan2", None, list_name="XFAILLIST_GRAD", function="mps_ops_grad_modifier")
    atan2 = info("atan2", "float32", "float16", "int8", "bool")
    runs = {M1: results("atan2", {"float32": X}, kind="output_grad_match")}
    d = decide_one(grad, runs, opinfo=atan2)
    assert (d.action, d.new_dtypes) == ("narrow_none", ("float16",))
    runs = {M1: results("atan2", {"float32": X, "float16": X}, kind="output_grad_match")}
    assert decide_one(grad, runs, opinfo=atan2).action == "delete"


def _strict_xpass(dtype: str) -> str:
    return (
        f'<testcase classname="test_mps.TestConsistencyMPS" '
        f'name="test_output_match_atan2_mps_{dtype}" time="0.1">'
        '<failure message="[XPASS(strict)] atan2 works now">XPASS</failure></testcase>'
    )


def test_a_truncated_report_keeps_the_dtypes_it_lost(tmp_path: Path) -> None:
    """A runner killed mid-sweep: the parser keeps float32, float16's testcase is cut off."""
    head = '<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="2">'
    cut = tmp_path / "cut.xml"
    cut.write_text(head + _strict_xpass("float32") + _strict_xpass("float16")[:90])
    report = parse_report(cut)
    assert [c.dtype for c in report.cases] == ["float32"] and report.warnings
    atan2 = info("atan2", "float32", "float16")
    (d,) = decide_xfails([entry("atan2", None)], {M1: report.cases}, opinfos=[atan2])
    assert (d.action, d.new_dtypes) == ("narrow_none", ("float16",))
    assert "float16: not run" in d.reason

    whole = tmp_path / "whole.xml"
    whole.write_text(
        head + _strict_xpass("float32") + _strict_xpass("float16") + "</testsuite></testsuites>"
    )
    table = build_table(parse_report(whole).cases)
    (d,) = decide_xfails([entry("atan2", None)], table, opinfos=[atan2])
    assert (d.action, d.new_dtypes) == ("delete", ())


def test_nothing_xpassed_keeps() -> None:
    d = decide_one(entry("atan2", ("int8",)), {M1: results("atan2", {"int8": XF})})
    assert (d.action, d.new_dtypes) == ("keep", ("int8",))


def test_flaky_evidence_keeps() -> None:
    runs = {M1: results("atan2", {"float16": X}, flaky={"float16"})}
    d = decide_one(entry("atan2", ("float16",)), runs)
    assert d.action == "keep"
    assert d.reason == f"float16: flaky on {M1}"
    # only the flaky dtype stays when others clearly xpassed
    runs = {M1: results("atan2", {"float16": X, "int8": X}, flaky={"float16"})}
    d = decide_one(entry("atan2", ("float16", "int8")), runs)
    assert (d.action, d.new_dtypes) == ("drop_dtypes", ("float16",))


def test_missing_evidence_keeps() -> None:
    # int8 was not run at all
    d = decide_one(entry("atan2", ("int8",)), {M1: results("atan2", {"float16": X})})
    assert (d.action, d.reason) == ("keep", "int8: not run")
    d = decide_one(entry("atan2", ("float16", "int8")), {M1: results("atan2", {"float16": X})})
    assert (d.action, d.new_dtypes) == ("drop_dtypes", ("int8",))
    # no results for the operator at all
    d = decide_one(entry("atan2", ("int8",)), {M1: results("hypot", {"int8": X})})
    assert (d.action, d.reason) == ("keep", "no output_match results for atan2")


def test_multi_runner_agreement() -> None:
    runs = {
        M1: results("atan2", {"float16": X, "int8": X, "bool": X}),
        M2: results("atan2", {"float16": X, "int8": XF, "bool": X}),
        M2_26: results("atan2", {"float16": X, "int8": X}),
    }
    e = entry("atan2", ("float16", "int8", "bool"))
    # required runners: every one must have run the dtype and xpassed
    d = decide_one(e, runs, required=(M1, M2, M2_26))
    assert (d.action, d.new_dtypes) == ("drop_dtypes", ("int8", "bool"))
    assert f"int8: xpass on {M1}, {M2_26}; xfail on {M2}" in d.reason
    assert f"bool: not run on {M2_26}" in d.reason
    # no required runners: every runner that ran it must agree
    d = decide_one(e, runs)
    assert (d.action, d.new_dtypes) == ("drop_dtypes", ("int8",))


def test_a_required_runner_without_any_results_keeps_everything() -> None:
    runs = {M1: results("atan2", {"float16": X})}
    d = decide_one(entry("atan2", ("float16",)), runs, required=(M1, M2))
    assert (d.action, d.reason) == ("keep", f"float16: not run on {M2}")


def test_plain_pass_is_not_evidence() -> None:
    """A pass means the xfail did not apply to that run, not that it can go."""
    d = decide_one(entry("atan2", ("int8",)), {M1: results("atan2", {"int8": P})})
    assert (d.action, d.reason) == ("keep", f"int8: pass on {M1}")


def test_macos_list_untouched_without_results_from_those_versions() -> None:
    e = entry("fft.hfft2", ("complex64",), list_name="MACOS_BEFORE_14_4_XFAILLIST")
    newer = {
        M2: results("fft_hfft2", {"complex64": X}),
        M2_26: results("fft_hfft2", {"complex64": X}),
    }
    d = decide_one(e, newer, required=(M1, M2, M2_26))
    assert d.action == "keep" and "no results from runners it applies to" in d.reason
    # a 14.6 runner is not "before 14.4" either
    d = decide_one(e, {"macos-m1-14.6": results("fft_hfft2", {"complex64": X})})
    assert d.action == "keep"


def test_macos_list_decided_by_the_runners_it_applies_to() -> None:
    e = entry("fft.hfft2", ("complex64",), list_name="MACOS_BEFORE_14_4_XFAILLIST")
    runs = {
        M1: results("fft_hfft2", {"complex64": X}),
        # newer macOS runs without the xfail: their pass is neither for nor against
        M2: results("fft_hfft2", {"complex64": P}),
    }
    d = decide_one(e, runs, required=(M1, M2, M2_26))
    assert (d.action, d.reason) == ("delete", f"complex64: xpass on {M1}")
    runs[M1] = results("fft_hfft2", {"complex64": XF})
    assert decide_one(e, runs, required=(M1, M2, M2_26)).action == "keep"


def test_macos_list_with_a_name_we_cannot_read_is_kept() -> None:
    e = entry("fft.hfft2", ("complex64",), list_name="MACOS_SOMETIMES_XFAILLIST")
    d = decide_one(e, {M1: results("fft_hfft2", {"complex64": X})})
    assert d.action == "keep" and "does not say which versions" in d.reason


@pytest.mark.parametrize("list_name", ["SKIPLIST", "EMPTY_OPS_SKIPLIST", "SKIPLIST_GRAD"])
def test_skip_lists_are_never_dropped(list_name: str) -> None:
    e = entry("atan2", ("float16",), list_name=list_name)
    runs = {
        M1: results("atan2", {"float16": X})
        + results("atan2", {"float16": X}, kind="output_grad_match")
    }
    d = decide_one(e, runs)
    assert d.action == "keep" and "skip list" in d.reason


def test_sparse_list_is_left_alone() -> None:
    e = entry("logspace", None, list_name="UNIMPLEMENTED_XFAILLIST_SPARSE")
    assert decide_one(e, {M1: results("logspace", {"float32": X})}).action == "keep"


def test_grad_lists_use_grad_results() -> None:
    runs = {
        M1: results("atan2", {"float16": XF})
        + results("atan2", {"float16": X}, kind="output_grad_match")
    }
    grad = entry(
        "atan2", ("float16",), list_name="XFAILLIST_GRAD", function="mps_ops_grad_modifier"
    )
    assert decide_one(grad, runs).action == "delete"
    # the grad modifier's ON_MPS_XFAILLIST is a grad list too, by where it lives
    on_mps = entry(
        "atan2", ("float16",), list_name="ON_MPS_XFAILLIST", function="mps_ops_grad_modifier"
    )
    assert decide_one(on_mps, runs).action == "delete"
    forward = entry("atan2", ("float16",), list_name="ON_MPS_XFAILLIST")
    assert decide_one(forward, runs).action == "keep"


def test_entries_we_cannot_judge_are_kept() -> None:
    runs = {M1: results("atan2", {"int64": X})}
    raw = entry("atan2", (), raw="[torch.int64] if MACOS_VERSION < 14.0 else []")
    d = decide_one(raw, runs)
    assert d.action == "keep" and "by hand" in d.reason
    other = entry(
        "atan2", ("int64",), list_name="XFAILLIST", function="mps_ops_error_inputs_modifier"
    )
    assert decide_one(other, runs).action == "keep"
    assert decide_one(entry("atan2", ()), runs).action == "keep"


def test_only_the_operators_keys_are_decided() -> None:
    runs = {
        M1: results("nn_functional_pad_reflect", {"float16": X}) + results("atan2", {"int8": X})
    }
    entries = [
        entry("nn.functional.padreflect", ("float16",)),
        entry("atan2", ("int8",)),
        entry("hypot", ("int8",)),
    ]
    pad = info("nn.functional.padreflect", "float16", variant="reflect")
    assert pad.stem == "nn_functional_pad_reflect"
    decisions = decide_xfails(entries, runs, opinfos=[pad])
    assert [(d.key, d.action) for d in decisions] == [("nn.functional.padreflect", "delete")]
    decisions = decide_xfails(entries, runs, opinfos=[info("atan2", "int8"), info("hypot", "int8")])
    assert [(d.key, d.action) for d in decisions] == [("atan2", "delete"), ("hypot", "keep")]


def test_accepts_a_merged_table() -> None:
    table = merge_runs({M1: results("atan2", {"int8": X})})
    (d,) = decide_xfails([entry("atan2", ("int8",))], table, (M1,), opinfos=[info("atan2", "int8")])
    assert d.action == "delete"


def test_dropping_only_part_of_a_decision() -> None:
    """What the nightly does with a decision whose xpasses history confirmed only in part."""
    atan2 = info("atan2", "float32", "float16", "int8", "bool")
    runs = {M1: results("atan2", {"float32": X, "float16": X, "int8": X, "bool": XF})}
    none = decide_one(entry("atan2", None), runs, opinfo=atan2)
    assert none.dropped == ("float32", "float16", "int8")
    part = none.dropping_only({"int8", "float32"}, "confirmed")
    assert (part.action, part.new_dtypes, part.dropped, part.reason) == (
        "narrow_none",
        ("float16", "bool"),
        ("float32", "int8"),
        "confirmed",
    )
    # dtypes the decision did not drop are not dropped by asking
    assert none.dropping_only({"bool"}, "no").action == "keep"
    listed = decide_one(entry("atan2", ("bool", "int8", "float16")), runs)
    assert listed.dropping_only({"float16"}, "r").new_dtypes == ("bool", "int8")  # entry order
    assert listed.dropping_only({"int8", "float16"}, "r").action == "drop_dtypes"
    full = decide_one(entry("atan2", ("int8", "float16")), runs)
    assert full.dropping_only({"int8", "float16"}, "r").action == "delete"


def test_to_dict() -> None:
    runs = {M1: results("atan2", {"float32": X, "int8": XF})}
    d = decide_one(entry("atan2", None), runs, opinfo=info("atan2", "float32", "int8"))
    assert d.to_dict() == {
        "list": "UNIMPLEMENTED_XFAILLIST",
        "function": "mps_ops_modifier",
        "key": "atan2",
        "action": "narrow_none",
        "reason": f"float32: xpass on {M1}; int8: xfail on {M1}",
        "old_dtypes": None,
        "new_dtypes": ["int8"],
        "dropped": ["float32"],
    }
    kept = decide_one(entry("atan2", ("int8",)), runs).to_dict()
    assert (kept["old_dtypes"], kept["new_dtypes"], kept["dropped"]) == (["int8"], ["int8"], [])


@pytest.mark.parametrize(
    ("runner", "version"),
    [
        ("macos-m1-14", (14,)),
        ("macos-m2-15.5", (15, 5)),
        ("macos-m4-26_1", (26, 1)),
        ("local", None),
    ],
)
def test_runner_version(runner: str, version: tuple[int, ...] | None) -> None:
    assert runner_version(runner) == version


# --- the editor's input ---------------------------------------------------------------------


def test_to_changes() -> None:
    runs = {M1: results("atan2", {"float16": X, "int8": XF, "bool": X})}
    decisions = decide_xfails(
        [
            entry("atan2", ("float16", "int8")),
            entry("atan2", ("bool",), list_name="UNDEFINED_XFAILLIST"),
            entry("atan2", None, list_name="ON_MPS_XFAILLIST"),
            entry("atan2", ("int8",), list_name="SKIPLIST"),
        ],
        runs,
        opinfos=[info("atan2", "float16", "int8", "bool")],
    )
    assert [d.action for d in decisions] == ["drop_dtypes", "delete", "narrow_none", "keep"]
    assert to_changes(decisions) == (
        XfailChange("UNIMPLEMENTED_XFAILLIST", "mps_ops_modifier", "atan2", ("int8",), False),
        XfailChange("UNDEFINED_XFAILLIST", "mps_ops_modifier", "atan2", None, True),
        XfailChange("ON_MPS_XFAILLIST", "mps_ops_modifier", "atan2", ("int8",), False),
    )


@pytest.mark.realdata
def test_real_common_mps_round_trip(real_common_mps: Path) -> None:
    """Decisions on the wheel's entries feed the real editor, which applies them cleanly."""
    text = real_common_mps.read_text()
    model = parse(text, PATH)
    key = "nn.functional.conv_transpose3d"
    stem = "nn_functional_conv_transpose3d"
    runs = {
        r: results(stem, {"int64": X, "bfloat16": X, "float16": XF, "float32": P})
        for r in (M1, M2, M2_26)
    }
    conv = info(key, "float32", "float16", "bfloat16", "int64")
    assert conv.stem == stem
    decisions = decide_xfails(model.entries, runs, (M1, M2, M2_26), opinfos=[conv])
    by_list = {(d.list, d.function): d for d in decisions}
    unimplemented = by_list[("UNIMPLEMENTED_XFAILLIST", "mps_ops_modifier")]
    assert (unimplemented.old_dtypes, unimplemented.action, unimplemented.new_dtypes) == (
        ("int64", "bfloat16", "float16"),
        "drop_dtypes",
        ("float16",),
    )
    # every other entry of the operator (grad lists without grad results, skip lists) stays
    assert all(d.action == "keep" for d in decisions if d is not unimplemented)

    edit = apply_xfail_changes(text, PATH, to_changes(decisions))
    assert edit.changed
    after = {(e.list, e.function): e.dtypes for e in parse(edit.after, PATH).for_key(key)}
    assert after[("UNIMPLEMENTED_XFAILLIST", "mps_ops_modifier")] == ("float16",)


@pytest.mark.realdata
def test_real_common_mps_without_results_keeps_everything(real_common_mps: Path) -> None:
    model = parse(real_common_mps.read_text(), PATH)
    infos = [info(e.key, "float32", "float16") for e in model.entries]
    decisions = decide_xfails(model.entries, {M1: []}, opinfos=infos)
    assert len(decisions) == len(model.entries) > 100
    assert {d.action for d in decisions} == {"keep"}


def test_a_bare_major_version_is_that_release_point_zero() -> None:
    """macos-m2-15 runs 15.0: a list for "before 15.0" does not apply on it, "before 15.1" does."""
    e = entry("fft.hfft2", ("complex64",), list_name="MACOS_BEFORE_15_0_XFAILLIST")
    runs = {
        M1: results("fft_hfft2", {"complex64": X}),
        M2: results("fft_hfft2", {"complex64": XF}),  # not in scope: the list does not apply
    }
    assert decide_one(e, runs, required=(M1, M2)).action == "delete"
    e = entry("fft.hfft2", ("complex64",), list_name="MACOS_BEFORE_15_1_XFAILLIST")
    assert decide_one(e, runs, required=(M1, M2)).action == "keep"


def test_a_decision_reads_back_as_written_with_or_without_its_place() -> None:
    """xfails.json holds drop_xfails' decisions; summary reads them back (issue 31: an
    OpInfo DecorateInfo's carries its file:line, a common_mps.py entry's none)."""
    from pipeline.fields import read

    at = "torch/testing/_internal/common_methods_invocations.py:21"
    for decision in (
        XfailDecision("", "", "atan2", XfailAction.DELETE, ("int64",), (), "xpassed", at=at),
        XfailDecision("X", "f", "atan2", XfailAction.DELETE, None, (), "xpassed"),
    ):
        data = decision.to_dict()
        assert read(XfailDecision, data, "xfails.json") == decision
