"""`migrate`'s xfail planning on the sandbox tree, without building or running tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.config import Settings, load_settings
from pipeline.guide import xfails as migrate
from pipeline.results.junit import CaseResult, Outcome
from pipeline.results.table import build_table
from pipeline.tree import common_mps, opinfo
from pipeline.workspace import prepare

M1 = "macos-m1-14"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return prepare(load_settings({"state_dir": str(tmp_path / "state")}))


def xpasses(stem: str, *dtypes: str) -> list[CaseResult]:
    return [
        CaseResult(
            "test_mps.TestConsistencyMPS",
            f"test_output_match_{stem}_mps_{d}",
            "output_match",
            stem,
            d,
            Outcome.XPASS,
            False,
            1,
            "",
            0.1,
            "junit.xml",
        )  # fmt: skip
        for d in dtypes
    ]


def plan(settings: Settings, *dtypes: str):
    """Plan hypot's xfail changes after a run in which ``dtypes`` (only) xpassed."""
    hypot = [i for i in opinfo.load_opinfos(settings.tree) if i.key == "hypot"]
    assert [i.dtypes for i in hypot] == [("float32", "float16", "bfloat16")]
    entries = common_mps.read(settings.root).for_key("hypot")
    return migrate.plan_xfail_changes(
        settings, entries, hypot, build_table(xpasses("hypot", *dtypes))
    )


def test_an_all_dtypes_xfail_keeps_the_dtypes_that_did_not_run(settings: Settings) -> None:
    """``"hypot": None`` with only float32 run: float16 and bfloat16 were not run."""
    decisions, edit = plan(settings, "float32")
    forward = next(d for d in decisions if d.list == "UNIMPLEMENTED_XFAILLIST")
    assert (forward.action, forward.new_dtypes) == ("narrow_none", ("float16", "bfloat16"))
    assert "float16, bfloat16: not run" in forward.reason
    assert edit is not None
    assert '-            "hypot": None,\n' in edit.diff()
    assert '+            "hypot": [torch.float16, torch.bfloat16],\n' in edit.diff()
    # the grad list had no grad results: kept
    grad = next(d for d in decisions if d.list == "XFAILLIST_GRAD")
    assert grad.action == "keep"


def test_an_all_dtypes_xfail_goes_when_every_dtype_xpassed(settings: Settings) -> None:
    decisions, edit = plan(settings, "float32", "float16", "bfloat16")
    forward = next(d for d in decisions if d.list == "UNIMPLEMENTED_XFAILLIST")
    assert (forward.action, forward.new_dtypes) == ("delete", ())
    assert edit is not None and '-            "hypot": None,\n' in edit.diff()
    assert '+            "hypot"' not in edit.diff()
