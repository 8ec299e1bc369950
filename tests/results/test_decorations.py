"""pipeline/results/decorations.py: the DecorateInfos the consistency tests judge, and the
others kept with their reason (issue 31), over tests/fixtures/decorations."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.results.decorations import decide_decorations, split
from pipeline.results.junit import Outcome
from pipeline.results.table import merge_runs as merge
from pipeline.tree import decorations
from tests.results.test_decide import M1, M2, M2_26, XF, X, info, results

FIXTURE = Path(__file__).parents[1] / "fixtures" / "decorations"
CMI = "torch/testing/_internal/common_methods_invocations.py"
OPINFOS = [
    info("atan2", "float32", "float16", "int64", "int32"),
    info("clamp_max", "float32", "int64"),
    info("nn.functional.padconstant", "float32", "float16", variant="constant"),
]


@pytest.fixture(scope="module")
def found() -> tuple[decorations.Decoration, ...]:
    return decorations.read(FIXTURE).entries


def by_at(decisions):
    return {d.at.replace(CMI, "cmi"): d for d in decisions}


def test_an_xfail_on_the_consistency_test_that_xpassed_everywhere_goes(found):
    runs = {r: results("atan2", {"int64": X, "int32": X}) for r in (M1, M2)}
    got = by_at(decide_decorations(found, merge(runs), opinfos=OPINFOS))
    atan2 = got["cmi:21"]
    assert (atan2.action, atan2.key, atan2.dropped) == ("delete", "atan2", ("int64", "int32"))
    assert atan2.to_dict()["at"] == f"{CMI}:21"


def test_one_runner_flaky_or_failing_keeps_the_dtype(found):
    runs = {
        M1: results("atan2", {"int64": X, "int32": X}),
        M2: results("atan2", {"int64": X, "int32": X}, flaky={"int32"}),
    }
    atan2 = by_at(decide_decorations(found, merge(runs), opinfos=OPINFOS))["cmi:21"]
    assert (atan2.action, atan2.new_dtypes) == ("drop_dtypes", ("int32",))
    assert "flaky on macos-m2-15" in atan2.reason
    runs[M2] = results("atan2", {"int64": XF, "int32": XF})
    atan2 = by_at(decide_decorations(found, merge(runs), opinfos=OPINFOS))["cmi:21"]
    assert atan2.action == "keep"


def test_what_the_tool_does_not_run_is_kept_with_the_reason(found):
    runs = {r: results("atan2", {"int64": X, "int32": X}) for r in (M1, M2)}
    got = by_at(decide_decorations(found, merge(runs), opinfos=OPINFOS))
    reasons = {at: (d.action, d.reason) for at, d in got.items()}
    assert reasons["cmi:38"] == (
        "keep",
        "decorates TestCommon.test_dtypes, which the tool does not run",
    )
    assert (
        reasons["cmi:54"][1] == "decorates TestCommon.test_python_ref, which the tool does not run"
    )
    assert "a skip" in reasons["cmi:30"][1]  # atan's, active_if IS_MACOS or IS_WINDOWS
    test_file = [d for d in got.values() if d.list == "test_file"]
    assert test_file and all("a test the tool does not run" in d.reason for d in test_file)
    assert all(d.action == "keep" for at, d in got.items() if at != "cmi:21")
    # tolerances are not xfails: not judged, not listed
    assert "cmi:55" not in got


SOURCE = """\
op_db = [
    OpInfo('atan2',
           skips=(
               DecorateInfo(unittest.expectedFailure, 'TestConsistency', 'test_output_match',
                            dtypes=(torch.float16,), active_if=MACOS_VERSION < 15.0),
               DecorateInfo(unittest.expectedFailure, 'TestConsistency', 'test_output_match',
                            device_type='mps', active_if=lambda: custom()),
           )),
]
"""


def test_a_macos_bound_is_judged_on_the_runners_it_holds_on():
    found = decorations.parse(SOURCE, CMI).decorations
    # 14 is the only runner before 15.0: it xpassed there; 15 and 26 pass (not decorated)
    runs = {
        M1: results("atan2", {"float16": X}),
        M2: results("atan2", {"float16": Outcome.PASS}),
        M2_26: results("atan2", {"float16": Outcome.PASS}),
    }
    bound, custom = decide_decorations(found, merge(runs), opinfos=OPINFOS)
    assert (bound.action, bound.list) == ("delete", "DecorateInfo_MACOS_BEFORE_15_0")
    assert (custom.action, custom.reason) == (
        "keep",
        "active_if lambda: custom(): when it holds is not read",
    )
    runs[M1] = results("atan2", {"float16": XF})
    bound, _ = decide_decorations(found, merge(runs), opinfos=OPINFOS)
    assert bound.action == "keep"


def test_split_judges_only_opinfos_the_tests_run(found):
    judged, kept = split(found, ["atan2"])
    assert [j.at for j in judged] == [f"{CMI}:21"]
    pad = [k for k in kept if k.key == "nn.functional.padconstant"]
    assert (
        pad and pad[0].reason == "no consistency test runs the OpInfo 'nn.functional.padconstant'"
    )
