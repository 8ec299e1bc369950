"""Settings: one schema, layered sources, every value with where it came from.

Sources, first wins: a flag or doit variable > an environment variable
(``MPS_PIPELINE_<SECTION>_<KEY>``) > the user's config file > the packaged defaults
(``pipeline/defaults.yaml``, the only place defaults are written). The user's file is the
first of ``--config FILE`` / ``config=FILE``, ``$MPS_PIPELINE_CONFIG``, ``.mps-pipeline.yaml``
or ``[tool.mps-pipeline]`` in ``pyproject.toml`` at the checkout's root. ``root`` left unset
is the PyTorch checkout containing the current directory, else the bundled sandbox.

Loading is pure (no file is written): :func:`pipeline.workspace.prepare` makes the tree ready.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pipeline import fsio
from pipeline.dtypes import TEST_KINDS
from pipeline.errors import ConfigError
from pipeline.options import OVERRIDABLE
from pipeline.sections import (
    GitHubSettings,
    Key,
    MathSettings,
    NightlySettings,
    Resolved,
    ReviewSettings,
    github,
    math,
    nightly,
    review,
    runners,
)
from pipeline.tree import paths
from pipeline.tree.source import TreeSource

DEFAULTS_FILE = Path(__file__).with_name("defaults.yaml")
SANDBOX = "sandbox"
ENV_PREFIX = "MPS_PIPELINE_"
# a config file to read instead of the checkout's own
CONFIG_ENV = "MPS_PIPELINE_CONFIG"
# MPS_PIPELINE_* variables that are not settings: the config file, and the CI workflows' own
ENV_NOT_SETTINGS = frozenset(
    {CONFIG_ENV, "MPS_PIPELINE_REPOSITORY", "MPS_PIPELINE_REF", "MPS_PIPELINE_CI"}
)
CHECKOUT_CONFIG = ".mps-pipeline.yaml"
PYPROJECT_TABLE = "mps-pipeline"  # [tool.mps-pipeline]
STATE_DIR_NAME = ".mps-pipeline"
# where the bundled sandbox's state goes when no setting names a state_dir
SANDBOX_STATE_ORIGIN = (
    f"default: the bundled sandbox's, $XDG_STATE_HOME/{fsio.SANDBOX_STATE} (else "
    f"~/.local/state/{fsio.SANDBOX_STATE})"
)
MATH_CACHE_NAME = "math"  # check-math's folder in the user's cache
MATH_CACHE_ORIGIN = (
    f"default: the user's cache, $XDG_CACHE_HOME/{fsio.USER_CACHE}/{MATH_CACHE_NAME} (else "
    f"~/.cache/{fsio.USER_CACHE}/{MATH_CACHE_NAME})"
)
# keys a doit variable or CLI flag may set
# keys whose relative paths are relative to where they were set (file's folder, or cwd)
_PATH_KEYS = (Key.ROOT, Key.STATE_DIR, Key.MATH_CACHE)

_NONE = type(None)
# Every setting, by dotted name, with the types it may have (declared on :class:`Key`).
# Defaults: defaults.yaml.
TYPES: dict[str, tuple[type, ...]] = {key: key.types for key in Key}
# settings whose values hold a secret in part: `config` and every message show them redacted
SECRET_SETTINGS = frozenset({Key.HISTORY_URL})
SECTIONS = frozenset(key.partition(".")[0] for key in TYPES if "." in key)

# origins that are not a file, a variable or a flag
DEFAULT = "default"
FROM_CHECKOUT = "the PyTorch checkout containing the current directory"
NO_CHECKOUT = "default: no PyTorch checkout contains the current directory"


@dataclass(frozen=True)
class LookedAt:
    """What resolving settings looked at, besides the command line, the current directory
    and the environment: while each path is as it was, they resolve alike again (what a
    warm audit's replay is keyed on, :mod:`pipeline.flows.audit_replay`)."""

    # paths probed only for being there and their kind (file, folder): the folders
    # searched for a checkout, the config files that might be there
    kinds: tuple[str, ...] = ()
    # files read: the packaged defaults, the user's config file
    read: tuple[str, ...] = ()
    # paths made absolute through their symlinks, as given -> as resolved
    resolved: tuple[tuple[str, str], ...] = ()


class _Trail:
    """A :class:`LookedAt` as it is collected."""

    def __init__(self) -> None:
        self.kinds: list[Path] = []
        self.read: list[Path] = []
        self.resolved: list[tuple[Path, Path]] = []

    def resolve(self, path: Path) -> Path:
        resolved = path.resolve()
        self.resolved.append((path, resolved))
        return resolved

    def done(self) -> LookedAt:
        unique = lambda paths: tuple(dict.fromkeys(str(p) for p in paths))  # noqa: E731
        pairs = tuple(dict.fromkeys((str(a), str(b)) for a, b in self.resolved))
        return LookedAt(unique(self.kinds), unique(self.read), pairs)


@dataclass(frozen=True)
class Settings:
    """Resolved configuration. Paths are absolute."""

    root: Path
    is_sandbox: bool
    python: str
    build_dir: Path
    build_command: tuple[str, ...]
    state_dir: Path
    # check-math's objects and torch's answers (``math.cache``, else the user's cache: each
    # entry is named by a digest of what made it, so every checkout and state dir shares it)
    math_cache: Path
    # seconds a chain waits for another run editing the same tree before giving up
    lock_wait: float
    test_file: str
    test_kinds: tuple[str, ...]
    test_timeout: float
    pytest_args: tuple[str, ...]
    opinfo_table: Path | None
    github: GitHubSettings
    runners: tuple[str, ...]
    nightly: NightlySettings
    # runner -> its macOS version, for the runners the ``runners:`` table gives one (the
    # others: read from the name, ``macos-m2-15``)
    runner_macos: Mapping[str, tuple[int, ...]] = field(default_factory=dict, hash=False)
    review: ReviewSettings = field(default_factory=ReviewSettings)
    # every setting by dotted name, with its origin: what `mps-pipeline config` lists
    sources: Mapping[str, Resolved] = field(default_factory=dict, compare=False, repr=False)
    # the user's config file that was read, if any
    config_file: str | None = None
    # said on stderr by every command: e.g. a MPS_PIPELINE_* variable that is no setting
    warnings: tuple[str, ...] = ()
    math: MathSettings = field(default_factory=MathSettings)
    looked_at: LookedAt = field(default_factory=LookedAt, compare=False, repr=False)
    # the nightly history's place (``history.url``): None, the state directory's SQLite
    # file; a path; or a postgresql:// URL, which may hold a password (never in the repr)
    history_url: str | None = field(default=None, repr=False)

    @property
    def cache_dir(self) -> Path:
        return self.state_dir / "cache"

    @property
    def kernel_specs(self) -> Path:
        """check-kernel's launch specs: ``<state_dir>/kernels`` (``.mps-pipeline/kernels`` in
        a checkout), one ``<File>.yaml`` per kernel file (pipeline.tree.launch)."""
        return self.state_dir / "kernels"

    @property
    def tree(self) -> TreeSource:
        """What the tree readers need (and nothing else of the settings)."""
        return TreeSource(
            root=self.root,
            cache_dir=self.cache_dir,
            python=self.python,
            opinfo_table=self.opinfo_table,
            test_kinds=self.test_kinds,
            answers_cache=self.math.cache,
        )

    @property
    def results_dir(self) -> Path:
        return self.state_dir / "results"

    def root_line(self) -> str:
        """One short line saying which tree this run works on and why that one."""
        origin = self.sources[Key.ROOT].origin if Key.ROOT in self.sources else DEFAULT
        if self.is_sandbox:
            return f"root: the bundled sandbox, working copy {self.root} ({origin})"
        return f"root: {self.root} ({origin})"


def env_var(key: str) -> str:
    """The environment variable of a setting: ``test.kinds`` -> ``MPS_PIPELINE_TEST_KINDS``."""
    return ENV_PREFIX + key.upper().replace(".", "_")


def flatten(data: object, where: str) -> dict[str, object]:
    """A config mapping as ``{dotted key: value}``; unknown keys and sections are errors."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a mapping of settings, got {type(data).__name__}")
    out: dict[str, object] = {}
    for key, value in data.items():
        key = str(key)
        if key in SECTIONS:
            if not isinstance(value, Mapping):
                raise ConfigError(f"{where}: '{key}' must be a mapping of settings")
            for sub, sub_value in value.items():
                out[_known(f"{key}.{sub}", where)] = sub_value
        else:
            out[_known(key, where)] = value
    for key, value in out.items():
        _check_type(key, value, where)
    return out


def _check_type(key: str, value: object, where: str) -> None:
    typ = TYPES[key]
    if not isinstance(value, typ) or isinstance(value, bool):
        want = " or ".join("null" if t is _NONE else t.__name__ for t in typ)
        raise ConfigError(
            f"{where}: config key '{key}' must be {want}, got {type(value).__name__}: {value!r}"
        )


def _known(key: str, where: str) -> str:
    if key in TYPES:
        return key
    import difflib  # only for a mistyped key

    close = difflib.get_close_matches(key, list(TYPES), n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    raise ConfigError(
        f"{where}: unknown config key '{key}'{hint}; known keys: {', '.join(sorted(TYPES))}"
    )


def read_file(path: Path, loader: str = "SafeLoader") -> dict[str, object]:
    """The settings of a config file: YAML, or a ``pyproject.toml``'s [tool.mps-pipeline].

    ``loader``: the yaml loader (the packaged defaults take libyaml's, when there is one:
    the same values, a tenth of the time; a user's file keeps the one its errors are
    worded by)."""
    import yaml  # here: a warm audit's replay resolves no settings

    if not path.is_file():
        if path.exists() or path.is_symlink():
            raise ConfigError(f"{path}: {_not_a_file(path)}; a config file must be a YAML file")
        raise ConfigError(f"{path}: no such config file")
    if path.name == "pyproject.toml":
        return flatten(_pyproject_table(path) or {}, f"{path} [tool.{PYPROJECT_TABLE}]")
    try:
        with path.open(encoding="utf-8") as fh:  # a stream, so YAML errors name the file
            data = yaml.load(fh, Loader=getattr(yaml, loader, yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read: {exc.strerror or exc}") from exc
    return flatten(data or {}, str(path))


def _pyproject_table(path: Path) -> object:
    text = path.read_text(encoding="utf-8", errors="replace")
    if f"tool.{PYPROJECT_TABLE}" not in text and f'tool."{PYPROJECT_TABLE}"' not in text:
        return None  # PyTorch's own pyproject.toml: no need to parse it on every run
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - the 3.10 backport
        import tomli as tomllib
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    return data.get("tool", {}).get(PYPROJECT_TABLE)


# the packaged defaults as last read, by the file's status (read once a process, not twice)
_DEFAULTS: dict[tuple[int, ...], dict[str, object]] = {}


def defaults() -> dict[str, Any]:
    """The packaged defaults, by dotted key (every key of :data:`TYPES`)."""
    import copy

    try:
        st = DEFAULTS_FILE.stat()
    except OSError:
        return read_file(DEFAULTS_FILE)  # its own error
    key = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if key not in _DEFAULTS:
        _DEFAULTS.clear()
        _DEFAULTS[key] = read_file(DEFAULTS_FILE, loader="CSafeLoader")
    return copy.deepcopy(_DEFAULTS[key])  # callers own what they get


def find_checkout(start: Path, trail: _Trail | None = None) -> Path | None:
    """The PyTorch checkout containing ``start``: the nearest folder at or above it that has
    ``aten/src/ATen/native/native_functions.yaml`` (as git finds ``.git``).

    A folder that looks like a checkout (``aten/src/ATen/native/`` there, or a git top level
    with ``aten/``) whose yaml is no readable file is a :class:`ConfigError`, never a reason
    to fall back on the sandbox: the user stands in their tree and would edit another.
    """
    kinds = trail.kinds if trail is not None else []
    for folder in (start, *start.parents):
        yaml_path = folder / paths.NATIVE_YAML
        kinds.append(yaml_path)
        if yaml_path.is_file():
            return folder
        native = yaml_path.parent
        kinds += (native, folder / ".git", folder / "aten")
        if native.is_dir() or ((folder / ".git").exists() and (folder / "aten").is_dir()):
            why = "aten/src/ATen/native/ is there" if native.is_dir() else "git, with aten/"
            raise ConfigError(
                f"{yaml_path}: {_not_a_file(yaml_path)}; {folder} looks like a PyTorch checkout "
                f"({why}): repair the file, or name the tree to use with --root / root= "
                "(root=sandbox for the bundled one)"
            )
    return None


def _not_a_file(path: Path) -> str:
    """Why ``path`` (which is no regular file) cannot be read as one."""
    if path.is_symlink():
        try:
            path.resolve(strict=True)
        except RuntimeError:
            return "a symlink loop"
        except OSError:
            return f"a dangling symlink (to {os.readlink(path)})"
    if not path.exists():
        return "missing"
    if path.is_dir():
        return "a directory, not a file"
    return "not a regular file (a FIFO, socket or device)"


def _user_file(
    config_path: Path | None,
    env: Mapping[str, str],
    checkout: Path | None,
    cwd: Path,
    trail: _Trail,
) -> Path | None:
    """The user's config file: the one named (relative to ``cwd``), else the checkout's own
    (or None)."""
    if config_path is not None:
        return cwd / config_path
    if env.get(CONFIG_ENV):
        named = cwd / env[CONFIG_ENV]
        trail.kinds.append(named)
        if not named.is_file():
            raise ConfigError(f"{CONFIG_ENV}={env[CONFIG_ENV]}: no such config file")
        return named
    if checkout is None:
        return None
    yaml_file = checkout / CHECKOUT_CONFIG
    pyproject = checkout / "pyproject.toml"
    trail.kinds.append(yaml_file)
    trail.read.append(pyproject)  # its text decides whether it holds our table
    in_pyproject = pyproject.is_file() and _pyproject_table(pyproject) is not None
    if (yaml_file.exists() or yaml_file.is_symlink()) and not yaml_file.is_file():
        # the user's settings are there, only unreadable: never run without them
        raise ConfigError(
            f"{yaml_file}: {_not_a_file(yaml_file)}; the checkout's config file must be a "
            "YAML file (remove or replace it)"
        )
    if yaml_file.is_file() and in_pyproject:
        raise ConfigError(
            f"two config files for {checkout}: {CHECKOUT_CONFIG} and [tool.{PYPROJECT_TABLE}] "
            "in pyproject.toml; keep one"
        )
    if yaml_file.is_file():
        return yaml_file
    return pyproject if in_pyproject else None


def _parse_env(var: str, key: str, text: str) -> Any:
    typ = TYPES[key]
    if list in typ:
        items = [item for item in re.split(r"[,\s]+", text.strip()) if item]
        if dict in typ and any("=" in item for item in items):
            # MPS_PIPELINE_RUNNERS="macos-m1-14=14.0 macos-m2-15": a table, versions optional
            return {name: version or None for name, _, version in (i.partition("=") for i in items)}
        return items
    if dict in typ:
        # MPS_PIPELINE_MATH_REFERENCES="div_true=div.no_rounding_mode erfcx=torch.special.erfcx"
        items = [item for item in re.split(r"[,\s]+", text.strip()) if item]
        return {name: ref for name, _, ref in (i.partition("=") for i in items)}
    if float in typ or int in typ:
        try:
            return float(text) if re.search(r"[.eE]", text) else int(text)
        except ValueError:
            raise ConfigError(f"{var}={text!r}: '{key}' must be a number") from None
    if int in typ:
        try:
            return int(text)
        except ValueError:
            raise ConfigError(f"{var}={text!r}: '{key}' must be a whole number") from None
    return text


def _env_layer(env: Mapping[str, str]) -> tuple[dict[str, Resolved], list[str]]:
    by_var = {env_var(key): key for key in TYPES}
    layer: dict[str, Resolved] = {}
    warnings: list[str] = []
    for var, text in env.items():
        if not var.startswith(ENV_PREFIX) or var in ENV_NOT_SETTINGS:
            continue
        key = by_var.get(var)
        if key is None:
            import difflib  # only for a mistyped variable

            close = difflib.get_close_matches(var, list(by_var), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            warnings.append(f"{var} is not an mps-pipeline setting{hint}; it is ignored")
        elif text != "":  # an empty variable is unset, as in the shell's ${VAR:-default}
            layer[key] = Resolved(_parse_env(var, key, text), var)
    return layer, warnings


def override_origin(key: str, via: str) -> str:
    """How a flag (``--state-dir``) or a doit variable (``state_dir=``) is written."""
    return f"{key}=" if via == "doit" else "--" + key.replace("_", "-")


def _given_layer(overrides: Mapping[str, str | None], via: str) -> dict[str, Resolved]:
    """The flags or doit variables given (None or "": not given), each with its origin."""
    given: dict[str, Resolved] = {}
    for key, given_value in overrides.items():
        if given_value in (None, ""):
            continue
        if key not in OVERRIDABLE:
            raise ConfigError(f"cannot override config key {key!r} from the command line")
        given[key] = Resolved(given_value, override_origin(key, via))
    return given


def _checkout(named_root: str | None, cwd: Path, trail: _Trail) -> Path | None:
    """The checkout the root named above the config file points at, else the one around
    ``cwd``; None for the sandbox (named, or no checkout around)."""
    if named_root == SANDBOX:
        return None
    if named_root is not None:
        return trail.resolve(cwd / os.path.expanduser(named_root))
    return find_checkout(cwd, trail)


def _layered(
    user_path: Path | None, layers: Sequence[Mapping[str, Resolved]], cwd: Path, trail: _Trail
) -> tuple[dict[str, Resolved], dict[str, Path]]:
    """Every setting from the highest layer that gives it (defaults, the user's file, then
    ``layers``), and the folder each path setting is relative to: its file's, else ``cwd``."""
    sources = {key: Resolved(value, DEFAULT) for key, value in defaults().items()}
    bases: dict[str, Path] = dict.fromkeys(_PATH_KEYS, cwd)
    if user_path is not None:
        trail.read.append(user_path)
        origin = str(trail.resolve(user_path))
        if user_path.name == "pyproject.toml":
            origin += f" [tool.{PYPROJECT_TABLE}]"
        for key, value in read_file(user_path).items():
            sources[key] = Resolved(value, origin)
            if key in _PATH_KEYS:
                bases[key] = user_path.resolve().parent
    for layer in layers:
        for key, source in layer.items():
            sources[key] = source
            if key in _PATH_KEYS:
                bases[key] = cwd
    return sources, bases


def _check_values(sources: Mapping[str, Resolved]) -> None:
    """The checks a type cannot make: test kinds we know, times that can be waited."""
    for kind in sources[Key.TEST_KINDS].value:
        if kind not in TEST_KINDS:
            raise ConfigError(
                f"config key '{Key.TEST_KINDS}' ({sources[Key.TEST_KINDS].origin}): {kind!r} is "
                f"not one of {TEST_KINDS}"
            )
    for key in (Key.TEST_TIMEOUT, Key.LOCK_WAIT):
        number = float(sources[key].value)
        timeout = key is Key.TEST_TIMEOUT
        if not (number > 0 if timeout else number >= 0) or number != number:
            least = "a number of seconds > 0" if timeout else "seconds >= 0"
            raise ConfigError(
                f"config key '{key}' ({sources[key].origin}): {sources[key].value!r} is not {least}"
            )


def _placed(
    sources: dict[str, Resolved],
    bases: Mapping[str, Path],
    checkout: Path | None,
    env: Mapping[str, str],
    trail: _Trail,
) -> tuple[Path, Path, bool]:
    """The tree's root, the state directory and whether the tree is the sandbox; ``sources``
    get the paths as resolved, each with its origin (what `mps-pipeline config` shows)."""
    root_value = sources[Key.ROOT].value
    if root_value is None:  # no source named a root: `checkout` is the one around cwd
        is_sandbox = checkout is None
        sources[Key.ROOT] = (
            Resolved(SANDBOX, NO_CHECKOUT)
            if checkout is None
            else Resolved(str(checkout), FROM_CHECKOUT)
        )
    else:
        is_sandbox = root_value == SANDBOX
    state_source = sources[Key.STATE_DIR]
    if state_source.value is not None:
        state_dir = trail.resolve(bases[Key.STATE_DIR] / os.path.expanduser(state_source.value))
    elif is_sandbox:  # never the current directory: it is no checkout
        state_dir = trail.resolve(Path(fsio.sandbox_state_dir(env)))
        sources[Key.STATE_DIR] = Resolved(None, SANDBOX_STATE_ORIGIN)
    if is_sandbox:
        root = state_dir / SANDBOX
    else:
        root = trail.resolve(bases[Key.ROOT] / os.path.expanduser(sources[Key.ROOT].value))
        trail.kinds.append(root)
        if not root.is_dir():
            raise ConfigError(
                f"config key 'root' ({sources[Key.ROOT].origin}): {root} is not a directory; "
                "point root= at a PyTorch checkout or use root=sandbox"
            )
        if state_source.value is None:
            state_dir = root / STATE_DIR_NAME
            sources[Key.STATE_DIR] = Resolved(None, "default: inside the checkout")
        sources[Key.ROOT] = Resolved(str(root), sources[Key.ROOT].origin)
    sources[Key.STATE_DIR] = Resolved(str(state_dir), sources[Key.STATE_DIR].origin)
    return root, state_dir, is_sandbox


def load_settings(
    overrides: Mapping[str, str | None] | None = None,
    *,
    via: str = "flag",
    config_path: Path | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Settings:
    """Resolve every setting from its sources (see the module docstring).

    ``overrides`` are flags (``via="flag"``) or doit variables (``via="doit"``) by key; None or
    "" means not given. ``root == "sandbox"`` selects the bundled tree's working copy under the
    state directory.
    """
    env = os.environ if env is None else env
    trail = _Trail()
    cwd = trail.resolve(cwd or Path.cwd())
    trail.read.append(DEFAULTS_FILE)
    given = _given_layer(overrides or {}, via)
    env_layer, warnings = _env_layer(env)
    # The checkout decides which config file is read, so it comes from the layers above it.
    named_root = (given.get(Key.ROOT) or env_layer.get(Key.ROOT) or Resolved(None, "")).value
    checkout = _checkout(named_root, cwd, trail)
    user_path = _user_file(config_path, env, checkout, cwd, trail)
    sources, bases = _layered(user_path, (env_layer, given), cwd, trail)
    _check_values(sources)
    root, state_dir, is_sandbox = _placed(sources, bases, checkout, env, trail)

    if sources[Key.PYTHON].value is None:
        sources[Key.PYTHON] = Resolved(sys.executable, "default: the interpreter running this")
    elif sources[Key.PYTHON].value.startswith("~"):
        sources[Key.PYTHON] = Resolved(
            os.path.expanduser(sources[Key.PYTHON].value), sources[Key.PYTHON].origin
        )
    opinfo_table = sources[Key.OPINFO_TABLE].value
    if opinfo_table is None and is_sandbox:
        opinfo_table = paths.OPINFO_TABLE
    build_dir = root / sources[Key.BUILD_DIR].value
    runner_names, runner_macos = runners(sources[Key.RUNNERS])
    cache = sources[Key.MATH_CACHE].value
    if cache is None:
        math_cache = trail.resolve(Path(fsio.user_cache_dir(env)) / MATH_CACHE_NAME)
        sources[Key.MATH_CACHE] = Resolved(str(math_cache), MATH_CACHE_ORIGIN)
    else:
        math_cache = trail.resolve(bases[Key.MATH_CACHE] / os.path.expanduser(cache))
    value = {key: source.value for key, source in sources.items()}
    return Settings(
        root=root,
        is_sandbox=is_sandbox,
        python=value[Key.PYTHON],
        build_dir=build_dir,
        build_command=tuple(
            str(arg).format(build_dir=build_dir, root=root) for arg in value[Key.BUILD_COMMAND]
        ),
        state_dir=state_dir,
        math_cache=math_cache,
        lock_wait=float(value[Key.LOCK_WAIT]),
        test_file=value[Key.TEST_FILE],
        test_kinds=tuple(value[Key.TEST_KINDS]),
        test_timeout=float(value[Key.TEST_TIMEOUT]),
        pytest_args=tuple(str(a) for a in value[Key.TEST_PYTEST_ARGS]),
        opinfo_table=root / opinfo_table if opinfo_table else None,
        github=github(sources),
        runners=runner_names,
        nightly=nightly(sources),
        runner_macos=MappingProxyType(runner_macos),
        review=review(sources),
        sources=MappingProxyType(sources),
        config_file=str(user_path.resolve()) if user_path is not None else None,
        warnings=tuple(warnings),
        math=math(sources, defaults()[Key.MATH_REFERENCES], None if cache is None else math_cache),
        looked_at=trail.done(),
        history_url=value[Key.HISTORY_URL] or None,
    )
