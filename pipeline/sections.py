"""The settings' sections (github, math, review/speed/tracker, runners): their frozen models,
and the checks that make them from resolved values, each error naming its key and origin.

:mod:`pipeline.config` resolves every setting (defaults, file, variables, flags) and builds
:class:`~pipeline.config.Settings` out of these.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pipeline.dtypes import canonical
from pipeline.errors import ConfigError

_NONE = type(None)


class Key(str, Enum):
    """Every setting, by its dotted name (defaults.yaml's keys, ``test.kinds``), declared
    with the types its value may have: a misspelt name is mypy's error, not a KeyError."""

    types: tuple[type, ...]

    def __new__(cls, name: str, types: tuple[type, ...]) -> Key:
        key = str.__new__(cls, name)
        key._value_ = name
        key.types = types
        return key

    def __str__(self) -> str:
        return str(self.value)

    ROOT = "root", (str, _NONE)
    PYTHON = "python", (str, _NONE)
    BUILD_DIR = "build_dir", (str,)
    BUILD_COMMAND = "build_command", (list,)
    STATE_DIR = "state_dir", (str, _NONE)
    LOCK_WAIT = "lock_wait", (int, float)
    TEST_FILE = "test.file", (str,)
    TEST_KINDS = "test.kinds", (list,)
    TEST_TIMEOUT = "test.timeout", (int, float)
    TEST_PYTEST_ARGS = "test.pytest_args", (list,)
    OPINFO_TABLE = "opinfo_table", (str, _NONE)
    GITHUB_API_URL = "github.api_url", (str,)
    GITHUB_REPO = "github.repo", (str,)
    GITHUB_STATUS_CONTEXT = "github.status_context", (str,)
    GITHUB_TOKEN_ENV = "github.token_env", (str,)
    GITHUB_BOT_LOGIN = "github.bot_login", (str,)
    # a list of runner names, or a table of runner name -> macOS version ("15.0")
    RUNNERS = "runners", (list, dict)
    MATH_CXX = "math.cxx", (str, _NONE)
    MATH_KNOWN = "math.known", (list,)
    MATH_REFERENCES = "math.references", (dict,)
    MATH_MAX_SAMPLES = "math.max_samples", (int,)
    MATH_CACHE = "math.cache", (str, _NONE)
    REVIEW_DISABLE = "review.disable", (list,)
    SPEED_THRESHOLD = "speed.threshold", (int, float)
    SPEED_MIN_NIGHTS = "speed.min_nights", (int,)
    NIGHTLY_MIN_PASSES = "nightly.min_passes", (int,)
    NIGHTLY_FLAKY_WINDOW = "nightly.flaky_window", (int,)
    NIGHTLY_KEEP = "nightly.keep", (int,)
    NIGHTLY_BACKUPS = "nightly.backups", (int,)
    NIGHTLY_SHARD_NIGHTS = "nightly.shard_nights", (int,)
    TRACKER_QUERY = "tracker.query", (str,)
    TRACKER_MAX_REQUESTS = "tracker.max_requests", (int,)
    # null: the SQLite file in the state directory; a postgresql:// URL: a history server
    HISTORY_URL = "history.url", (str, _NONE)


@dataclass(frozen=True)
class Resolved:
    """A resolved setting and where it came from (default, a file, a variable, a flag)."""

    value: Any
    origin: str


@dataclass(frozen=True)
class GitHubSettings:
    api_url: str
    repo: str
    status_context: str
    token_env: str
    # the login the token posts as; only its comments are ever edited
    bot_login: str


@dataclass(frozen=True)
class KnownDeviation:
    """A reviewed check-math deviation: ``op`` (kernel or operator), dtype or "*", why."""

    op: str
    dtype: str
    reason: str


@dataclass(frozen=True)
class MathSettings:
    # the host C++ compiler; None: the first of clang++ / g++ on PATH
    cxx: str | None = None
    known: tuple[KnownDeviation, ...] = ()
    # kernel -> its torch reference: "div.floor_rounding" (OpInfo name.variant), "torch.fn"
    # or "none"
    references: Mapping[str, str] = field(default_factory=dict, hash=False)
    max_samples: int = 256
    # ``math.cache`` as set: the compiled functors and torch's answers, op_db's dump too;
    # None: those two in the user's cache (Settings.math_cache), the dump in the state dir
    cache: Path | None = None


@dataclass(frozen=True)
class ReviewSettings:
    """The review checks turned off, the speed rule and the tracker's search and budget."""

    disable: tuple[str, ...] = ()
    speed_threshold: float = 1.10
    speed_min_nights: int = 3
    tracker_query: str = 'is:open label:"module: mps"'
    tracker_max_requests: int = 250


@dataclass(frozen=True)
class NightlySettings:
    """The nightly's rules and the history's keeping (``nightly.*``; defaults.yaml)."""

    min_passes: int  # nightlies in a row an xfail xpasses before its removal is proposed
    flaky_window: int  # nightlies looked back over for flipping outcomes
    keep: int  # nightlies the history keeps
    backups: int  # copies of the history kept beside it; 0: none
    shard_nights: int  # nightlies whose durations `shards` balances by


def github(sources: Mapping[str, Resolved]) -> GitHubSettings:
    """The ``github.*`` settings (their types checked where each source was read)."""
    return GitHubSettings(
        api_url=sources[Key.GITHUB_API_URL].value,
        repo=sources[Key.GITHUB_REPO].value,
        status_context=sources[Key.GITHUB_STATUS_CONTEXT].value,
        token_env=sources[Key.GITHUB_TOKEN_ENV].value,
        bot_login=sources[Key.GITHUB_BOT_LOGIN].value,
    )


def nightly(sources: Mapping[str, Resolved]) -> NightlySettings:
    """The ``nightly.*`` settings, each a count that works (``backups`` may be 0)."""
    counts = (Key.NIGHTLY_MIN_PASSES, Key.NIGHTLY_FLAKY_WINDOW, Key.NIGHTLY_KEEP,
              Key.NIGHTLY_BACKUPS, Key.NIGHTLY_SHARD_NIGHTS)  # fmt: skip
    for key in counts:
        source = sources[key]
        least = 0 if key is Key.NIGHTLY_BACKUPS else 1
        if isinstance(source.value, bool) or source.value < least:
            raise ConfigError(
                f"config key '{key}' ({source.origin}): must be a whole number of at "
                f"least {least}, got {source.value!r}"
            )
    return NightlySettings(
        min_passes=sources[Key.NIGHTLY_MIN_PASSES].value,
        flaky_window=sources[Key.NIGHTLY_FLAKY_WINDOW].value,
        keep=sources[Key.NIGHTLY_KEEP].value,
        backups=sources[Key.NIGHTLY_BACKUPS].value,
        shard_nights=sources[Key.NIGHTLY_SHARD_NIGHTS].value,
    )


_MACOS_VERSION = re.compile(r"^\d+(\.\d+){0,2}$")


def runners(source: Resolved) -> tuple[tuple[str, ...], dict[str, tuple[int, ...]]]:
    """The runner names and the macOS versions the ``runners:`` table gives.

    A list names the runners (a runner's version is then read from its name,
    ``macos-m2-15``); a table maps each name to its macOS version (``"15.0"``, ``15``, or
    null: read from the name).
    """
    value = source.value
    if isinstance(value, list):
        return tuple(str(name) for name in value), {}
    versions: dict[str, tuple[int, ...]] = {}
    for name, version in value.items():
        if version is None:
            continue
        if not _MACOS_VERSION.match(str(version)):
            raise ConfigError(
                f"config key 'runners' ({source.origin}): the macOS version of runner "
                f'{str(name)!r} must be a version such as "15.0" (or null: read from the '
                f"name), got {version!r}"
            )
        versions[str(name)] = tuple(int(part) for part in str(version).split("."))
    return tuple(str(name) for name in value), versions


def math(
    sources: Mapping[str, Resolved], packaged: Mapping[str, str], cache: Path | None
) -> MathSettings:
    """The ``math.*`` settings, each entry checked (a bad one names its key and origin);
    ``packaged``: the defaults' ``math.references``; ``cache``: ``math.cache`` resolved."""
    known_source = sources[Key.MATH_KNOWN]
    known = []
    for i, entry in enumerate(known_source.value):
        where = f"config key 'math.known' ({known_source.origin}), entry {i + 1}"
        if not isinstance(entry, Mapping) or set(entry) - {"op", "dtype", "reason"}:
            raise ConfigError(f"{where}: expected a mapping of op, dtype and reason")
        known.append(_known(where, **entry))
    refs_source = sources[Key.MATH_REFERENCES]
    for kernel, ref in refs_source.value.items():
        if not isinstance(ref, str) or not ref:
            raise ConfigError(
                f"config key 'math.references' ({refs_source.origin}): {kernel!r} must map to "
                '"opinfo.variant", "torch.fn" or "none"'
            )
    samples = sources[Key.MATH_MAX_SAMPLES]
    if samples.value < 0:
        raise ConfigError(f"config key 'math.max_samples' ({samples.origin}) must be >= 0")
    return MathSettings(
        cxx=sources[Key.MATH_CXX].value,
        known=tuple(known),
        # a file's table adds to (and overrides) the packaged one, it does not replace it
        references=MappingProxyType({**packaged, **refs_source.value}),
        max_samples=int(samples.value),
        cache=cache,
    )


def _known(
    where: str, /, *, op: object = None, dtype: object = "*", reason: object = None
) -> KnownDeviation:
    """One ``math.known`` entry, a keyword per key, each checked."""
    if not isinstance(op, str) or not op:
        raise ConfigError(f"{where}: 'op' must name a kernel or operator")
    if not isinstance(reason, str) or not reason.strip():
        raise ConfigError(f"{where}: 'reason' must say why the deviation is accepted")
    if dtype != "*":
        try:
            dtype = canonical(str(dtype))
        except KeyError:
            raise ConfigError(f"{where}: {dtype!r} is not a dtype (or '*')") from None
    return KnownDeviation(op, str(dtype), reason.strip())


def review(sources: Mapping[str, Resolved]) -> ReviewSettings:
    """The review, speed and tracker settings, each checked for a value that works."""

    def bad(key: Key, want: str) -> ConfigError:
        source = sources[key]
        return ConfigError(f"config key '{key}' ({source.origin}): {want}, got {source.value!r}")

    disable = sources[Key.REVIEW_DISABLE].value
    if not all(isinstance(x, str) and x for x in disable):
        raise bad(Key.REVIEW_DISABLE, "must list review check ids (mps-pipeline review --list)")
    threshold = float(sources[Key.SPEED_THRESHOLD].value)
    if not threshold >= 1.0:
        raise bad(Key.SPEED_THRESHOLD, "must be a ratio of at least 1.0 (1.10: 10% slower)")
    if sources[Key.SPEED_MIN_NIGHTS].value < 2:
        raise bad(Key.SPEED_MIN_NIGHTS, "must be at least 2 (a spread needs two nights)")
    if sources[Key.TRACKER_MAX_REQUESTS].value < 1:
        raise bad(Key.TRACKER_MAX_REQUESTS, "must be at least 1")
    return ReviewSettings(
        disable=tuple(disable),
        speed_threshold=threshold,
        speed_min_nights=sources[Key.SPEED_MIN_NIGHTS].value,
        tracker_query=sources[Key.TRACKER_QUERY].value,
        tracker_max_requests=sources[Key.TRACKER_MAX_REQUESTS].value,
    )
