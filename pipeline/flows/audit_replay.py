"""A warm audit prints what the last one printed, without loading the index or rich.

The checklist is a function of the files :func:`pipeline.state.inputs_digest` hashes (the
contract the audit stage's up-to-date rule already rests on), of the code that judges and
renders it, and of the terminal it is drawn for. Each audit that renders saves what it
wrote, with those three keys, beside the operator's other outputs; the next one whose keys
all match writes the saved text again and imports none of the readers, the checklist or
rich (on this project's machine that was most of a warm ``doit audit``: 2.5-3x doit's own
start). Anything else (a file changed, another terminal width, a new mps-pipeline) renders
afresh and saves again.

The CLI goes one step further (:func:`cli_saved`): before its settings are even resolved
(no yaml, no argparse, no config module), it looks for a saved output whose *witness*
holds: the same command line, directory, environment, interpreter and mps-pipeline code,
the same terminal, and the same status (inode, size, mtime, ctime) of every path the
settings' resolution looked at (``Settings.looked_at``: config files, the folders searched
for a checkout) and of every path the inputs' digest rests on
(:func:`pipeline.state.inputs_looked_at`: the files it hashes, the folders listing them).
Any change to one of those paths changes its status, so the full path runs. A path whose
status changed just before it was looked at could change again unseen (a file system's
clock is coarse: :func:`pipeline.fsio.racy`), so no witness is saved while one has: the
digest replay above still serves those runs, and saves the witness once the tree is still.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time

from pipeline import fsio

TYPE_CHECKING = False  # typing's own costs the CLI's replay 3 ms (mypy reads it alike)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, Final, TypeVar

    from pipeline.config import Settings

    M = TypeVar("M", bound="_Model")

SCREEN = "audit.{kind}.screen.json"  # in the operator's state folder, one per kind of audit
# what rich reads to decide colors and width, besides whether the stream is a terminal
_TERMINAL_ENV = (
    "TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE",
    "COLUMNS", "LINES", "JUPYTER_COLUMNS", "JUPYTER_LINES",
)  # fmt: skip
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the code the printed checklist comes from: the readers, the judging, the rendering (and
# the chain's audit, which labels its count as the tree before the edits)
_CODE = (
    "tree/*.py", "guide/checklist.py", "guide/workflow.py", "report/guide.py", "dtypes.py",
    "flows/audit.py",
)  # fmt: skip
# the CLI's global options that take a value: only to find the saved output (the command
# line is compared whole, so one missing here only means no replay)
_VALUE_FLAGS = ("--root", "--python", "--state-dir", "--build-dir", "--opinfo-table", "--config")


def _file_name(name: str, also: str = "_.-") -> bool:
    """``name`` is ASCII letters, digits and ``also`` (no "/": a file name). Not a regular
    expression: compiling one costs the CLI's replay a millisecond."""
    return bool(name) and name.isascii() and all(c.isalnum() or c in also for c in name)


def _op_name(name: str) -> bool:
    """``name`` is an operator name as :func:`pipeline.state.op_files` accepts it."""
    return 0 < len(name) <= 200 and (name[0].isalpha() or name[0] == "_") and _file_name(name, "_.")


class _Damaged(Exception):
    """A saved output that does not read back (another version's, or cut short): as none."""


class _Inline:
    """A model whose keys sit in its owner's object, not under a key of their own."""

    __slots__ = ("model",)

    def __init__(self, model: type[_Model]) -> None:
        self.model = model


class _Model:
    """:func:`pipeline.fields.read`'s way with a JSON object (the model's fields are its
    keys, each checked for its kind, nothing left over) without its imports (dataclasses,
    typing, the typed errors), which the CLI's replay does without. A model's ``__slots__``
    name its keys and ``_KINDS`` says, slot by slot, what each holds: a type, a model (an
    object of its own), an :class:`_Inline` model, or ``(kind, None)``: absent or null, read
    as None and None written as no key."""

    __slots__: tuple[str, ...] = ()
    _KINDS: tuple[object, ...]

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.to_json() == other.to_json()

    def to_json(self) -> dict[str, object]:
        found: dict[str, object] = {}
        for name, kind in zip(self.__slots__, self._KINDS, strict=True):
            value = getattr(self, name)
            if isinstance(kind, _Inline):
                found.update(value.to_json())
            elif isinstance(value, _Model):
                found[name] = value.to_json()
            elif value is not None:
                found[name] = value
        return found

    @classmethod
    def from_json(cls: type[M], data: object) -> M:
        """The model the JSON object ``data`` holds; :class:`_Damaged` when it does not."""
        if not isinstance(data, dict):
            raise _Damaged
        left = dict(data)
        found = cls._take(left)
        if left:
            raise _Damaged
        return found

    @classmethod
    def _take(cls: type[M], left: dict[str, object]) -> M:
        values = [
            kind.model._take(left)
            if isinstance(kind, _Inline)
            else _value(left.pop(name, None), kind)
            for name, kind in zip(cls.__slots__, cls._KINDS, strict=True)
        ]
        make: Any = cls  # each model's own __init__ takes its slots in order
        return make(*values)


def _value(value: object, kind: object) -> object:
    if isinstance(kind, tuple):  # (kind, None)
        return None if value is None else _value(value, kind[0])
    if isinstance(kind, type) and issubclass(kind, _Model):
        return kind.from_json(value)
    # bool is an int to isinstance, never to a reader of a document
    if (
        not isinstance(kind, type)
        or not isinstance(value, kind)
        or (isinstance(value, bool) and kind is not bool)
    ):
        raise _Damaged
    return value


# The models below are slotted classes with Final attributes, not frozen dataclasses:
# dataclasses imports inspect and typing, several milliseconds of the CLI's replay.


class Keys(_Model):
    """What a saved output must have been made with to be written again (:func:`keys`)."""

    __slots__ = ("kind", "inputs", "code", "terminal")
    _KINDS = (str, str, str, list)
    kind: Final[str]  # cli or doit: which audit saved it
    inputs: Final[str]  # pipeline.state.inputs_digest
    code: Final[str]  # the status of the code that judges and renders (_CODE)
    terminal: Final[list[object]]  # the terminal it was drawn for (_terminal_key)

    def __init__(self, kind: str, inputs: str, code: str, terminal: list[object]) -> None:
        self.kind, self.inputs, self.code, self.terminal = kind, inputs, code, terminal


class Process(_Model):
    """The CLI witness's part that is no file: what the command was and where it ran."""

    __slots__ = ("argv", "cwd", "env", "python", "terminal")
    _KINDS = (list, str, list, list, list)
    argv: Final[list[str]]
    cwd: Final[str]
    env: Final[list[list[str]]]  # the settings' variables and the homes (_environment)
    python: Final[list[str]]  # the interpreter and its version
    terminal: Final[list[object]]

    def __init__(
        self, argv: list[str], cwd: str, env: list[list[str]], python: list[str],
        terminal: list[object],
    ) -> None:  # fmt: skip
        self.argv, self.cwd, self.env, self.python = argv, cwd, env, python
        self.terminal = terminal


class Witness(_Model):
    """What a CLI audit's output rests on beyond its inputs' digest (:func:`witness`): the
    process (its keys beside the others), the state folder, what it said before the audit,
    and ``[path, status]`` lists (read back as JSON, checked by :func:`pipeline.fsio.holds`)."""

    __slots__ = ("process", "state_dir", "announced", "files", "kinds", "resolved")
    _KINDS = (_Inline(Process), str, str, list, list, list)
    process: Final[Process]
    state_dir: Final[str]
    announced: Final[str]  # what the CLI said on stderr before the audit
    files: Final[list[object]]  # [path, fsio.status(path)] of every path looked at
    kinds: Final[list[object]]  # [path, fsio.kind(path)]
    resolved: Final[list[object]]  # [path, os.path.realpath(path)]

    def __init__(
        self, process: Process, state_dir: str, announced: str, files: list[object],
        kinds: list[object], resolved: list[object],
    ) -> None:  # fmt: skip
        self.process, self.state_dir, self.announced = process, state_dir, announced
        self.files, self.kinds, self.resolved = files, kinds, resolved

    def holds(self) -> bool:
        """Whether every path looked at is as it was."""
        return (
            fsio.holds(self.files, fsio.status)
            and fsio.holds(self.kinds, fsio.kind)
            and fsio.holds(self.resolved, os.path.realpath)
        )


class Screen(_Model):
    """One audit's saved output (``audit.<kind>.screen.json``): the keys it was made with,
    what it wrote, whether every item passed, and (a CLI audit's) its witness."""

    __slots__ = ("keys", "stdout", "stderr", "ok", "witness")
    _KINDS = (Keys, str, str, bool, (Witness, None))
    keys: Final[Keys]
    stdout: Final[str]
    stderr: Final[str]
    ok: Final[bool]
    witness: Final[Witness | None]

    def __init__(
        self, keys: Keys, stdout: str, stderr: str, ok: bool, witness: Witness | None
    ) -> None:
        self.keys, self.stdout, self.stderr, self.ok = keys, stdout, stderr, ok
        self.witness = witness

    @staticmethod
    def read(text: str) -> Screen | None:
        """The saved output in ``text``, or None when it does not read back."""
        try:
            return Screen.from_json(json.loads(text))
        except (ValueError, _Damaged):
            return None


def _code_key() -> str:
    import hashlib
    from pathlib import Path

    h = hashlib.sha256()
    for pattern in _CODE:
        for path in sorted(Path(_PACKAGE).glob(pattern)):
            st = path.stat()
            h.update(f"{path.name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _terminal_key() -> list[object]:
    out = sys.stdout  # doit's own writer, in a doit action
    tty = bool(getattr(out, "isatty", lambda: False)())
    size = None
    if tty:
        import shutil  # only for a terminal: off one, the size is not asked for

        size = list(shutil.get_terminal_size())
    env = [os.environ.get(k) for k in _TERMINAL_ENV]
    return [type(out).__name__, tty, size, getattr(out, "encoding", None), env]


def _path(settings: Settings, op: str, kind: str) -> Path:
    from pipeline import state

    return state.op_files(settings, op).dir / SCREEN.format(kind=kind)


def keys(settings: Settings, kind: str) -> Keys:
    """What a saved output must have been made with to be written again: taken before an
    audit renders (what it reads may change while it does)."""
    from pipeline import state

    return Keys(kind, state.inputs_digest(settings), _code_key(), _terminal_key())


def replay(settings: Settings, op: str, now: Keys, witness: Witness | None = None) -> Screen | None:
    """Write the saved output of the last audit of ``op`` when it was made with the keys
    ``now`` (:func:`keys`), and return what was saved (``ok``: whether every item passed);
    else None. ``witness`` (:func:`witness`), when given and not the saved one, is saved
    with it, so that the next CLI audit replays before resolving its settings."""
    if not _file_name(op):
        return None
    path = _path(settings, op, now.kind)
    try:
        saved = Screen.read(path.read_text(encoding="utf-8"))
    except OSError:
        return None
    if saved is None or saved.keys != now:
        return None
    sys.stderr.write(saved.stderr)
    sys.stdout.write(saved.stdout)
    sys.stdout.flush()
    if witness is not None and saved.witness != witness:
        # only a shortcut for the next run: a read-only state folder does without it
        with contextlib.suppress(OSError):
            _write(path, Screen(saved.keys, saved.stdout, saved.stderr, saved.ok, witness))
    return saved


def save(
    settings: Settings,
    op: str,
    made: Keys,
    stdout: str,
    stderr: str,
    ok: bool,
    witness: Witness | None = None,
) -> None:
    """Save what an audit of ``op`` made with the keys ``made`` wrote, for :func:`replay`
    (and with ``witness``, for :func:`cli_saved`)."""
    if not _file_name(op):
        return
    _write(_path(settings, op, made.kind), Screen(made, stdout, stderr, ok, witness))


def _write(path: Path, saved: Screen) -> None:
    from pipeline import state

    state.write_text(path, json.dumps(saved.to_json(), ensure_ascii=False) + "\n")


# --- the CLI's witness: replay before the settings are resolved -------------------------------


def _environment() -> list[list[str]]:
    # the settings' variables and the homes a default path is read from
    env = os.environ
    homes = fsio.HOME_VARIABLES
    return sorted([k, v] for k, v in env.items() if k.startswith("MPS_PIPELINE_") or k in homes)


def _process(argv: list[str]) -> Process:
    return Process(
        list(argv), os.getcwd(), _environment(), [sys.executable, sys.version], _terminal_key()
    )


def witness(settings: Settings, argv: list[str], announced: str) -> Witness | None:
    """What a CLI audit's output rests on beyond its inputs' digest, taken before it reads
    them (:mod:`this module <pipeline.flows.audit_replay>`), with what it said on stderr before
    the audit (``announced``); None when a path looked at changed too recently to be
    trusted (:func:`pipeline.fsio.racy`)."""
    from pipeline import state

    looked = time.time_ns()
    looked_at = settings.looked_at
    watched: list[str] = [
        *looked_at.read,
        *(str(p) for p in state.inputs_looked_at(settings)),
        *fsio.package_files(),
    ]
    # the renderer's own files (a replay from the digest has not imported it)
    rich = sys.modules.get("rich")
    origin = rich.__file__ if rich is not None else _origin("rich")
    if origin:
        watched.append(origin)
    found = fsio.statuses(watched, looked)
    if found is None:
        return None
    return Witness(
        _process(argv),
        str(settings.state_dir),
        announced,
        [[path, status] for path, status in found.items()],
        [[path, fsio.kind(path)] for path in looked_at.kinds],
        [list(pair) for pair in looked_at.resolved],
    )


def _origin(module: str) -> str | None:
    import importlib.util

    spec = importlib.util.find_spec(module)
    return spec.origin if spec is not None else None


def _cli_candidates(argv: list[str]) -> tuple[str, list[str]] | None:
    """The operator of ``mps-pipeline [OPTIONS] audit OP [OPTIONS]`` and the state folders
    its saved output may be in, or None for any other command line."""
    given: dict[str, str] = {}
    words: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg.partition("=")
        if name in _VALUE_FLAGS and name not in given:
            if not eq:
                if i + 1 >= len(argv):
                    return None
                i, value = i + 1, argv[i + 1]
            given[name] = value
        elif arg.startswith("-"):
            return None  # --json, a flag given twice, an abbreviation: argparse decides
        else:
            words.append(arg)
        i += 1
    if len(words) != 2 or words[0] != "audit" or not _op_name(words[1]):
        return None
    cwd = os.getcwd()
    named = given.get("--state-dir") or os.environ.get("MPS_PIPELINE_STATE_DIR")
    if named:
        return words[1], [os.path.join(cwd, os.path.expanduser(named))]
    # the defaults: the checkout's around the current directory, or the sandbox's
    folders = []
    if "--root" in given:
        folders.append(os.path.join(cwd, os.path.expanduser(given["--root"])))
    else:
        here = cwd
        while True:
            if os.path.isfile(os.path.join(here, "aten/src/ATen/native/native_functions.yaml")):
                folders.append(here)
                break
            parent = os.path.dirname(here)
            if parent == here:
                break
            here = parent
    found = [os.path.join(folder, ".mps-pipeline") for folder in folders]
    return words[1], [*found, fsio.sandbox_state_dir(os.environ)]


def cli_saved(argv: list[str]) -> Screen | None:
    """The saved output of a CLI audit made by this very command line whose witness still
    holds, or None. Reads no config and imports nothing of the settings or the readers."""
    found = _cli_candidates(argv)
    if found is None:
        return None
    op, state_dirs = found
    now: Process | None = None
    for state_dir in state_dirs:
        path = os.path.join(state_dir, "ops", op, SCREEN.format(kind="cli"))
        try:
            with open(path, encoding="utf-8") as fh:
                saved = Screen.read(fh.read())
        except OSError:
            continue
        held = saved.witness if saved is not None else None
        if held is None or held.state_dir != os.path.realpath(state_dir):
            continue
        now = now if now is not None else _process(argv)
        if held.process == now and held.holds():
            return saved
    return None


def write_saved(saved: Screen) -> int:
    """Write what :func:`cli_saved` found as the audit wrote it; its exit status."""
    announced = saved.witness.announced if saved.witness is not None else ""
    sys.stderr.write(announced + saved.stderr)
    sys.stdout.write(saved.stdout)
    sys.stdout.flush()
    return 0 if saved.ok else 1
