"""Same build, both paths: an operator whose host file reads a switch forcing its MPSGraph
path is timed a second time, in its own process, with the switch set (real script, device
cpu, where the switch changes nothing but is seen by the process)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from pipeline import sandbox
from pipeline.config import load_settings
from pipeline.flows.speed import measure
from pipeline.report.speed import render_paths
from pipeline.tree.switches import GraphSwitch, graph_switches
from pipeline.workspace import prepare
from tests.conftest import settings_env

HOST = "aten/src/ATen/native/mps/operations/UnaryKernel.mm"
SWITCH = "PYTORCH_MPS_FORCE_MPSGRAPH_EXP2"


# The tree is a copy of the sandbox named by root=, so its OpInfos come from op_db's dump:
# with the session's check-math cache (settings_env) dumped once a session, not per test.


def with_switch(tmp_path: Path) -> Path:
    root = sandbox.materialize(tmp_path / "tree")
    host = root / HOST
    host.write_text(
        host.read_text() + f'\nstatic const bool force_graph = c10::utils::has_env("{SWITCH}");\n'
    )
    return root


def test_switches_are_read_from_the_host_files(tmp_path: Path) -> None:
    assert graph_switches(with_switch(tmp_path)) == (GraphSwitch(SWITCH, HOST),)
    softmax = GraphSwitch("PYTORCH_MPS_FORCE_MPSGRAPH_SOFTMAX", HOST)
    assert softmax.covers("softmax") and softmax.covers("log_softmax")
    assert not softmax.covers("softmax_backward") and not softmax.covers("exp2")


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_an_operator_with_a_switch_is_timed_on_both_paths(tmp_path: Path) -> None:
    root = with_switch(tmp_path)
    settings = prepare(
        load_settings(
            {"root": str(root), "state_dir": str(tmp_path / "state")}, env=settings_env(), cwd=root
        )
    )
    result = measure(
        settings, ["exp2", "atan2"], device="cpu", shapes={"medium": (8, 8)},
        min_run_time=0.001, repeats=3, max_run_time=0.01,
    )  # fmt: skip
    (graph,) = result.forced.values()
    assert {m.op for m in graph} == {"exp2"}  # atan2 has no switch: timed once
    assert {m.key for m in graph} == {m.key for m in result.measurements if m.op == "exp2"}
    written = json.loads((settings.state_dir / "speed" / SWITCH.lower() / "speed.json").read_text())
    assert written["env"] == {SWITCH: "1"}  # the process ran with the switch set
    lines = render_paths(result.measurements, result.forced)
    assert lines[0] == f"#### Metal against MPSGraph (`{SWITCH}=1`), same build"
    assert any(line.startswith("| `exp2` | float32 | medium | transposed |") for line in lines)


# Our own file in the shape of upstream's test/bench_mps_ops.py: generic helpers returning
# torch.utils.benchmark measurements labelled by layout, and a main() naming its operators.
BENCH_MPS_OPS = """\
import torch
from torch.utils.benchmark import Timer


def bench_unary_op(func, x, label):
    timer = Timer(stmt="f(x)", globals={"f": func, "x": x}, description=label)
    return timer.blocked_autorange(min_run_time=0.01)


def bench_unary(unary_func, device="mps", dtype=torch.float32):
    x = torch.rand(64, 64, device=device).to(dtype)
    return [bench_unary_op(unary_func, x, "dense"), bench_unary_op(unary_func, x.t(), "transposed")]


def bench_binary(binary_func, device="mps", dtype=torch.float32):
    raise RuntimeError("not in this test")


def main():
    for op in (torch.exp2, torch.sqrt):
        bench_unary(op)
"""


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_upstream_s_reference_benchmark_runs_beside_ours(tmp_path: Path) -> None:
    from pipeline.report.speed import render_upstream

    root = sandbox.materialize(tmp_path / "tree")
    (root / "test" / "bench_mps_ops.py").write_text(BENCH_MPS_OPS)
    settings = prepare(
        load_settings(
            {"root": str(root), "state_dir": str(tmp_path / "state")}, env=settings_env(), cwd=root
        )
    )
    result = measure(
        settings, ["exp2", "atan2"], device="cpu", shapes={"large": (64, 64)},
        min_run_time=0.001, repeats=3, max_run_time=0.01,
    )  # fmt: skip
    assert result.upstream_error == ""
    # exp2 is named by the file; atan2 is not (and its helper would fail): not run
    assert {(f.op, f.dtype, f.label) for f in result.upstream} == {
        ("exp2", d, label) for d in ("float32", "float16") for label in ("dense", "transposed")
    }
    assert all(f.median and f.median > 0 for f in result.upstream)
    lines = render_upstream(result.measurements, result.upstream)
    row = next(line for line in lines if line.startswith("| `exp2` | float32 | dense |"))
    assert "| large contiguous |" in row and not row.endswith("| – |")  # ours beside it
