"""One edit stage = one transaction on the PyTorch tree, serialized per tree.

The protocol (:func:`commit`), with a journal in :func:`tree_state_dir`:

1. check every guard (before-text, other people's uncommitted work) — nothing written yet;
2. journal ``prepared``: target, temp file and sha256 of the new content for every file;
3. write each temp file next to its target (same directory, so the rename is atomic);
4. journal ``committed`` — from here on the edit happens, whatever interrupts it;
5. rename every temp onto its target, record ownership, delete the journal.

A run killed anywhere leaves a journal that :func:`recover` resolves: ``prepared`` rolls
back (the tree was never touched), ``committed`` rolls forward (temps are complete and
fsynced). So every file of a stage is either entirely before or entirely after.

Bookkeeping is per tree, not per state dir: two runs on one tree (with different state
dirs) share the lock, the journal and the ownership record. Callers hold :func:`tree_lock`
from reading the files they plan to edit until :func:`commit` returns; the lock is not
reentrant (``flock`` locks of two descriptors conflict even within one process).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import glob
import hashlib
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from pipeline.edit.atomic import FileEdit, git_dirty
from pipeline.errors import (
    ConcurrentChangeError,
    DirtyFileError,
    DocumentError,
    PipelineError,
    TreeBusyError,
)
from pipeline.fsio import write_atomic
from pipeline.tree.text import encode_like, read_text

__all__ = [
    "Ownership",
    "Recovery",
    "commit",
    "hold",
    "recover",
    "release_held",
    "tree_lock",
    "tree_state_dir",
]

_NON_GIT_DIR = ".mps-pipeline-tree"
_LOCK = "lock"
_JOURNAL = "journal.json"
_OWNERSHIP = "ownership.json"
_TMP_MARK = ".mps-pipeline-"  # temp files: .<name>.mps-pipeline-<txid>.tmp
_POLL = 0.1  # seconds between attempts to take a busy lock


def tree_state_dir(root: Path) -> Path:
    """The directory for per-tree bookkeeping (lock, journal, ownership); created if missing.

    Inside the git dir (``<git-dir>/mps-pipeline/``) when ``root`` is a git work tree, so it
    never shows in ``git status``; else ``<root>/.mps-pipeline-tree/``.
    """
    root = Path(root).resolve()
    if root in _HELD_TREES:  # while this process holds the tree's lock, the place stays
        return _HELD_TREES[root]
    try:
        proc = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--absolute-git-dir", "--show-toplevel"],
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:  # no git installed: the tree cannot be a work tree either
        proc = None
    if proc is not None and proc.returncode == 0 and len(proc.stdout.splitlines()) == 2:
        git_dir, top = proc.stdout.splitlines()
        state = Path(git_dir) / "mps-pipeline"
        if Path(top).resolve() != root:
            # ``root`` is a sub-directory of a larger work tree: key it by its path, so that
            # journals of two roots in one repository never mix (their rel paths differ).
            rel = root.relative_to(Path(top).resolve()).as_posix()
            state = state / "subtrees" / hashlib.sha256(rel.encode()).hexdigest()[:16]
    else:
        state = root / _NON_GIT_DIR
    state.mkdir(parents=True, exist_ok=True)
    return state


# ---------------------------------------------------------------------------- the tree lock


def _read_pid(fd: int) -> int | None:
    # The holder writes its pid right after taking the lock: an empty file means we looked
    # in between, so look again briefly rather than report "pid unknown".
    for _ in range(20):
        raw = os.pread(fd, 32, 0).decode(errors="replace").strip()
        if raw.isdigit():
            return int(raw)
        time.sleep(0.01)
    return None


def _acquire(path: Path, *, wait: float, on_wait: Callable[[int | None], None] | None) -> int:
    """An open descriptor of ``path`` holding its exclusive ``flock`` (pid written in it)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + max(wait, 0.0)
        waited = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
            if not waited:
                waited = True
                holder = _read_pid(fd)
                if holder == os.getpid():  # would wait for ourselves until the timeout
                    raise RuntimeError("tree_lock is not reentrant: this process holds it")
                if on_wait is not None and wait > 0:
                    on_wait(holder)
            if time.monotonic() >= deadline:
                raise TreeBusyError(_read_pid(fd))
            time.sleep(min(_POLL, max(deadline - time.monotonic(), 0.0)))
        # The pid is only a hint for the message of whoever waits; the flock is the lock.
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _release(fd: int) -> None:
    try:
        os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


# Locks this process holds for a whole chain (:func:`hold`), by lock file.
_HELD: dict[Path, int] = {}
# ... and the bookkeeping folder of each tree held, by its resolved root
_HELD_TREES: dict[Path, Path] = {}


@contextlib.contextmanager
def tree_lock(
    root: Path, *, wait: float, on_wait: Callable[[int | None], None] | None = None
) -> Iterator[None]:
    """Hold the tree's exclusive edit lock (``flock``) for the block; released on any exit.

    When another process holds it, ``on_wait(pid)`` is called once (not when ``wait`` is 0:
    there is no waiting to announce), then the lock is retried for up to ``wait`` seconds
    before :class:`TreeBusyError` is raised. Inside :func:`hold` of the same tree the block
    runs under the held lock.
    """
    path = tree_state_dir(root) / _LOCK
    if path in _HELD:
        yield
        return
    fd = _acquire(path, wait=wait, on_wait=on_wait)
    try:
        yield
    finally:
        _release(fd)


def hold(root: Path, *, wait: float, on_wait: Callable[[int | None], None] | None = None) -> bool:
    """Take the tree's lock until :func:`release_held` (or the process ends), so a chain of
    stages runs as one: no other run edits or tests the tree between two of its stages.
    False when this process holds it already."""
    state = tree_state_dir(root)
    path = state / _LOCK
    if path in _HELD:
        return False
    _HELD[path] = _acquire(path, wait=wait, on_wait=on_wait)
    # the recovery after the hold looks the place up again: one `git rev-parse` is enough
    _HELD_TREES[Path(root).resolve()] = state
    return True


def release_held() -> None:
    """Release every lock :func:`hold` took."""
    _HELD_TREES.clear()
    while _HELD:
        _release(_HELD.popitem()[1])


# ------------------------------------------------------------- filesystem steps (patchable)


def _fs_step(
    op: str, path: Path, data: bytes = b"", *, dest: Path | None = None, mode: int = 0o644
) -> None:
    """Perform one filesystem mutation of a commit or recovery; every one goes through here.

    ``op`` is ``"write_temp"`` (create ``path`` exclusively, write ``data``, fsync, chmod
    ``mode``), ``"write_atomic"`` (replace ``path`` by ``data`` via :func:`write_atomic`),
    ``"replace"`` (``os.replace(path, dest)``) or ``"unlink"``. Kept as one module-level
    function so a test can wrap it in a subprocess and kill the process after any step.
    """
    if op == "write_temp":
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
    elif op == "write_atomic":
        write_atomic(path, data)
    elif op == "replace":
        assert dest is not None
        os.replace(path, dest)
    elif op == "unlink":
        path.unlink(missing_ok=True)
    else:
        raise ValueError(f"unknown filesystem step {op!r}")


def _fsync_dir(path: Path) -> None:
    # Renames and creations are durable only once their directory is synced (power loss).
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError:  # some filesystems refuse fsync on a directory: best effort
        pass
    finally:
        os.close(fd)


def _sha_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _sha_file(path: Path) -> str | None:
    try:
        return _sha_bytes(path.read_bytes())
    except FileNotFoundError:
        return None


# -------------------------------------------------------------------------------- ownership


class Ownership:
    """sha256 of what the pipeline itself last wrote, per file of one tree.

    So the pipeline's own uncommitted edits are not taken for someone else's work. Stored in
    :func:`tree_state_dir`, so every run on the tree (whatever its state dir) shares it.
    """

    def __init__(self, root: Path) -> None:
        self.path = tree_state_dir(root) / _OWNERSHIP
        try:
            loaded = json.loads(self.path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            # Missing or unreadable: own nothing. The safe side: a dirty file is then refused
            # (and --force still edits it) rather than silently overwritten.
            loaded = {}
        self._sha: dict[str, str] = loaded if isinstance(loaded, dict) else {}

    def is_own(self, rel: str, content: bytes) -> bool:
        """True when ``content`` is exactly what the pipeline last wrote to ``rel``."""
        return self._sha.get(rel) == _sha_bytes(content)

    def record(self, written: Mapping[str, str]) -> None:
        """Remember ``{rel: sha256 of the content written}`` (one atomic write)."""
        self._sha.update(written)
        data = json.dumps(self._sha, indent=1, sort_keys=True).encode()
        _fs_step("write_atomic", self.path, data)


# ---------------------------------------------------------------------------------- journal


@dataclass(frozen=True)
class _Entry:
    rel: str  # target, relative to the root
    tmp: str  # temp file, relative to the root, in the target's directory
    sha256: str  # of the new content
    # of the content the edit was computed from (None: the file did not exist): a roll
    # forward replaces only exactly that, never a change made after the run stopped
    before: str | None = None
    summary: str = ""  # what the edit does, for the recovering run's record


@dataclass(frozen=True)
class Recovery:
    """What :func:`recover` did: its one-line message and, rolled forward, the edits."""

    message: str
    rolled_forward: tuple[tuple[str, str], ...] = ()  # (rel, summary) of each file written


@dataclass(frozen=True)
class _Journal:
    """``journal.json``: an edit's state (prepared, committed) and its files; the format,
    the transaction and the process that wrote it are for readers."""

    version: int | None = None
    state: str | None = None
    txid: str | None = None
    pid: int | None = None
    # not "| None": fields.read names an item's error only at "files" under a union
    files: tuple[_Entry, ...] = ()


def _journal_bytes(state: str, txid: str, entries: Sequence[_Entry]) -> bytes:
    from pipeline.fields import dump  # as _load_journal's import

    journal = _Journal(1, state, txid, os.getpid(), tuple(entries))
    return json.dumps(dump(journal), indent=1).encode()


def _safe_rel(rel: object) -> bool:
    # A journal names files to rename and delete: never let one point outside the tree.
    if not isinstance(rel, str) or not rel:
        return False
    p = PurePosixPath(rel)
    return not p.is_absolute() and ".." not in p.parts


def _load_journal(path: Path) -> tuple[str, list[_Entry]]:
    def corrupt(why: str) -> PipelineError:
        return PipelineError(
            f"{path}: the edit journal is unreadable ({why}). An interrupted edit may be "
            "half-applied: inspect the tree with `git status` / `git diff`, restore or keep "
            "the files by hand, then delete the journal and re-run"
        )

    # here, not at the top: a journal is read only after an interrupted edit, and the warm
    # audit's doit run imports this module (pipeline.flows.hold)
    from pipeline.fields import read

    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise corrupt(f"not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise corrupt("no state 'prepared' or 'committed'")
    try:
        journal = read(_Journal, doc, path.name)
    except DocumentError as exc:
        raise corrupt(f"{exc.where} {exc.problem}") from None
    if journal.state not in ("prepared", "committed"):
        raise corrupt("no state 'prepared' or 'committed'")
    entries = journal.files
    for i, entry in enumerate(entries):
        _check_entry(entry, f"files[{i}]", corrupt)
    return journal.state, list(entries)


def _check_entry(entry: _Entry, where: str, corrupt: Callable[[str], PipelineError]) -> None:
    """Refuse an entry that points outside the tree or at a temp file not its own."""
    if not (_safe_rel(entry.rel) and _safe_rel(entry.tmp) and len(entry.sha256) == 64):
        raise corrupt(f"bad file entry {where}: {entry.rel!r}, {entry.tmp!r}")
    rel, tmp = PurePosixPath(entry.rel), PurePosixPath(entry.tmp)
    if tmp.parent != rel.parent or not tmp.name.startswith(f".{rel.name}{_TMP_MARK}"):
        raise corrupt(f"temp file {entry.tmp!r} is not next to {entry.rel!r}")


def _roll_back(root: Path, journal: Path, entries: Sequence[_Entry]) -> None:
    # Temps first, journal last: if this is interrupted the journal still lists what is left.
    for e in entries:
        _fs_step("unlink", root / e.tmp)
    _fs_step("unlink", journal)


def _roll_forward(root: Path, journal: Path, entries: Sequence[_Entry]) -> None:
    # Idempotent, so an interrupted roll-forward is finished by running it again. Every
    # file is checked before the first rename: a target is replaced only while it holds
    # exactly the content the edit was computed from (someone may have changed it since the
    # run stopped), and then the whole roll-forward is refused rather than half done.
    pending: list[_Entry] = []
    for e in entries:
        tmp, target = root / e.tmp, root / e.rel
        current = _sha_file(target)
        if current == e.sha256:
            continue  # renamed before the interruption
        if current != e.before and (tmp.exists() or current is not None):
            take = f"; to take the edit, move {tmp} over {e.rel}" if tmp.exists() else ""
            raise PipelineError(
                f"{e.rel} was changed after an interrupted edit of it was committed "
                f"(journal {journal}); nothing was rolled forward. To keep your version, "
                f"delete the journal and any .{target.name}{_TMP_MARK}*.tmp beside it{take}"
            )
        if not tmp.exists():
            raise PipelineError(
                f"{e.rel}: neither the committed new content nor its temp file is there "
                f"(journal {journal}); inspect it with `git diff`, then delete the journal "
                "and re-run"
            )
        if _sha_file(tmp) != e.sha256:
            raise PipelineError(
                f"{tmp}: the temp file of a committed edit does not match the journal "
                f"{journal}; inspect {e.rel} with `git diff`, then delete the journal and "
                "the temp file and re-run"
            )
        pending.append(e)
    for e in pending:
        _fs_step("replace", root / e.tmp, dest=root / e.rel)
    for parent in {(root / e.rel).parent for e in entries}:
        _fsync_dir(parent)
    Ownership(root).record({e.rel: e.sha256 for e in entries})
    _fs_step("unlink", journal)


def _remove_strays(root: Path, state_dir: Path, entries: Sequence[_Entry]) -> None:
    # Leftovers of a kill inside a single write: our temps next to the targets (other
    # txids) and write_atomic's temps of the journal/ownership files in the state dir.
    for rel in {PurePosixPath(e.rel) for e in entries}:
        parent = root / rel.parent
        for stray in parent.glob(f".{glob.escape(rel.name)}{_TMP_MARK}*.tmp"):
            _fs_step("unlink", stray)
    for stray in state_dir.glob(".*.tmp"):
        _fs_step("unlink", stray)


# ----------------------------------------------------------------------------- the two verbs


def commit(
    root: Path,
    edits: Sequence[FileEdit],
    *,
    force: bool = False,
    guard_also: Sequence[str] = (),
) -> list[FileEdit]:
    """Write every changed edit as one all-or-nothing transaction; return the edits written.

    All guards are checked before the first write: each file must still hold ``edit.before``
    (else :class:`ConcurrentChangeError`), and unless ``force`` no file — edited or named in
    ``guard_also`` (files a later stage of the same chain will write) — may carry uncommitted
    changes that are not the pipeline's own last write (else :class:`DirtyFileError`).
    Call it under :func:`tree_lock`, after :func:`recover`.
    """
    root = Path(root)
    todo = [e for e in edits if e.changed]
    rels = [e.rel for e in todo]
    if len(set(rels)) != len(rels):
        raise ValueError(f"two edits of one file in a single commit: {sorted(rels)}")
    for edit in todo:
        path = root / edit.rel
        # Text comparison, as the editors read their input with read_text().
        current = read_text(path, edit.rel) if path.exists() else ""
        if current != edit.before:
            raise ConcurrentChangeError(edit.rel)
    if not force:
        ownership = Ownership(root)
        for rel in dict.fromkeys([*rels, *guard_also]):
            path = root / rel
            content = path.read_bytes() if path.exists() else b""
            if git_dirty(root, rel) and not ownership.is_own(rel, content):
                raise DirtyFileError(rel)
    if not todo:
        return []
    for edit in todo:
        _check_writable(root, edit.rel)
    _transact(root, todo)
    return todo


def _check_writable(root: Path, rel: str) -> None:
    """Refuse, before anything is written, a target the user made read-only or immutable: a
    rename over it would succeed (only its folder's permission counts) and ignore that."""
    target = root / rel
    if not target.exists():
        return
    mode = target.stat().st_mode
    try:  # opening for writing changes nothing, and fails on an immutable file
        os.close(os.open(target, os.O_WRONLY | os.O_NONBLOCK))  # a FIFO: ENXIO, no wait
    except PermissionError as exc:
        if exc.errno == errno.EPERM:
            raise PipelineError(
                f"{rel} cannot be written: {exc.strerror} (immutable? `lsattr` shows it); "
                "nothing was written"
            ) from None
    except OSError as exc:
        message = f"{rel} cannot be written: {exc.strerror}; nothing was written"
        raise PipelineError(message) from None
    if not mode & 0o222 or not os.access(target, os.W_OK):  # root may write anything
        raise PipelineError(
            f"{rel} is read-only (mode {mode & 0o777:04o}); nothing was written: make it "
            f"writable (chmod u+w {rel}) to let the pipeline edit it"
        )


def _transact(root: Path, todo: Sequence[FileEdit]) -> None:
    state_dir = tree_state_dir(root)
    journal = state_dir / _JOURNAL
    if journal.exists():  # a caller skipped recover(): never stack a second transaction
        raise PipelineError(
            f"{journal}: an interrupted edit has not been recovered; run recover() first"
        )
    import secrets  # only an edit needs an id (the warm audit's hold imports this module)

    txid = secrets.token_hex(6)
    entries: list[_Entry] = []
    payload: list[tuple[bytes, int]] = []
    for edit in todo:
        rel = PurePosixPath(edit.rel)
        tmp = (rel.parent / f".{rel.name}{_TMP_MARK}{txid}.tmp").as_posix()
        target = root / edit.rel
        try:
            original: bytes | None = target.read_bytes()
        except FileNotFoundError:
            original = None
        # the file's own line ends and byte-order mark, not the editors' "\n" text
        data = encode_like(original, edit.before, edit.after)
        mode = target.stat().st_mode & 0o777 if target.exists() else 0o644
        entries.append(_Entry(edit.rel, tmp, _sha_bytes(data), _sha_file(target), edit.summary))
        payload.append((data, mode))

    committed = False
    try:
        _fs_step("write_atomic", journal, _journal_bytes("prepared", txid, entries))
        for e, (data, mode) in zip(entries, payload, strict=True):
            _fs_step("write_temp", root / e.tmp, data, mode=mode)
        for parent in {(root / e.tmp).parent for e in entries}:
            _fsync_dir(parent)
        _fs_step("write_atomic", journal, _journal_bytes("committed", txid, entries))
        committed = True
        _roll_forward(root, journal, entries)
    except BaseException as exc:
        # Before the commit point nothing is visible yet: undo. After it: finish, so a
        # Ctrl-C mid-rename never leaves half the files new. Either way re-raise. If the
        # clean-up itself fails, the journal stays and the next run's recover() resolves it.
        finished = False
        with contextlib.suppress(BaseException):
            # Decide as recover() would: by the journal on disk (the interrupt may have come
            # right after the "committed" write returned, before ``committed`` was set).
            if committed or _load_journal(journal)[0] == "committed":
                _roll_forward(root, journal, entries)
                finished = True
            else:
                _roll_back(root, journal, entries)
        if isinstance(exc, OSError):  # a disk, permission or I/O error
            if finished:  # a retry of the failed step went through: the edit is whole
                return
            raise _os_error(exc, journal) from None
        raise


def _os_error(exc: OSError, journal: Path) -> PipelineError:
    where = exc.filename or journal
    if journal.exists():
        return PipelineError(
            f"{where}: {exc.strerror or exc} while committing an edit; the edit is kept in "
            f"{journal}: fix the cause and re-run to finish it"
        )
    return PipelineError(f"{where}: {exc.strerror or exc}; nothing was written")


def recover(root: Path) -> Recovery | None:
    """Resolve an edit interrupted by a kill; return what was done, None if nothing was.

    A ``prepared`` journal is rolled back (temps deleted; the tree never changed), a
    ``committed`` one rolled forward (remaining renames done, ownership recorded) when every
    file still holds what the edit was computed from or its new content; else
    :class:`PipelineError` naming the file and the journal, and nothing is renamed. Stray
    temp files are removed. Call it under :func:`tree_lock`, before planning any edit.
    """
    root = Path(root)
    state_dir = tree_state_dir(root)
    journal = state_dir / _JOURNAL
    if not journal.exists():
        _remove_strays(root, state_dir, [])
        return None
    state, entries = _load_journal(journal)
    names = ", ".join(e.rel for e in entries)
    if state == "prepared":
        _roll_back(root, journal, entries)
        result = Recovery("rolled back an interrupted edit (nothing had been written)")
    else:
        try:
            _roll_forward(root, journal, entries)
        except OSError as exc:
            raise _os_error(exc, journal) from None
        files = "file" if len(entries) == 1 else "files"
        result = Recovery(
            f"rolled forward an interrupted edit of {len(entries)} {files}: {names}",
            tuple((e.rel, e.summary) for e in entries),
        )
    _remove_strays(root, state_dir, entries)
    return result
