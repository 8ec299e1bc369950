"""The migrate chain's check_math stage: a functor that disagrees with torch stops the chain
before ninja (exit 1, the mismatches on the terminal); a right one goes on to the build."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.doit_runs import doit, stages_run

pytestmark = [pytest.mark.slow, pytest.mark.realdata]

BINARY_METAL = "aten/src/ATen/native/mps/kernels/BinaryKernel.metal"


def test_a_wrong_functor_stops_the_chain_before_the_build(tmp_path: Path, host_cxx) -> None:
    state = tmp_path / "state"
    assert doit(state, "audit", "op=atan2").returncode == 0  # materializes the sandbox
    metal = state / "sandbox" / BINARY_METAL
    text = metal.read_text()
    right = "return static_cast<T>(precise::atan2(float(a), float(b)));"
    assert right in text
    metal.write_text(
        text.replace(right, "return static_cast<T>(precise::atan2(float(b), float(a)));")
    )
    result = doit(state, "migrate_op", "op=atan2", "force=1")
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    ran = stages_run(result.stdout)
    assert "check_math" in ran and "build" not in ran and "test_op" not in ran
    assert "atan2 disagree(s) with torch on CPU" in out
    assert "float32: (" in out and "[precision]" in out  # the counterexamples are shown
    assert (state / "ops" / "atan2" / "math.md").read_text().count("| `atan2` |") >= 3
    # the right functor again: the chain goes on, and the summary carries the table
    metal.write_text(text)
    again = doit(state, "migrate_op", "op=atan2", "force=1")
    assert again.returncode == 0, again.stdout + again.stderr
    assert {"check_math", "build", "summary"} <= stages_run(again.stdout)
    summary = (state / "ops" / "atan2" / "summary.md").read_text()
    assert "Functor math on the host (check-math):" in summary
    assert "| `atan2` | float32 |" in summary and "Not covered:" in summary
