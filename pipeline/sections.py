"""The settings' sections (github, math, review/speed/tracker, runners): their frozen models,
and the checks that make them from resolved values, each error naming its key and origin.

:mod:`pipeline.config` resolves every setting (defaults, file, variables, flags) and builds
:class:`~pipeline.config.Settings` out of these.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pipeline.dtypes import canonical
from pipeline.errors import ConfigError


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
    # the compiled functors and torch's answers; None: <state_dir>/cache/math
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


def nightly(sources: Mapping[str, Resolved]) -> NightlySettings:
    """The ``nightly.*`` settings, each a count that works (``backups`` may be 0)."""
    values = {}
    for name in ("min_passes", "flaky_window", "keep", "backups", "shard_nights"):
        source = sources[f"nightly.{name}"]
        least = 0 if name == "backups" else 1
        if isinstance(source.value, bool) or source.value < least:
            raise ConfigError(
                f"config key 'nightly.{name}' ({source.origin}): must be a whole number of at "
                f"least {least}, got {source.value!r}"
            )
        values[name] = source.value
    return NightlySettings(**values)


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
    known_source = sources["math.known"]
    known = []
    for i, entry in enumerate(known_source.value):
        where = f"config key 'math.known' ({known_source.origin}), entry {i + 1}"
        if not isinstance(entry, Mapping) or set(entry) - {"op", "dtype", "reason"}:
            raise ConfigError(f"{where}: expected a mapping of op, dtype and reason")
        op, dtype, reason = entry.get("op"), entry.get("dtype", "*"), entry.get("reason")
        if not isinstance(op, str) or not op:
            raise ConfigError(f"{where}: 'op' must name a kernel or operator")
        if not isinstance(reason, str) or not reason.strip():
            raise ConfigError(f"{where}: 'reason' must say why the deviation is accepted")
        if dtype != "*":
            try:
                dtype = canonical(str(dtype))
            except KeyError:
                raise ConfigError(f"{where}: {dtype!r} is not a dtype (or '*')") from None
        known.append(KnownDeviation(op, dtype, reason.strip()))
    refs_source = sources["math.references"]
    for kernel, ref in refs_source.value.items():
        if not isinstance(ref, str) or not ref:
            raise ConfigError(
                f"config key 'math.references' ({refs_source.origin}): {kernel!r} must map to "
                '"opinfo.variant", "torch.fn" or "none"'
            )
    samples = sources["math.max_samples"]
    if samples.value < 0:
        raise ConfigError(f"config key 'math.max_samples' ({samples.origin}) must be >= 0")
    return MathSettings(
        cxx=sources["math.cxx"].value,
        known=tuple(known),
        # a file's table adds to (and overrides) the packaged one, it does not replace it
        references=MappingProxyType({**packaged, **refs_source.value}),
        max_samples=int(samples.value),
        cache=cache,
    )


def review(sources: Mapping[str, Resolved]) -> ReviewSettings:
    """The review, speed and tracker settings, each checked for a value that works."""

    def bad(key: str, want: str) -> ConfigError:
        source = sources[key]
        return ConfigError(f"config key '{key}' ({source.origin}): {want}, got {source.value!r}")

    disable = sources["review.disable"].value
    if not all(isinstance(x, str) and x for x in disable):
        raise bad("review.disable", "must list review check ids (mps-pipeline review --list)")
    threshold = float(sources["speed.threshold"].value)
    if not threshold >= 1.0:
        raise bad("speed.threshold", "must be a ratio of at least 1.0 (1.10: 10% slower)")
    if sources["speed.min_nights"].value < 2:
        raise bad("speed.min_nights", "must be at least 2 (a spread needs two nights)")
    if sources["tracker.max_requests"].value < 1:
        raise bad("tracker.max_requests", "must be at least 1")
    return ReviewSettings(
        disable=tuple(disable),
        speed_threshold=threshold,
        speed_min_nights=sources["speed.min_nights"].value,
        tracker_query=sources["tracker.query"].value,
        tracker_max_requests=sources["tracker.max_requests"].value,
    )
