"""One shard of a ``shards`` plan (``-p mps_pipeline_shard``), loaded by ci/scripts/run-sweep.sh.

    pytest test_mps.py -p mps_pipeline_shard --mps-shard-plan PLAN --mps-shard 2

keeps the collected tests that PLAN (the document ``python -m pipeline shards`` writes)
puts in shard 2; of the tests PLAN has in no shard (new since it was made), those whose
CRC-32 of ``Class::name`` modulo the plan's shard count is 1 (shard 2, counting from 0).
So every collected test runs in exactly one shard. Tests of the plan that were not
collected are ignored. Why not node ids on pytest's command line (or in an ``@file``,
pytest 8.2+): one id test_mps.py does not define ("not found") makes pytest run nothing
(exit 4), tests missing from the plan would run nowhere, and 2,000 ids approach ARG_MAX.

As a script, ``python mps_pipeline_shard.py PLAN SHARD NUM_SHARDS`` prints how many tests
shard SHARD of PLAN has, or says on stdout why PLAN is not a plan of NUM_SHARDS shards
and exits 1 (run-sweep.sh then shards by ``--shard-id/--num-shards``).

It imports nothing but pytest and the standard library: it runs in the interpreter under
test, not in mps-pipeline's.
"""

from __future__ import annotations

import json
import sys
import zlib

import pytest

SCHEMA = 1  # the plan document's, pipeline.results.shards.SCHEMA


def read_plan(path: str) -> list[list[str]]:
    """The test ids of each shard, shard 1 first; ValueError saying why it is not a plan."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as exc:
        raise ValueError(f"{path}: cannot read it ({exc.strerror or exc})") from exc
    except ValueError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from exc
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ValueError(f"{path}: not a shard plan of schema {SCHEMA}")
    shards = doc.get("shards")
    if not isinstance(shards, list) or not shards:
        raise ValueError(f"{path}: no shards")
    tests = []
    for n, shard in enumerate(shards, 1):
        if not isinstance(shard, dict) or shard.get("index") != n:
            raise ValueError(f"{path}: shard {n} is not an object with index {n}")
        ids = shard.get("tests")
        if not isinstance(ids, list) or not all(isinstance(t, str) for t in ids):
            raise ValueError(f"{path}: shard {n}'s tests are not a list of test ids")
        tests.append(ids)
    return tests


def key(nodeid: str) -> str:
    """``test/test_mps.py::TestConsistencyMPS::test_x`` -> ``TestConsistencyMPS::test_x``."""
    return "::".join(nodeid.split("::")[-2:])


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mps-pipeline shard plan")
    group.addoption("--mps-shard-plan", help="a plan of `python -m pipeline shards`")
    group.addoption("--mps-shard", type=int, help="the shard of the plan to run (1-based)")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    path = config.getoption("mps_shard_plan")
    if not path:
        return
    shard = config.getoption("mps_shard")
    try:
        plan = read_plan(path)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from exc
    if shard is None or not 1 <= shard <= len(plan):
        raise pytest.UsageError(f"--mps-shard must be 1 to {len(plan)} for {path}")
    where = {test: n for n, tests in enumerate(plan, 1) for test in tests}
    keep: list[pytest.Item] = []
    deselected: list[pytest.Item] = []
    unplanned = 0
    for item in items:
        test = key(item.nodeid)
        planned = where.get(test)
        if planned is None:
            unplanned += 1
            planned = zlib.crc32(test.encode()) % len(plan) + 1
        (keep if planned == shard else deselected).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = keep
    config.stash[_STATS] = (shard, len(plan), len(plan[shard - 1]), len(keep), unplanned)


_STATS = pytest.StashKey[tuple]()


def pytest_report_collectionfinish(config: pytest.Config) -> list[str]:
    stats = config.stash.get(_STATS, None)
    if stats is None:
        return []
    shard, total, planned, kept, unplanned = stats
    return [
        f"mps shard plan: shard {shard} of {total}: {kept} tests to run of {planned} planned "
        f"here; {unplanned} collected tests were in no shard of the plan (spread by CRC-32)"
    ]


def main(argv: list[str]) -> int:
    if len(argv) != 3 or not argv[1].isdigit() or not argv[2].isdigit():
        print("usage: mps_pipeline_shard.py PLAN SHARD NUM_SHARDS")
        return 2
    path, shard, num_shards = argv[0], int(argv[1]), int(argv[2])
    try:
        plan = read_plan(path)
    except ValueError as exc:
        print(exc)
        return 1
    if len(plan) != num_shards:
        print(f"{path}: a plan of {len(plan)} shards, not {num_shards}")
        return 1
    if not 1 <= shard <= num_shards:
        print(f"shard {shard} is not one of 1 to {num_shards}")
        return 1
    print(len(plan[shard - 1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
