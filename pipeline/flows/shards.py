"""The nightly sweep's shards, balanced by each test's duration (``shards``).

The suite is every consistency test of the tree: its OpInfos × their dtypes × the
configured test kinds (``test.kinds``). When the OpInfo metadata cannot be read (the
aggregation job on Linux without that night's export), the suite is the tests the
history has durations for, with a warning. Durations are each test's median over the last
``nights`` nightlies of the history (``nightly.shard_nights``), read without writing to it;
how tests without any are estimated and how the plan stays stable is
:mod:`pipeline.results.shards`. The plan is written to ``out`` (default
``<state_dir>/shards.json``); the next run starts from it (or from ``previous``), so a test
changes shard only when balance needs it. A damaged history, an unreadable ``previous``
file or an empty suite is an input error (exit 2).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pipeline import state
from pipeline.config import Settings
from pipeline.errors import PipelineError
from pipeline.fsio import write_atomic
from pipeline.results import history, shards
from pipeline.results.junit import parse_test_id
from pipeline.tree.opinfo import load_opinfos


@dataclass(frozen=True)
class ShardRequest:
    """What ``shards`` was asked: None is the setting's or the state directory's."""

    num_shards: int
    nights: int | None = None
    history: str | None = None  # a file or a postgresql:// URL (None: the setting's)
    out: Path | None = None
    previous: Path | None = None
    target: float = shards.TARGET


def plan_shards(settings: Settings, request: ShardRequest) -> shards.PlanRun:
    """Plan the shards, write the plan to its file, and say how it was made."""
    nights = settings.nightly.shard_nights if request.nights is None else request.nights
    if nights < 1:
        raise PipelineError("shards: --nights must be at least 1")
    at = history.locate(request.history, settings)
    out = request.out or state.shard_plan(settings.state_dir)
    warnings: list[str] = []
    samples = _samples(at, nights)
    suite, source = _suite(settings, samples, warnings)
    previous, previous_path = _previous(request.previous, out, warnings)
    estimates = shards.estimate(suite, shards.medians(samples))
    result, stability = shards.plan(
        estimates.seconds, request.num_shards, previous, target=request.target
    )
    document = shards.to_json(result, timed=estimates.timed)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, json.dumps(document, indent=1) + "\n")
    return shards.PlanRun(
        plan=result,
        stability=stability,
        estimates=estimates,
        by_count=shards.by_count(suite, estimates.seconds, request.num_shards),
        source=source,
        history=str(at),  # its secrets hidden
        previous=previous_path,
        out=out,
        nights=nights,
        target=request.target,
        warnings=tuple(warnings),
    )


def _samples(at: history.HistoryLocation, nights: int) -> dict[str, list[float]]:
    """Test id -> its seconds in the last ``nights`` nightlies; {} without a history."""
    if not history.found(at):
        return {}
    db = history.reader(at)  # a damaged history: exit 2, untouched
    try:
        found = history.durations(db, nights)
    finally:
        db.close()
    samples: dict[str, list[float]] = {}
    for (classname, name), seconds in found.items():
        samples.setdefault(shards.test_id(classname, name), []).extend(seconds)
    return samples


def _suite(
    settings: Settings, samples: dict[str, list[float]], warnings: list[str]
) -> tuple[list[str], str]:
    """The consistency tests to plan, and where they come from."""
    kinds = " and ".join(settings.test_kinds)
    try:
        records = load_opinfos(settings.tree)
    except PipelineError as exc:
        suite = sorted(
            t
            for t in samples
            if (p := parse_test_id(t.rpartition("::")[2])) and p[0] in settings.test_kinds
        )
        if not suite:
            raise PipelineError(
                f"shards: no suite to plan: the OpInfo metadata cannot be read ({exc}), and the "
                "history has no durations to take the tests from"
            ) from exc
        warnings.append(
            f"the OpInfo metadata cannot be read ({exc}); planning the {len(suite)} tests "
            "the history has durations for (run-sweep.sh runs a test the plan lacks in the "
            "shard its hash picks)"
        )
        return suite, "the tests in the history"
    suite = list(
        dict.fromkeys(t for r in records for kind in settings.test_kinds for t in r.test_ids(kind))
    )
    if not suite:
        raise PipelineError(f"shards: the tree's {len(records)} OpInfos instantiate no test")
    return suite, f"the tree's {len(records)} OpInfos × dtypes × {kinds}"


def _previous(
    given: Path | None, out: Path, warnings: list[str]
) -> tuple[list[list[str]] | None, Path | None]:
    """The previous plan's shards: ``--previous`` (which must be readable), else the plan
    at ``out`` when there is one (unreadable: a warning, and a plan from scratch)."""
    path = given or out
    if given is None and not out.is_file():
        return None, None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return shards.from_json(doc, str(path)), path
    except (OSError, ValueError, PipelineError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        message = f"{path}: cannot read the previous plan ({why})"
        if given is not None:
            raise PipelineError(f"shards: --previous {message}") from exc
        warnings.append(f"{message}; planning from scratch")
        return None, None
