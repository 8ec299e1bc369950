"""The migrate chain tells the truth and never loses work: real doit, ninja, pytest and git on
private sandbox copies.

Stale results are recomputed after a rebuild or a change of test settings; two chains on one
tree never both claim success while one's edits are lost; a kill at any point of the edit
stage is finished by the next run; a half-done tree is completed; a migration that needs a
hand-written piece writes nothing and says what to write.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pipeline import sandbox
from pipeline.tree.common_mps import read as read_common_mps
from tests.doit_runs import REPO, doit, executed
from tests.sandbox.edits import BINARY_KERNEL, BINARY_METAL, BINARY_OPS, YAML, edit

pytestmark = pytest.mark.slow

OPINFO_TABLE = f"opinfo_table={sandbox.OPINFO_TABLE}"


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def commit_all(root: Path, message: str) -> None:
    git(root, "commit", "-qam", message)


def stray_temps(root: Path) -> list[Path]:
    return [p for p in root.rglob("*.tmp") if ".git" not in p.parts]


def tree_copy(tmp_path: Path) -> Path:
    """A sandbox tree of its own (root=...), shared by several state dirs."""
    return sandbox.materialize(tmp_path / "pytorch")


def atan2_migrated(root: Path) -> bool:
    yaml = (root / YAML).read_text()
    return (
        "CPU, CUDA, MPS: atan2_out" in yaml
        and "atan2_out_mps" not in (root / BINARY_OPS).read_text()
        and "REGISTER_DISPATCH(atan2_stub" in (root / BINARY_KERNEL).read_text()
    )


def test_a_rebuild_reruns_every_operators_tests(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = doit(state, "migrate_op", "op=atan2")
    assert first.returncode == 0, first.stdout + first.stderr
    root = state / "sandbox"
    # atan2 loses its integer kernels; then another operator's migration rebuilds torch_cpu
    edit(root, BINARY_METAL, "REGISTER_INT2FLOAT_BINARY_OP(atan2);\n", "")
    commit_all(root, "drop atan2's integer kernels")
    other = doit(state, "migrate_op", "op=lt")
    assert other.returncode == 0, other.stdout + other.stderr
    assert "build" in executed(other.stdout)

    again = doit(state, "migrate_op", "op=atan2")
    assert "test_op:atan2" in executed(again.stdout), again.stdout  # the build changed under it
    assert again.returncode == 1
    assert "6 failing test(s)" in again.stdout + again.stderr
    table = (state / "ops/atan2/table.md").read_text()
    assert "int64" in table and "fail" in table.lower()
    assert "test_output_match_atan2_mps_int64 [fail]" in again.stdout  # on the terminal

    # nothing changed since: the build is idle and the tests are not re-run...
    idle = doit(state, "migrate_op", "op=atan2")
    assert "test_op:atan2" not in executed(idle.stdout)
    assert idle.returncode == 1  # ...and the truth stays the same


def test_changing_the_test_kinds_reruns_the_tests(tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert doit(state, "migrate_op", "op=atan2").returncode == 0
    config = tmp_path / "pipeline.yaml"
    config.write_text("test:\n  kinds: [output_match, output_grad_match]\n")
    again = doit(state, "test_op", "op=atan2", env={"MPS_PIPELINE_CONFIG": str(config)})
    assert again.returncode == 0, again.stdout + again.stderr
    assert "test_op:atan2" in executed(again.stdout)
    assert "test_output_grad_match_atan2" in (state / "ops/atan2/junit.xml").read_text()
    # same settings again: up to date
    same = doit(state, "test_op", "op=atan2", env={"MPS_PIPELINE_CONFIG": str(config)})
    assert "test_op:atan2" not in executed(same.stdout)


def test_two_chains_on_one_tree_never_lose_edits(tmp_path: Path) -> None:
    root = tree_copy(tmp_path)
    common = [f"root={root}", OPINFO_TABLE]
    cmd = [sys.executable, "-m", "doit", "-f", str(REPO / "dodo.py")]
    procs = {
        op: subprocess.Popen(
            [
                *cmd,
                "-d",
                str(tmp_path),
                "migrate_op",
                f"op={op}",
                *common,
                f"state_dir={tmp_path / ('state-' + op)}",
            ],  # fmt: skip
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for op in ("atan2", "lt")
    }
    results = {op: (p.wait(timeout=300), p.stdout.read()) for op, p in procs.items()}
    yaml = (root / YAML).read_text()
    migrated = {"atan2": atan2_migrated(root), "lt": "MPS: lt_out_mps" not in yaml}
    for op, (code, out) in results.items():
        if code == 0:
            assert migrated[op], f"{op} exited 0 but its edits are gone:\n{out}"
        else:
            assert "another mps-pipeline run" in out or "changed by another process" in out, out
    assert any(code == 0 for code, _ in results.values())
    assert stray_temps(root) == []


KILL_SCRIPT = textwrap.dedent(
    """
    import os, sys
    import pipeline.edit.transaction as txn
    from pipeline.__main__ import main

    limit, real, count = int(sys.argv[1]), txn._fs_step, 0

    def step(*args, **kwargs):
        global count
        real(*args, **kwargs)
        count += 1
        if count == limit:
            os._exit(9)  # a kill: no cleanup, no finally blocks

    txn._fs_step = step
    sys.exit(main(["migrate", "atan2", "--stage", "edit", *sys.argv[2:]]))
    """
)


# atan2's edit commits three files in 10 steps: journal (1), 3 temps (2-4), journal marked
# committed (5), 3 renames (6-8), ownership (9), journal removal (10). Every step is killed
# at, and recovered from, by tests/edit/test_transaction.py (in a child process, per step);
# here a whole chain finishes each kind of tree a kill leaves, a chain a point: before the
# commit point with no temp (1) and with all three (4: the roll-back removes them, as it does
# the one or two of 2 and 3); after the first and the last rename (6, 8); the journal gone
# (10). Committed with nothing renamed (5), one rename left (7) and the ownership written
# with the journal left (9) are tests/reliability/test_recovery.py's (killed before
# `replace` 1 and 3 and `unlink` 1), finished by the CLI's chain.
KILL_POINTS = (1, 4, 6, 8, 10)


def test_a_kill_at_any_point_of_the_edit_is_finished_by_the_next_run(tmp_path: Path) -> None:
    for n in KILL_POINTS:
        case = tmp_path / f"kill-{n}"
        root = tree_copy(case)
        state = case / "state"
        args = ["--root", str(root), "--opinfo-table", sandbox.OPINFO_TABLE]
        killed = subprocess.run(
            [sys.executable, "-c", KILL_SCRIPT, str(n), *args, "--state-dir", str(state)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert killed.returncode == 9, killed.stdout + killed.stderr
        rerun = doit(state, "migrate_op", "op=atan2", f"root={root}", OPINFO_TABLE, cwd=case)
        assert rerun.returncode == 0, f"kill after step {n}:\n{rerun.stdout}{rerun.stderr}"
        assert atan2_migrated(root), n
        assert stray_temps(root) == [], n
        assert read_common_mps(root).for_key("atan2") == ()


def test_a_hand_folded_dispatch_is_completed(tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert doit(state, "audit", "op=atan2").returncode == 0
    root = state / "sandbox"
    # the contributor folded the yaml by hand; the MPSGraph code is still there
    edit(
        root,
        YAML,
        "    CPU, CUDA: atan2_out\n    MPS: atan2_out_mps\n",
        "    CPU, CUDA, MPS: atan2_out\n",
    )
    commit_all(root, "fold atan2 by hand")
    audit = doit(state, "audit", "op=atan2")
    assert "✗ no MPSGraph implementation left" in audit.stdout
    assert "atan2_out_mps" in audit.stdout
    result = doit(state, "migrate_op", "op=atan2")
    assert result.returncode == 0, result.stdout + result.stderr
    assert atan2_migrated(root)
    assert "<ATen/ops/atan2_native.h>" not in (root / BINARY_OPS).read_text()


def test_a_stub_needing_a_host_kernel_writes_nothing(tmp_path: Path) -> None:
    state = tmp_path / "state"
    result = doit(state, "migrate_op", "op=logit", "body=return x;")
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout + result.stderr
    assert "nothing was written" in out
    assert "static void logit_mps_kernel(TensorIteratorBase& iter, const Scalar& arg1)" in out
    assert git(state / "sandbox", "status", "--porcelain") == ""


def test_a_dirty_common_mps_is_refused_before_the_first_write(tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert doit(state, "audit", "op=atan2").returncode == 0
    root = state / "sandbox"
    common = root / "torch/testing/_internal/common_mps.py"
    common.write_text(common.read_text() + "# my work in progress\n")
    result = doit(state, "migrate_op", "op=atan2")
    assert result.returncode == 2
    assert "common_mps.py has uncommitted changes" in result.stdout + result.stderr
    assert git(root, "status", "--porcelain").split() == ["M", str(common.relative_to(root))]
    assert "build" not in executed(result.stdout)


def test_ctrl_c_prints_one_line_and_exits_130(tmp_path: Path) -> None:
    # a build that takes long enough to be interrupted for sure
    config = tmp_path / "pipeline.yaml"
    config.write_text('build_command: [sh, -c, "sleep 60"]\n')
    cmd = [sys.executable, "-m", "doit", "-f", str(REPO / "dodo.py"), "-d", str(tmp_path)]
    proc = subprocess.Popen(
        [*cmd, "migrate_op", "op=atan2", f"state_dir={tmp_path / 'state'}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "MPS_PIPELINE_CONFIG": str(config), "PYTHONUNBUFFERED": "1"},
    )
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if line.startswith(".  build"):  # the build is running: interrupt it
            time.sleep(0.5)
            proc.send_signal(signal.SIGINT)
            break
    seen.append(proc.stdout.read())
    assert proc.wait(timeout=60) == 130
    out = "".join(seen)
    assert "Traceback" not in out
    assert "interrupted during build: no file was left half-written" in out
    assert stray_temps(tmp_path / "state" / "sandbox") == []


def test_the_preview_shows_every_diff_and_exits_1_when_work_is_left(tmp_path: Path) -> None:
    state = tmp_path / "state"
    result = doit(state, "migrate_op", "op=xlogy", "dry_run=1")
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert f"+++ b/{YAML}" in out  # the fold, although the functor is missing
    assert f"+++ b/{BINARY_KERNEL}" in out and "REGISTER_DISPATCH(xlogy_stub" in out
    assert "TODO (a skeleton, never written) aten/src/ATen/native/mps/kernels/" in out
    assert "+REGISTER_INT2FLOAT_BINARY_OP(xlogy);" in out
    assert "a real run would write nothing" in out + result.stderr
    assert git(state / "sandbox", "status", "--porcelain") == ""


def test_host_body_completes_a_stub_with_extra_parameters(tmp_path: Path) -> None:
    state = tmp_path / "state"
    host = 'host_body=lib.exec_unary_kernel(iter, "logit", arg1);'
    # real math: the chain's check_math stage stops a functor that disagrees with torch
    body = "body=return ::metal::log(float(x) / (1.0f - float(x)));"
    result = doit(state, "migrate_op", "op=logit", body, host)
    out = result.stdout + result.stderr
    # edited, built and tested; the skip-list entry and the OpInfo decorator are left
    assert "static void logit_mps_kernel(TensorIteratorBase& iter, const Scalar& arg1)" in (
        (state / "sandbox" / "aten/src/ATen/native/mps/operations/UnaryKernel.mm").read_text()
    )
    assert "0 failing test(s)" in out and result.returncode == 1


def test_the_sandboxs_half_done_migration_is_completed(tmp_path: Path) -> None:
    # erfinv: kernel, stub and yaml are native already; UnaryOps.mm still includes its header
    state = tmp_path / "state"
    audit = doit(state, "audit", "op=erfinv")
    assert "✗ no MPSGraph implementation left" in audit.stdout
    result = doit(state, "migrate_op", "op=erfinv")
    assert result.returncode == 0, result.stdout + result.stderr
    ops = (state / "sandbox" / "aten/src/ATen/native/mps/operations/UnaryOps.mm").read_text()
    assert "<ATen/ops/erfinv_native.h>" not in ops and "<ATen/ops/exp2_native.h>" in ops
