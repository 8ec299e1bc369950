"""Make the tree the settings name ready to work on: the step between loading and working.

:func:`pipeline.config.load_settings` only reads configuration; this is where the bundled
sandbox's working copy is created and a checkout's state folder is kept out of git, so every
command and doit task goes through here once.

:func:`load` is ``load_settings`` remembered: each doit run resolves its settings before it
loads a task, which reads yaml (importing it is most of that). The resolved settings are
kept in the state folder with their witness (the variables, the directory, the
environment, the interpreter, mps-pipeline's code, and the status of every path the
resolution looked at, ``Settings.looked_at``), and the next resolution whose witness holds
takes them from there (a path changed too recently is not trusted: :func:`fsio.racy`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pipeline import config, fsio, sections
from pipeline.config import Settings
from pipeline.errors import ConfigError, DocumentError
from pipeline.fields import dump, read
from pipeline.sections import Key
from pipeline.tree import paths

MEMO = "settings.{via}.json"  # in the state folder's cache
# the classes a memo holds, by name
_CLASSES: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (
        config.Settings, sections.GitHubSettings, sections.MathSettings,
        sections.ReviewSettings, sections.NightlySettings, sections.KnownDeviation,
        sections.Resolved, config.LookedAt,
    )
}  # fmt: skip


def prepare(settings: Settings) -> Settings:
    """Create the sandbox's working copy when the settings select it; return the settings.

    Raises ConfigError when ``root`` is not a PyTorch tree: every reader would otherwise
    find nothing and report an operator as done.
    """
    state = settings.state_dir
    for folder in (state, *state.parents):
        if folder.exists() or folder.is_symlink():
            if not folder.is_dir():  # mkdir would stop the run later with a traceback
                raise ConfigError(
                    f"{folder} is not a directory, but the state directory {state} must be "
                    "one: move it away or pass --state-dir / state_dir="
                )
            break
    if settings.is_sandbox:
        if not settings.root.exists():  # materialize() would leave it as it is
            from pipeline import sandbox  # only a new working copy needs it

            sandbox.materialize(settings.root)
        if not (settings.root / paths.NATIVE_YAML).exists():
            raise ConfigError(
                f"the sandbox's working copy {settings.root} has no {paths.NATIVE_YAML}; "
                "delete that folder and the next run makes a fresh copy"
            )
    # exists(), not is_file(): a native_functions.yaml that is a folder or unreadable is the
    # reader's one-line error, naming what is wrong with it
    elif not (settings.root / paths.NATIVE_YAML).exists():
        origin = settings.sources[Key.ROOT].origin if settings.sources else "root="
        raise ConfigError(
            f"{settings.root} is not a PyTorch checkout: no {paths.NATIVE_YAML} "
            f"(set by {origin}); point root= at one, or leave it unset for the bundled sandbox"
        )
    elif not settings.state_dir.exists():
        exclude_from_git(settings.root, settings.state_dir)
    return settings


def exclude_from_git(root: Path, folder: Path) -> None:
    """Add ``folder`` (inside ``root``) to the checkout's ``.git/info/exclude``, once.

    The state folder holds results and doit's database: they belong to this tree but never to
    a commit, and ``git status`` must not list them (the edit guard reads it).
    """
    if not folder.resolve().is_relative_to(root.resolve()):
        return  # a state dir elsewhere: nothing of ours in the checkout
    import subprocess  # only for a new state folder in a checkout

    try:
        proc = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--show-toplevel", "--git-path", "info/exclude"],
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:
        return  # no git: no checkout to keep clean
    if proc.returncode != 0 or len(proc.stdout.splitlines()) != 2:
        return  # not a git work tree
    top, exclude_path = proc.stdout.splitlines()
    exclude = root / exclude_path  # relative to root, or absolute
    # patterns in info/exclude are relative to the work tree's top
    line = f"/{folder.resolve().relative_to(Path(top).resolve()).as_posix()}/"
    text = exclude.read_text(encoding="utf-8", errors="replace") if exclude.is_file() else ""
    if line in text.splitlines():
        return
    exclude.parent.mkdir(parents=True, exist_ok=True)
    with exclude.open("a", encoding="utf-8") as fh:
        fh.write(("\n" if text and not text.endswith("\n") else "") + f"{line}\n")


def announcement(settings: Settings) -> str:
    """What :func:`announce` writes."""
    lines = (settings.root_line(), *(f"warning: {w}" for w in settings.warnings))
    return "".join(f"{line}\n" for line in lines)


def announce(settings: Settings) -> None:
    """Say on stderr which tree this run works on (and why), then any settings warnings:
    the first line of every command's output, out of the way of ``--json`` on stdout."""
    sys.stderr.write(announcement(settings))


# --- load_settings, remembered ------------------------------------------------------------


def _encode(value: Any) -> Any:
    """``value`` as JSON that :func:`_decode` turns back into an equal value of the same
    types (tuples, paths, read-only mappings, non-string keys, the settings' classes)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, tuple):
        return {"tuple": [_encode(v) for v in value]}
    if isinstance(value, Path):
        return {"path": str(value)}
    if isinstance(value, (dict, MappingProxyType)):
        pairs = [[_encode(k), _encode(v)] for k, v in value.items()]
        return {"proxy" if isinstance(value, MappingProxyType) else "dict": pairs}
    name = type(value).__name__
    if dataclasses.is_dataclass(value) and _CLASSES.get(name) is type(value):
        fields = {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"class": name, "fields": fields}
    raise TypeError(f"no memo for a {name}")


def _decode(doc: object) -> Any:
    """What :func:`_encode` made ``doc`` of; ValueError for what it never makes."""
    match doc:
        case list():
            return [_decode(v) for v in doc]
        case {"tuple": list(items)}:
            return tuple(_decode(v) for v in items)
        case {"path": str(path)}:
            return Path(path)
        case {"class": str(name), "fields": dict(fields)}:
            return _CLASSES[name](**{k: _decode(v) for k, v in fields.items()})
        case {"dict": list(pairs)}:
            return {_decode(k): _decode(v) for k, v in pairs}
        case {"proxy": list(pairs)}:
            return MappingProxyType({_decode(k): _decode(v) for k, v in pairs})
        case dict():
            raise ValueError(f"not a value of a settings memo: {sorted(doc)}")
    return doc


@dataclass(frozen=True)
class _Process:
    """The memo's witness that is no file: what was asked, where, with which variables."""

    overrides: tuple[tuple[str, str], ...]
    via: str
    config: str | None
    cwd: str
    env: tuple[tuple[str, str], ...]
    python: tuple[str, str]

    def same(self, other: _Process) -> bool:
        """Whether ``other`` is this process (the witness adds fields of its own)."""
        return all(getattr(self, f.name) == getattr(other, f.name) for f in fields(_Process))


@dataclass(frozen=True)
class _Witness(_Process):
    """What a memo rests on: the process, the state folder it was kept in, and ``[path,
    what]`` lists as read back from JSON (checked by :func:`pipeline.fsio.holds`)."""

    state_dir: str
    files: object  # [path, fsio.status(path)] of every path looked at
    kinds: object  # [path, fsio.kind(path)]
    resolved: object  # [path, os.path.realpath(path)]

    def holds(self, state_dir: str) -> bool:
        """Whether it was kept in ``state_dir`` and every path looked at is as it was."""
        return (
            self.state_dir == os.path.realpath(state_dir)
            and fsio.holds(self.files, fsio.status)
            and fsio.holds(self.kinds, fsio.kind)
            and fsio.holds(self.resolved, os.path.realpath)
        )


@dataclass(frozen=True)
class _Memo:
    """A settings memo: the settings as :func:`_encode` wrote them, and their witness."""

    witness: _Witness
    settings: dict[str, object]


def _process(overrides: Mapping[str, str | None], via: str, config_path: Path | None,
             cwd: str) -> _Process:  # fmt: skip
    # the settings' variables and the homes a default path is read from
    env = (
        (k, v)
        for k, v in os.environ.items()
        if k.startswith("MPS_PIPELINE_") or k in fsio.HOME_VARIABLES
    )
    return _Process(
        overrides=tuple(sorted((k, v) for k, v in overrides.items() if v is not None and v)),
        via=via,
        config=None if config_path is None else str(config_path),
        cwd=cwd,
        env=tuple(sorted(env)),
        python=(sys.executable, sys.version),
    )


def _candidates(overrides: Mapping[str, str | None], cwd: str) -> list[str]:
    """The state folders a memo of these settings may be in (the witness decides)."""
    named = overrides.get(Key.STATE_DIR) or os.environ.get(config.env_var(Key.STATE_DIR))
    if named:
        return [os.path.join(cwd, os.path.expanduser(named))]
    folders = []
    root = overrides.get(Key.ROOT)
    if root and root != config.SANDBOX:
        folders.append(os.path.join(cwd, os.path.expanduser(root)))
    here = cwd
    while not os.path.isfile(os.path.join(here, paths.NATIVE_YAML)):
        here, up = os.path.dirname(here), here
        if here == up:
            break
    else:
        folders.append(here)
    found = [os.path.join(folder, config.STATE_DIR_NAME) for folder in dict.fromkeys(folders)]
    return [*found, fsio.sandbox_state_dir(os.environ)]


def load(
    overrides: Mapping[str, str | None],
    *,
    via: str = "flag",
    config_path: Path | None = None,
    cwd: Path | None = None,
) -> Settings:
    """:func:`pipeline.config.load_settings` (with this process's environment), or the
    settings it resolved last time with the same witness (see the module's docstring)."""
    where = os.getcwd() if cwd is None else str(cwd)
    process = _process(overrides, via, config_path, where)
    for state_dir in _candidates(overrides, where):
        memo = os.path.join(state_dir, "cache", MEMO.format(via=via))
        try:
            with open(memo, encoding="utf-8") as fh:
                saved = read(_Memo, json.load(fh), memo)
            if saved.witness.same(process) and saved.witness.holds(state_dir):
                settings = _decode(saved.settings)
                if isinstance(settings, Settings):
                    return settings
        except (OSError, ValueError, LookupError, TypeError, AttributeError, DocumentError):
            continue  # none, or damaged: resolve
    looked = time.time_ns()  # before the resolution reads its files
    settings = config.load_settings(overrides, via=via, config_path=config_path, cwd=cwd)
    _remember(settings, process, looked)
    return settings


def _remember(settings: Settings, process: _Process, looked: int) -> None:
    """Keep ``settings`` for :func:`load`, when they can be told apart from any other and
    their state folder exists; a memo that cannot be written is only not kept."""
    looked_at = settings.looked_at
    found = fsio.statuses([*looked_at.read, *fsio.package_files()], looked)
    if found is None or not settings.state_dir.is_dir():
        return
    try:
        encoded = _encode(settings)
        if _encode(_decode(json.loads(json.dumps(encoded)))) != encoded:
            return  # a value JSON would change (a NaN): resolve every time
    except (TypeError, ValueError):
        return
    witness = _Witness(
        **dataclasses.asdict(process),
        state_dir=str(settings.state_dir),
        files=[[path, st] for path, st in found.items()],
        kinds=[[path, fsio.kind(path)] for path in looked_at.kinds],
        resolved=[list(pair) for pair in looked_at.resolved],
    )
    memo = settings.cache_dir / MEMO.format(via=process.via)
    try:
        memo.parent.mkdir(exist_ok=True)
        fsio.write_atomic(memo, json.dumps(dump(_Memo(witness, encoded))) + "\n")
    except OSError:
        pass
