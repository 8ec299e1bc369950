"""One transaction per edit stage: guards, all-or-nothing under kills, the per-tree lock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pipeline.edit.atomic import FileEdit, git_dirty
from pipeline.edit.transaction import Ownership, commit, recover, tree_lock, tree_state_dir
from pipeline.errors import ConcurrentChangeError, DirtyFileError, PipelineError, TreeBusyError
from tests.conftest import git_init

PROJECT = Path(__file__).resolve().parents[2]
BEFORE = {"a.txt": "one\n", "sub/b.txt": "two\n", "run.sh": "#!/bin/sh\necho three\n"}
AFTER = {rel: text.upper() for rel, text in BEFORE.items()}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "sub").mkdir(parents=True)
    for rel, text in BEFORE.items():
        (root / rel).write_text(text)
    (root / "c.txt").write_text("common\n")
    os.chmod(root / "run.sh", 0o755)
    git_init(root)
    return root


def _edits(root: Path) -> list[FileEdit]:
    return [FileEdit(rel, (root / rel).read_text(), AFTER[rel], "upper") for rel in BEFORE]


def _python(code: str, *args: str, **kw) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=PROJECT,
        **kw,
    )


def _tree(root: Path) -> dict[str, str]:
    return {rel: (root / rel).read_text() for rel in BEFORE}


def _leftovers(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(".tmp") or p.name == "journal.json"]


# ------------------------------------------------------------------------------- state dir


def test_state_dir_lives_in_the_git_dir_and_never_shows_in_git_status(repo: Path) -> None:
    state = tree_state_dir(repo)
    assert state == (repo / ".git" / "mps-pipeline").resolve()
    commit(repo, _edits(repo))
    status = subprocess.run(
        ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=all"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert sorted(line[3:] for line in status.splitlines()) == sorted(BEFORE)
    assert (state / "ownership.json").is_file()


def test_state_dir_outside_git_is_a_hidden_dir_in_the_tree(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    assert tree_state_dir(tmp_path) == tmp_path.resolve() / ".mps-pipeline-tree"
    assert not git_dirty(tmp_path, "f")
    commit(tmp_path, [FileEdit("f", "x", "y", "")])
    assert (tmp_path / "f").read_text() == "y"


# ---------------------------------------------------------------------------------- guards


def test_commit_writes_keeps_modes_and_returns_the_changed_edits(repo: Path) -> None:
    unchanged = FileEdit("c.txt", "common\n", "common\n", "no-op")
    written = commit(repo, [*_edits(repo), unchanged])
    assert [e.rel for e in written] == list(BEFORE)
    assert _tree(repo) == AFTER
    assert (repo / "run.sh").stat().st_mode & 0o777 == 0o755
    assert _leftovers(repo) == []


def test_concurrent_change_is_refused_before_any_write(repo: Path) -> None:
    edits = _edits(repo)
    (repo / "sub/b.txt").write_text("two, changed meanwhile\n")
    with pytest.raises(ConcurrentChangeError) as info:
        commit(repo, edits)
    message = str(info.value)
    assert message.startswith("sub/b.txt was changed by another process since it was read")
    assert "nothing was written" in message and "re-run" in message and "force" not in message
    assert (repo / "a.txt").read_text() == "one\n"
    assert _leftovers(repo) == []


def test_force_never_passes_the_concurrent_change_check(repo: Path) -> None:
    with pytest.raises(ConcurrentChangeError):
        commit(repo, [FileEdit("a.txt", "stale\n", "x\n", "")], force=True)
    assert (repo / "a.txt").read_text() == "one\n"


def test_someone_elses_uncommitted_change_is_refused_unless_forced(repo: Path) -> None:
    (repo / "sub/b.txt").write_text("two, edited by hand\n")
    edits = _edits(repo)
    with pytest.raises(DirtyFileError, match="sub/b.txt has uncommitted changes.*force=1"):
        commit(repo, edits)
    assert (repo / "a.txt").read_text() == "one\n"  # all-or-nothing
    commit(repo, edits, force=True)
    assert _tree(repo) == AFTER


def test_guard_also_refuses_a_dirty_file_of_a_later_stage_before_any_write(repo: Path) -> None:
    (repo / "c.txt").write_text("common, edited by hand\n")
    edits = _edits(repo)
    with pytest.raises(DirtyFileError, match="c.txt has uncommitted changes"):
        commit(repo, edits, guard_also=["c.txt"])
    assert _tree(repo) == BEFORE
    commit(repo, edits, guard_also=["c.txt"], force=True)
    assert _tree(repo) == AFTER


def test_the_pipelines_own_write_is_not_dirty_but_a_later_hand_edit_is(repo: Path) -> None:
    commit(repo, [FileEdit("a.txt", "one\n", "ONE\n", "up")])
    assert git_dirty(repo, "a.txt")
    assert Ownership(repo).is_own("a.txt", b"ONE\n")
    commit(repo, [FileEdit("a.txt", "ONE\n", "One\n", "again")], guard_also=["a.txt"])
    assert (repo / "a.txt").read_text() == "One\n"
    (repo / "a.txt").write_text("One, by hand\n")
    with pytest.raises(DirtyFileError):
        commit(repo, [FileEdit("a.txt", "One, by hand\n", "x\n", "")])


def test_ownership_is_per_tree_so_another_run_recognises_it(repo: Path) -> None:
    # Chain A runs in another process (its own state dir, were it the CLI); chain B here.
    proc = _python(
        """
        import sys
        from pathlib import Path
        from pipeline.edit.atomic import FileEdit
        from pipeline.edit.transaction import commit
        commit(Path(sys.argv[1]), [FileEdit("c.txt", "common\\n", "COMMON\\n", "chain A")])
        """,
        str(repo),
    )
    assert proc.returncode == 0, proc.stderr
    assert git_dirty(repo, "c.txt")
    commit(repo, _edits(repo), guard_also=["c.txt"])  # not refused: c.txt is our own
    commit(repo, [FileEdit("c.txt", "COMMON\n", "Common\n", "chain B")])
    assert (repo / "c.txt").read_text() == "Common\n"


# -------------------------------------------------------------------------- kill injection

_INJECT = """
    import os, sys
    from pathlib import Path
    import pipeline.edit.transaction as txn
    from pipeline.edit.atomic import FileEdit

    root, limit, how = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    real_step, count = txn._fs_step, 0

    def step(*args, **kwargs):
        global count
        real_step(*args, **kwargs)
        count += 1
        if count == limit:
            if how == "kill":
                os._exit(9)
            raise KeyboardInterrupt

    txn._fs_step = step
    rels = ["a.txt", "sub/b.txt", "run.sh"]
    edits = [FileEdit(r, (root / r).read_text(), (root / r).read_text().upper(), "") for r in rels]
    try:
        txn.commit(root, edits)
    except KeyboardInterrupt:
        print("interrupted", count)
        sys.exit(0)
    print("steps", count)
"""


def _inject(root: Path, limit: int, how: str) -> subprocess.CompletedProcess[str]:
    return _python(_INJECT, str(root), str(limit), how, timeout=60)


@pytest.mark.slow
def test_a_kill_after_any_filesystem_step_is_recovered_to_all_before_or_all_after(
    repo: Path, tmp_path: Path
) -> None:
    counted = _inject(repo, 0, "kill")  # limit 0: never fires, just counts the steps
    assert counted.returncode == 0, counted.stderr
    total = int(counted.stdout.split()[-1])
    # journal, 3 temps, journal, 3 renames, ownership, journal unlink
    assert total == 10
    commit_point = 1 + len(BEFORE) + 1  # the "committed" journal write
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "--", "."], check=True)
    for limit in range(1, total + 1):
        proc = _inject(repo, limit, "kill")
        assert proc.returncode == 9, (limit, proc.stderr)
        interrupted = limit < total
        assert tree_state_dir(repo).joinpath("journal.json").exists() == interrupted
        if interrupted:  # a stale temp of an earlier killed run: removed along with ours
            (repo / ".a.txt.mps-pipeline-0ld.tmp").write_text("junk")
        recovered = recover(repo)
        message = recovered.message if recovered else None
        expected = AFTER if limit >= commit_point else BEFORE
        assert _tree(repo) == expected, limit
        assert _leftovers(repo) == [], limit
        assert (repo / "run.sh").stat().st_mode & 0o777 == 0o755
        if limit < commit_point:
            assert message == "rolled back an interrupted edit (nothing had been written)"
        elif limit < total:
            assert message == (
                "rolled forward an interrupted edit of 3 files: a.txt, sub/b.txt, run.sh"
            )
        else:
            assert message is None
        if expected is AFTER:  # recovery recorded ownership: the next stage may edit on
            assert all(Ownership(repo).is_own(r, AFTER[r].encode()) for r in BEFORE)
        subprocess.run(["git", "-C", str(repo), "checkout", "-q", "--", "."], check=True)
    assert recover(repo) is None


@pytest.mark.slow
def test_an_interrupt_at_any_step_rolls_back_or_forward_in_process(repo: Path) -> None:
    for limit in range(1, 11):
        proc = _inject(repo, limit, "interrupt")
        assert proc.returncode == 0 and proc.stdout.startswith("interrupted"), proc.stderr
        # No recover(): the interrupted process itself left the tree consistent.
        assert _tree(repo) in (BEFORE, AFTER), limit
        assert _tree(repo) == (AFTER if limit >= 5 else BEFORE), limit
        assert _leftovers(repo) == [], limit
        subprocess.run(["git", "-C", str(repo), "checkout", "-q", "--", "."], check=True)


def test_a_corrupt_journal_is_reported_with_what_to_do(repo: Path) -> None:
    journal = tree_state_dir(repo) / "journal.json"
    journal.write_text('{"state": "commi')
    with pytest.raises(PipelineError, match="journal.json.*not JSON.*git status.*delete"):
        recover(repo)
    with pytest.raises(PipelineError, match="not been recovered"):
        commit(repo, _edits(repo))
    assert _tree(repo) == BEFORE


def test_a_journal_pointing_outside_the_tree_is_refused(repo: Path) -> None:
    journal = tree_state_dir(repo) / "journal.json"
    entry = {"rel": "../x", "tmp": "../.x.mps-pipeline-1.tmp", "sha256": "0" * 64}
    journal.write_text(json.dumps({"state": "committed", "files": [entry]}))
    with pytest.raises(PipelineError, match="bad file entry"):
        recover(repo)


# -------------------------------------------------------------------------------- the lock

_HOLDER = """
    import sys, time
    from pathlib import Path
    from pipeline.edit.transaction import tree_lock
    with tree_lock(Path(sys.argv[1]), wait=0):
        print("locked", flush=True)
        time.sleep(float(sys.argv[2]))
"""


def _hold(root: Path, seconds: float) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_HOLDER), str(root), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=PROJECT,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "locked\n"
    return proc


@pytest.mark.slow
def test_a_held_lock_is_reported_then_waited_for(repo: Path) -> None:
    holder = _hold(repo, 1.0)
    try:
        with pytest.raises(TreeBusyError) as info, tree_lock(repo, wait=0):
            pass
        assert str(info.value) == (
            f"another mps-pipeline run is editing this tree (pid {holder.pid}); "
            "wait for it to finish or stop it"
        )
        waits: list[int | None] = []
        start = time.monotonic()
        with tree_lock(repo, wait=5, on_wait=waits.append):
            waited = time.monotonic() - start
        assert waits == [holder.pid]
        assert 0.5 < waited < 5  # got it once the holder's ~1 s were up, not before
        assert holder.wait(timeout=30) == 0
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.slow
def test_waiting_gives_up_after_the_timeout(repo: Path) -> None:
    holder = _hold(repo, 30)
    try:
        start = time.monotonic()
        with pytest.raises(TreeBusyError, match=f"pid {holder.pid}"), tree_lock(repo, wait=0.5):
            pass
        assert 0.4 < time.monotonic() - start < 5
    finally:
        holder.kill()
        holder.wait()
    with tree_lock(repo, wait=0):  # a killed holder's lock dies with it
        pass


def test_the_lock_is_released_when_the_block_raises(repo: Path) -> None:
    with pytest.raises(RuntimeError), tree_lock(repo, wait=0):
        raise RuntimeError("boom")
    holder = _hold(repo, 0)  # another process can take it at once
    assert holder.wait(timeout=30) == 0


def test_the_lock_is_keyed_by_the_tree_not_by_the_path_to_it(repo: Path, tmp_path: Path) -> None:
    # Two runs (each with its own state dir) reaching one tree by different paths.
    alias = tmp_path / "alias"
    alias.symlink_to(repo)
    holder = _hold(alias, 30)
    try:
        with pytest.raises(TreeBusyError), tree_lock(repo, wait=0):
            pass
    finally:
        holder.kill()
        holder.wait()


def test_taking_the_lock_twice_in_one_process_is_a_clear_bug(repo: Path) -> None:
    with (
        tree_lock(repo, wait=0),
        pytest.raises(RuntimeError, match="not reentrant"),
        tree_lock(repo, wait=5),
    ):
        pass


@pytest.mark.slow
def test_a_roll_forward_never_replaces_a_change_made_after_the_run_stopped(
    repo: Path,
) -> None:
    commit_point = 1 + len(BEFORE) + 1
    total = 10
    for limit in range(commit_point, total):  # killed past the commit point, not finished
        proc = _inject(repo, limit, "kill")
        assert proc.returncode == 9, (limit, proc.stderr)
        journal = tree_state_dir(repo) / "journal.json"
        (repo / "run.sh").write_text("#!/bin/sh\necho mine\n")  # the user's change
        on_disk = _tree(repo)
        with pytest.raises(PipelineError) as info:
            recover(repo)
        message = str(info.value)
        assert message.startswith("run.sh was changed after an interrupted edit"), limit
        assert str(journal) in message and "nothing was rolled forward" in message
        assert info.value.exit_code == 2
        assert _tree(repo) == on_disk, limit  # not one file renamed
        assert journal.exists()
        # the user keeps their version as told: delete the journal and the temp file
        for path in _leftovers(repo):
            path.unlink()
        assert recover(repo) is None
        assert (repo / "run.sh").read_text() == "#!/bin/sh\necho mine\n"
        subprocess.run(["git", "-C", str(repo), "checkout", "-q", "--", "."], check=True)


def test_a_recovery_returns_the_edits_it_finished(repo: Path) -> None:
    proc = _inject(repo, 1 + len(BEFORE) + 1, "kill")
    assert proc.returncode == 9, proc.stderr
    recovered = recover(repo)
    assert recovered is not None
    assert [rel for rel, _ in recovered.rolled_forward] == list(BEFORE)
    assert _tree(repo) == AFTER


def test_a_failing_rename_is_one_line_and_a_transient_one_is_retried(repo: Path) -> None:
    import errno

    import pipeline.edit.transaction as txn

    real, calls = txn._fs_step, {"n": 0}

    def flaky(op: str, *args, **kwargs) -> None:
        if op == "replace":
            calls["n"] += 1
            if calls["n"] == 2:  # once: the roll-forward's retry goes through
                raise OSError(errno.EIO, "Input/output error", str(args[0]))
        real(op, *args, **kwargs)

    txn._fs_step = flaky
    try:
        commit(repo, _edits(repo))
    finally:
        txn._fs_step = real
    assert _tree(repo) == AFTER and _leftovers(repo) == []


def test_a_held_chain_lock_covers_its_stages_and_keeps_others_out(repo: Path) -> None:
    from pipeline.edit.transaction import hold, release_held

    assert hold(repo, wait=0) is True
    try:
        assert hold(repo, wait=0) is False  # held already: the chain's next stage
        with tree_lock(repo, wait=0):  # a stage inside the chain runs under the held lock
            pass
        other = _python(
            """
            import sys
            from pathlib import Path
            from pipeline.edit.transaction import tree_lock
            from pipeline.errors import TreeBusyError
            try:
                with tree_lock(Path(sys.argv[1]), wait=0):
                    print("got it")
            except TreeBusyError:
                print("busy")
            """,
            str(repo),
        )
        assert other.stdout.strip() == "busy", other.stderr
    finally:
        release_held()
    holder = _hold(repo, 0)  # released: another process takes it at once
    assert holder.wait(timeout=30) == 0


@pytest.mark.parametrize(
    ("journal_doc", "said"),
    [
        ({"state": "committed", "files": [{"rel": "a", "tmp": ".a.x", "sha256": 7}]},
         r"files\[0\]\.sha256 must be str, got int"),
        ({"state": "prepared", "files": [], "owner": "me"},
         r"the top level has unknown key\(s\) 'owner'"),
        ({"state": "undone"}, "no state 'prepared' or 'committed'"),
    ],
)  # fmt: skip
def test_a_journal_is_read_whole_or_refused(repo: Path, journal_doc: dict, said: str) -> None:
    (tree_state_dir(repo) / "journal.json").write_text(json.dumps(journal_doc))
    with pytest.raises(PipelineError, match=f"journal is unreadable \\({said}"):
        recover(repo)
    assert _tree(repo) == BEFORE
