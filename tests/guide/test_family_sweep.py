"""Issue 18's sweep: the preview and the edit stage of every operator of a real backlog.

The tree is each release's (OLDEST and NEWEST, issue 27) native_functions.yaml, native/*.h
headers and common_mps.py with the upstream-shaped .metal/.mm fixtures (every family of
tests/fixtures/upstream) and the real op_db (the installed wheel's: OLDEST's), in a git
checkout. Each operator runs the real plan in process (what ``migrate OP --dry-run --body
...`` and ``--stage edit`` compute); a run that would complete writes its edits, and the
tree is read again: every invariant must hold and the edit stage's re-check must find
nothing left, else the preview and the edit disagree. A run that would not complete writes
nothing; a sample of each outcome goes through the real CLI, preview and edit, and their
exit codes and the tree are compared.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter

import pytest

from pipeline.config import load_settings
from pipeline.errors import PipelineError, UnknownImplementationError
from pipeline.guide import families
from pipeline.guide.backlog import backlog
from pipeline.guide.checklist import Status, checklist
from pipeline.guide.plan import exec_kind, plan_edits
from pipeline.tree.index import load_index
from tests.conftest import MATH_CACHE_ENV, git_init
from tests.guide.test_replay_real import OPINFO_CACHE, real_tree  # noqa: F401 - a fixture

pytestmark = [pytest.mark.realdata, pytest.mark.slow]

BODY = {"unary": "return x;", "binary": "return a;"}


def _cli(settings, *args: str) -> subprocess.CompletedProcess[str]:
    # the settings the in-process plans had (loaded without the session's check-math cache):
    # op_db's dump is the one in the state's cache, not made again in that cache (6 CPU-s)
    env = {k: v for k, v in os.environ.items() if k != MATH_CACHE_ENV}
    return subprocess.run(
        [sys.executable, "-m", "pipeline", *args, "--root", str(settings.root)]
        + ["--state-dir", str(settings.state_dir), "--python", sys.executable],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=settings.root.parent,
        env=env,
    )


def _status(root) -> str:
    return subprocess.run(
        ["git", "-C", str(root), "status", "--porcelain"], capture_output=True, text=True
    ).stdout


def _preview_exit(index, op: str, body: str) -> tuple[int, object]:
    """What ``migrate OP --dry-run --body`` exits with, and its plan (or the refusal)."""
    try:
        plan = plan_edits(index, op, body)
    except PipelineError as exc:
        return exc.exit_code, exc
    return (1 if plan.blockers else 0), plan


@pytest.fixture(scope="module")
def checkout(real_tree, tmp_path_factory):  # noqa: F811 - the fixture imported above
    root = tmp_path_factory.mktemp("sweep") / "pytorch"
    shutil.copytree(real_tree.root, root)
    git_init(root)
    state = root.parent / "state"
    # op_db's dump, keyed by a hash of its sources: the one the replay test made, when it
    # ran first (on another xdist worker, or on a fresh machine, it may not have)
    if OPINFO_CACHE.is_dir():
        shutil.copytree(OPINFO_CACHE, state / "cache", dirs_exist_ok=True)
    settings = load_settings(
        {"root": str(root), "state_dir": str(state), "python": sys.executable},
        env={},
        cwd=root.parent,
    )
    return settings


def _edit_items_failing(index, op: str) -> list[str]:
    record = index.record(op)
    return [
        f"{i.id}: {i.details[0].text if i.details else ''}"
        for i in checklist(record)
        if i.id in families.EDIT_ITEMS and i.status is Status.FAIL
    ]


def _unresolved(index) -> set[str]:
    """Native stubs whose kernel has no functor in the library their host loads."""
    functors = {k.path: {fn.name for fn in k.functors} for k in index.kernels.files}
    return {
        f"{f.path}: {s.stub} -> {s.kernel_name}"
        for f in index.host.files
        for s in f.stubs
        if s.native
        and s.kernel_name
        and s.kernel_name not in functors.get(families.kernels_of_host(index, f.path), set())
    }


def test_every_backlog_operator_completes_or_writes_nothing_and_says_what_is_left(checkout):
    settings = checkout
    root = settings.root
    index = load_index(settings.tree)
    items = backlog(index)
    assert len(items) > 250
    unresolved_before = _unresolved(index)
    counts: Counter[str] = Counter()
    outcome: dict[str, int] = {}
    disagreements, exit0_audit_failing, problems = [], [], []
    for item in items:
        op = item.op
        body = BODY[exec_kind(index.record(op, find_references=False))]
        code, result = _preview_exit(index, op, body)
        outcome[op] = code
        unknown = isinstance(result, UnknownImplementationError)
        counts[
            "unknown" if unknown else {0: "completed", 1: "left to write", 2: "refused"}[code]
        ] += 1
        if code == 0 and not index.record(op, find_references=False).opinfos:
            counts["completed, its tests unknown (no OpInfo found)"] += 1
        if code == 2:
            assert "\n" not in str(result) and ("nothing was written" in str(result)), op
        if code != 0:
            continue  # the edit stage runs the same plan: it writes nothing (see the sample)
        # the edit stage's writes, then the tree read again as the audit reads it
        for e in result.edits:
            (root / e.rel).write_text(e.after)
        after = load_index(settings.tree)
        unit = (op, *families.partners(index, op))
        failing = [f for name in unit for f in _edit_items_failing(after, name)]
        if failing:
            exit0_audit_failing.append(f"{op}: {failing}")
        broken = _unresolved(after) - unresolved_before
        if broken:
            problems.append(f"{op}: unresolved kernels {sorted(broken)}")
        again = plan_edits(after, op, body)  # the edit stage's own re-check
        if not again.empty:
            disagreements.append(f"{op}: the preview said 0, the edit leaves {again.blockers}")
        for e in result.edits:
            (root / e.rel).write_text(e.before)
    print("\nsweep:", dict(counts), "of", len(items))
    assert not disagreements, disagreements
    assert not exit0_audit_failing, exit0_audit_failing
    assert not problems, problems
    assert counts["completed"] and counts["refused"] and counts["left to write"]

    # a sample through the real CLI: one operator of each outcome and a forward/backward unit
    sample = [next(op for op, c in outcome.items() if c == code) for code in (0, 1, 2)]
    sample += [op for op in ("mish", "hardswish") if op in outcome]
    for op in sample:
        body = BODY[exec_kind(index.record(op, find_references=False))]
        preview = _cli(settings, "migrate", op, "--dry-run", "--body", body)
        edit = _cli(settings, "migrate", op, "--stage", "edit", "--body", body)
        assert preview.returncode == edit.returncode == outcome[op], (op, preview, edit)
        if edit.returncode:
            assert not _status(root), f"{op}: exit {edit.returncode} but the tree changed"
            continue
        audit = _cli(settings, "audit", op, "--json")
        items_ = json.loads(audit.stdout)["checklist"]
        assert all(i["status"] != "fail" for i in items_ if i["id"] in families.EDIT_ITEMS), (
            op,
            items_,
        )
        subprocess.run(["git", "-C", str(root), "checkout", "-q", "--", "."], check=True)
