"""The state directory's layout: where each stage keeps what it wrote, and the digests that
decide whether a stage is up to date.

doit loads this on every run, so it imports nothing heavy at module level. Every file here is
written atomically (:func:`pipeline.fsio.write_atomic`): a killed run never leaves half of one.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pipeline.config import Settings
from pipeline.errors import DocumentError, PipelineError
from pipeline.fields import dump, read
from pipeline.fsio import write_atomic
from pipeline.tree import files, paths

# ninja appends one line per command it ran to this file in the build directory.
NINJA_LOG = ".ninja_log"
# the nightly's files, relative to the state directory (help texts quote them)
HISTORY = "history/nightly.sqlite"
DASHBOARD = "dashboard"
SHARD_PLAN = "shards.json"
D = TypeVar("D")


@dataclass(frozen=True)
class OpFiles:
    """What the stages of one operator write, under ``<state_dir>/ops/<op>/``."""

    dir: Path

    @property
    def audit(self) -> Path:
        return self.dir / "audit.json"

    @property
    def audit_digest(self) -> Path:
        return self.dir / "audit.digest"

    @property
    def edit(self) -> Path:
        return self.dir / "edit.json"

    @property
    def junit(self) -> Path:
        return self.dir / "junit.xml"

    @property
    def expectations(self) -> Path:
        return self.dir / "expectations.json"

    @property
    def table_json(self) -> Path:
        return self.dir / "table.json"

    @property
    def table_md(self) -> Path:
        return self.dir / "table.md"

    @property
    def table_before_drops_md(self) -> Path:
        """table.md as the table stage wrote it, kept when drop_xfails re-tests."""
        return self.dir / "table.before-drops.md"

    @property
    def xfails(self) -> Path:
        return self.dir / "xfails.json"

    @property
    def summary(self) -> Path:
        return self.dir / "summary.md"

    @property
    def math_json(self) -> Path:
        """check-math's report (its --json document)."""
        return self.dir / "math.json"

    @property
    def math_md(self) -> Path:
        """check-math's table, as the summary and the PR comment show it."""
        return self.dir / "math.md"


_OP_NAME_MAX = 200
_OP_NAME = re.compile(rf"[A-Za-z_][A-Za-z0-9_.]{{0,{_OP_NAME_MAX - 1}}}")


def op_files(settings: Settings, op: str) -> OpFiles:
    """Where the stages of one operator keep their outputs."""
    if not _OP_NAME.fullmatch(op):  # a folder is made of it: no "/", no 10,000 characters
        shown = op if len(op) <= 60 else f"{op[:60]}… ({len(op)} characters)"
        raise PipelineError(
            f"{shown!r} is not an operator name (letters, digits, '_' and '.', at most "
            f"{_OP_NAME_MAX} characters)"
        )
    return OpFiles(settings.state_dir / "ops" / op)


def build_stamp(settings: Settings) -> Path:
    """The identity of the last build; what the test stage depends on."""
    return settings.state_dir / "build.json"


def build_check(settings: Settings) -> Path:
    """What the last build's shader check found, and the toolchain it saw (not a stage
    input: its timing changes every run)."""
    return settings.state_dir / "build-check.json"


def history_path(state_dir: Path) -> Path:
    """The nightly history database of a state directory."""
    return state_dir / HISTORY


def dashboard_dir(state_dir: Path) -> Path:
    """Where the nightly publishes its dashboard (and the merged JUnit reports)."""
    return state_dir / DASHBOARD


def shard_plan(state_dir: Path) -> Path:
    """Where ``shards`` writes its plan."""
    return state_dir / SHARD_PLAN


def build_log(settings: Settings) -> Path:
    """The whole output of the last build."""
    return settings.state_dir / "logs" / "build.log"


def write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, data)


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text)


def write_json(path: Path, data: object) -> None:
    write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def _sha(path: Path) -> str:
    if not path.is_file():
        return ""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:  # unreadable: the stage that reads it says so, in one line
        return "unreadable"


def file_sha(path: Path) -> str:
    """sha256 of ``path``'s bytes ("" when it is missing)."""
    return _sha(path)


def build_identity(settings: Settings, *, did_work: bool) -> str:
    """What was built: a digest of ninja's log (it grows exactly when ninja runs a command,
    also for a build run by hand), else a counter bumped whenever the build did work."""
    log = settings.build_dir / NINJA_LOG
    if log.is_file():
        return "ninja:" + _sha(log)
    previous = _stamped(build_stamp(settings))
    if not previous.startswith("count:"):
        return "count:1"
    count = int(previous.removeprefix("count:"))
    return f"count:{count + 1}" if did_work else previous


def write_build_stamp(settings: Settings, *, did_work: bool) -> None:
    """Rewrite the stamp only when the identity changed, so an idle build changes nothing."""
    identity = build_identity(settings, did_work=did_work)
    stamp = build_stamp(settings)
    if _stamped(stamp) != identity:
        write_json(stamp, dump(_BuildStamp(identity)))


def _stamped(stamp: Path) -> str:
    """The build identity ``stamp`` holds ("" when there is none)."""
    if not stamp.is_file():
        return ""
    return _read(_BuildStamp, stamp).build


@dataclass(frozen=True)
class _BuildStamp:
    """The build stamp: the identity of the build the tests last ran against."""

    build: str


def _read(kind: type[D], path: Path) -> D:
    """The ``kind`` the JSON file ``path`` (one this tool wrote) holds."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise DocumentError(str(path), "the file", f"is not JSON ({exc})") from None
    return read(kind, data, str(path))


def build_inputs(settings: Settings) -> list[Path]:
    """The build inputs the pipeline knows of: a change to anything else never starts ninja."""
    return files(settings.root, paths.BUILD_PATTERNS)


def opinfo_inputs(settings: Settings) -> list[Path]:
    """The static OpInfo table, when the settings name one that exists; else nothing."""
    table = settings.opinfo_table
    return [table] if table is not None and table.is_file() else []


def edit_inputs(settings: Settings) -> list[Path]:
    """The files the audit and edit stages read: the build inputs and the OpInfo table."""
    return build_inputs(settings) + opinfo_inputs(settings)


def _digest(paths_: list[Path], extra: str = "") -> str:
    h = hashlib.sha256(extra.encode())
    for path in paths_:
        h.update(f"{path}\0{_sha(path)}\n".encode())
    return h.hexdigest()


def inputs_digest(settings: Settings) -> str:
    """Content digest of what the audit reads (the edit inputs, common_mps.py and the files
    holding MPS xfails outside it): when it matches the recorded one, the recorded audit
    holds."""
    decorated = files(settings.root, paths.DECORATION_PATTERNS)
    return _digest([*edit_inputs(settings), settings.root / paths.COMMON_MPS, *decorated])


def inputs_looked_at(settings: Settings) -> list[Path]:
    """What :func:`inputs_digest` rests on, as paths to watch: the files it hashes, the
    folders whose listing decides which files those are, and the OpInfo table even when it
    is missing (it counts once it exists)."""
    root = settings.root
    folders = [root / pattern.rpartition("/")[0] for pattern in paths.BUILD_PATTERNS]
    table = [settings.opinfo_table] if settings.opinfo_table is not None else []
    decorated = files(root, paths.DECORATION_PATTERNS)
    return [*edit_inputs(settings), root / paths.COMMON_MPS, *decorated, *folders, *table]


def audit_current(settings: Settings, op: str, digest: str | None = None) -> bool:
    """True when the operator's recorded audit was made from the tree exactly as it is
    (``digest``: its :func:`inputs_digest`, when the caller has it)."""
    path = op_files(settings, op).audit_digest
    if not path.is_file():
        return False
    return path.read_text() == (inputs_digest(settings) if digest is None else digest)


def edit_digest(settings: Settings, body: str | None, host_body: str | None = None) -> str:
    """What an edit plan is a function of: the files it edits or reads, ``body=`` and
    ``host_body=``.

    common_mps.py is left out: the plan only notes that a later stage may write it, and
    dropping xfails must not make the edit stage run again.
    """
    return _digest(edit_inputs(settings), f"{body or ''}\0{host_body or ''}\0")


def xfail_digest(settings: Settings, op: str) -> str:
    """Digest of the operator's xfail/skip entries: what decides its expected outcomes."""
    from pipeline.tree.index import load_index  # the slow path only

    record = load_index(settings.tree).record(op, find_references=False)
    text = json.dumps([(e.list, e.function, e.key, e.dtypes) for e in record.xfails])
    return hashlib.sha256(text.encode()).hexdigest()


def record_expectations(settings: Settings, op: str) -> None:
    """Note which expectations the operator's last test results were produced under."""
    expectations = _Expectations(_sha(settings.root / paths.COMMON_MPS), xfail_digest(settings, op))
    write_json(op_files(settings, op).expectations, dump(expectations))


@dataclass(frozen=True)
class _Expectations:
    """What an operator's last test results were run under: common_mps.py's digest, and
    its own xfail entries' (:func:`xfail_digest`)."""

    common_mps: str
    entries: str


def expectations_current(settings: Settings, op: str) -> bool:
    """True when the operator's xfail entries are what its last results were run under.

    Tracked by the operator's own entries, not the file's hash, so dropping another
    operator's xfails does not re-run these tests; the file hash is only the fast path.
    """
    path = op_files(settings, op).expectations
    if not path.is_file():
        return False
    recorded = _read(_Expectations, path)
    if recorded.common_mps == _sha(settings.root / paths.COMMON_MPS):
        return True
    return recorded.entries == xfail_digest(settings, op)


def interpreter_identity(python: str) -> str:
    """Which interpreter ``python`` is: its directory (a venv's bin/) and the binary it is.

    ``.venv/bin/python`` and ``.venv/bin/python3`` are one interpreter; two venvs of one
    base Python are not (their site-packages differ).
    """
    path = shutil.which(python) or python
    return f"{Path(path).absolute().parent}|{os.path.realpath(path)}"


def test_settings(settings: Settings) -> dict[str, object]:
    """The settings that change which tests run or how: inputs of every test stage."""
    return {
        "kinds": list(settings.test_kinds),
        "pytest_args": list(settings.pytest_args),
        "file": settings.test_file,
        "python": interpreter_identity(settings.python),
    }


def tracker_cache(settings: Settings) -> Path:
    """The tracker's ETags and each open PR's words, kept between runs (a CI cache)."""
    return settings.state_dir / "tracker" / "github-cache.json"
