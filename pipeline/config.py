"""Settings: one place, one schema, validated on load with errors that name the key."""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pipeline.dtypes import TEST_KINDS
from pipeline.errors import ConfigError
from pipeline.tree import paths
from pipeline.tree.source import TreeSource

DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "pipeline.yaml"
SANDBOX = "sandbox"
ENV_VARS = {"root": "MPS_PIPELINE_ROOT", "python": "MPS_PIPELINE_PYTHON"}
# a config file to read instead of the bundled configs/pipeline.yaml
CONFIG_ENV = "MPS_PIPELINE_CONFIG"
# keys a doit variable or CLI flag may set
OVERRIDABLE = ("root", "python", "state_dir", "build_dir", "opinfo_table")

# key -> (type, default). Nested sections are dicts of the same shape.
SCHEMA: dict[str, Any] = {
    "root": (str, SANDBOX),
    "python": ((str, type(None)), None),
    "build_dir": (str, "build"),
    "build_command": (list, ["ninja", "-C", "{build_dir}", "torch_cpu"]),
    "state_dir": (str, ".mps-pipeline"),
    "lock_wait": ((int, float), 600),
    "test": {
        "file": (str, "test/test_mps.py"),
        "kinds": (list, ["output_match"]),
        "timeout": ((int, float), 3600),
        "pytest_args": (list, []),
    },
    "opinfo_table": ((str, type(None)), None),
    "github": {
        "api_url": (str, "https://api.github.com"),
        "repo": (str, "pytorch/pytorch"),
        "status_context": (str, "mps/targeted"),
        "token_env": (str, "GITHUB_TOKEN"),
        "bot_login": (str, "github-actions[bot]"),
    },
    "runners": (list, ["macos-m1-14", "macos-m2-15", "macos-m2-26"]),
}


@dataclass(frozen=True)
class GitHubSettings:
    api_url: str
    repo: str
    status_context: str
    token_env: str
    # the login the token posts as; only its comments are ever edited
    bot_login: str


@dataclass(frozen=True)
class Settings:
    """Resolved configuration. Paths are absolute."""

    root: Path
    is_sandbox: bool
    python: str
    build_dir: Path
    build_command: tuple[str, ...]
    state_dir: Path
    # seconds a chain waits for another run editing the same tree before giving up
    lock_wait: float
    test_file: str
    test_kinds: tuple[str, ...]
    test_timeout: float
    pytest_args: tuple[str, ...]
    opinfo_table: Path | None
    github: GitHubSettings
    runners: tuple[str, ...]

    @property
    def cache_dir(self) -> Path:
        return self.state_dir / "cache"

    @property
    def tree(self) -> TreeSource:
        """What the tree readers need (and nothing else of the settings)."""
        return TreeSource(
            root=self.root,
            cache_dir=self.cache_dir,
            python=self.python,
            opinfo_table=self.opinfo_table,
            test_kinds=self.test_kinds,
        )

    @property
    def results_dir(self) -> Path:
        return self.state_dir / "results"


def _validate(data: Mapping[str, Any], schema: Mapping[str, Any], prefix: str) -> dict:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{prefix or 'config'}: expected a mapping, got {type(data).__name__}")
    out: dict[str, Any] = {}
    for key in data:
        if key not in schema:
            known = ", ".join(sorted(schema))
            close = difflib.get_close_matches(str(key), list(schema), n=1)
            hint = f" (did you mean '{prefix}{close[0]}'?)" if close else ""
            raise ConfigError(f"unknown config key '{prefix}{key}'{hint}; known keys: {known}")
    for key, spec in schema.items():
        if isinstance(spec, dict):
            out[key] = _validate(data.get(key) or {}, spec, f"{prefix}{key}.")
            continue
        typ, default = spec
        value = data.get(key, default)
        if not isinstance(value, typ):
            want = " or ".join(t.__name__ for t in (typ if isinstance(typ, tuple) else (typ,)))
            raise ConfigError(
                f"config key '{prefix}{key}' must be {want}, got {type(value).__name__}: {value!r}"
            )
        out[key] = value
    return out


def load_raw(path: Path | None = None) -> dict[str, Any]:
    """Read and validate a config file (the bundled default when ``path`` is None)."""
    path = path or DEFAULT_CONFIG
    if not path.is_file():
        return _validate({}, SCHEMA, "")
    try:
        with path.open(encoding="utf-8") as fh:  # a stream, so YAML errors name the file
            data = yaml.safe_load(fh)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    try:
        return _validate(data or {}, SCHEMA, "")
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def load_settings(
    overrides: Mapping[str, str | None] | None = None,
    *,
    config_path: Path | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Settings:
    """Resolve settings: overrides (doit vars / CLI) > environment > config file > defaults.

    ``root == "sandbox"`` selects the bundled tree's private working copy under the state
    directory. Loading is pure: :func:`pipeline.workspace.prepare` creates that copy.
    """
    env = os.environ if env is None else env
    cwd = (cwd or Path.cwd()).resolve()
    if config_path is None and env.get(CONFIG_ENV):
        config_path = Path(env[CONFIG_ENV])
        if not config_path.is_file():
            raise ConfigError(f"{CONFIG_ENV}={config_path}: no such file")
    raw = load_raw(config_path)
    for key, var in ENV_VARS.items():
        if env.get(var):
            raw[key] = env[var]
    for key, value in (overrides or {}).items():
        if value in (None, ""):
            continue
        if key not in OVERRIDABLE:
            raise ConfigError(f"cannot override config key {key!r} from the command line")
        raw[key] = value
    kinds = raw["test"]["kinds"]
    for kind in kinds:
        if kind not in TEST_KINDS:
            raise ConfigError(f"config key 'test.kinds': {kind!r} is not one of {TEST_KINDS}")

    state_dir = (cwd / raw["state_dir"]).resolve()
    is_sandbox = raw["root"] == SANDBOX
    if is_sandbox:
        root = state_dir / SANDBOX
    else:
        root = (cwd / os.path.expanduser(raw["root"])).resolve()
        if not root.is_dir():
            raise ConfigError(
                f"config key 'root': {root} is not a directory; point root= at a PyTorch "
                "checkout or use root=sandbox"
            )
    opinfo_table = raw["opinfo_table"]
    if opinfo_table is None and is_sandbox:
        opinfo_table = paths.OPINFO_TABLE
    build_dir = root / raw["build_dir"]
    return Settings(
        root=root,
        is_sandbox=is_sandbox,
        python=raw["python"] or sys.executable,
        build_dir=build_dir,
        build_command=tuple(
            str(arg).format(build_dir=build_dir, root=root) for arg in raw["build_command"]
        ),
        state_dir=state_dir,
        lock_wait=float(raw["lock_wait"]),
        test_file=raw["test"]["file"],
        test_kinds=tuple(kinds),
        test_timeout=float(raw["test"]["timeout"]),
        pytest_args=tuple(str(a) for a in raw["test"]["pytest_args"]),
        opinfo_table=root / opinfo_table if opinfo_table else None,
        github=GitHubSettings(**raw["github"]),
        runners=tuple(str(r) for r in raw["runners"]),
    )
