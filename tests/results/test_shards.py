"""Shard planning (pipeline.results.shards): estimates, balance, determinism, stability."""

from __future__ import annotations

import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest

from pipeline.dtypes import TEST_KINDS
from pipeline.errors import PipelineError
from pipeline.results import shards

CLS = "TestConsistencyMPS"


def tid(stem: str, dtype: str = "float32", kind: str = "output_match") -> str:
    return f"{CLS}::test_{kind}_{stem}_mps_{dtype}"


def heavy_tailed(n: int, seed: int = 11, sigma: float = 1.75) -> dict[str, float]:
    """``n`` tests (8 dtypes of n/8 operators) with lognormal durations: most take a fraction
    of a second, a few take minutes, as the sweep's do."""
    rng = random.Random(seed)
    dtypes = ("float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "bool")
    return {tid(f"op{i // 8}", dtypes[i % 8]): rng.lognormvariate(-1.0, sigma) for i in range(n)}


def assert_partition(plan: shards.Plan, suite) -> None:
    """Every test of ``suite`` in exactly one shard, nothing else."""
    counts = Counter(t for tests in plan.shards for t in tests)
    assert set(counts) == set(suite) and set(counts.values()) == {1}


# ------------------------------------------------------------------------------ estimates


def test_ids_of_history_rows_and_their_operator():
    assert shards.test_id("test_mps.TestConsistencyMPS", "test_x") == "TestConsistencyMPS::test_x"
    assert shards.test_id("TestConsistencyMPS", "test_x") == "TestConsistencyMPS::test_x"
    assert shards.operator(tid("nn_functional_pad_constant", "float16")) == (
        "nn_functional_pad_constant"
    )
    assert shards.operator(tid("atan2", kind="output_grad_match")) == "atan2"
    assert shards.operator(f"{CLS}::test_something_else") is None


def test_medians_over_the_nights():
    assert shards.medians({"a": [3.0, 1.0, 2.0], "b": [1.0, 4.0], "c": []}) == {"a": 2.0, "b": 2.5}
    assert shards.medians({"neg": [-1.0]}) == {"neg": 0.0}  # no negative durations


def test_fallbacks_own_then_operator_then_all():
    measured = {tid("add"): 1.0, tid("add", "float16"): 3.0, tid("conv"): 100.0, tid("old"): 5.0}
    suite = [tid("add"), tid("add", "int8"), tid("conv", "float16"), tid("new"), "Other::x"]
    got = shards.estimate(suite, measured)
    assert got.seconds == {
        tid("add"): 1.0,  # its own
        tid("add", "int8"): 2.0,  # its operator's median: of 1 and 3
        tid("conv", "float16"): 100.0,
        tid("new"): 4.0,  # a new operator: the median of all measured tests (1, 3, 5, 100)
        "Other::x": 4.0,  # not a consistency test: no operator
    }
    assert (got.measured, got.by_operator, got.by_all, got.timed) == (1, 2, 2, True)
    assert list(got.seconds) == suite  # suite order


def test_without_any_duration_every_test_weighs_one():
    got = shards.estimate([tid("a"), tid("b")], {})
    assert got.seconds == {tid("a"): 1.0, tid("b"): 1.0} and not got.timed
    plan, _ = shards.plan(got.seconds, 2)
    assert [len(s) for s in plan.shards] == [1, 1]
    assert shards.to_json(plan, timed=False)["shards"][0]["seconds"] is None


def test_durations_all_0_s_are_no_times_a_plan_by_count():
    # reports that carry no times (every time="0"): LPT would put every test in shard 1
    suite = [tid(f"op{i}") for i in range(10)]
    for measured in ({t: 0.0 for t in suite}, {tid("gone"): 0.0, suite[0]: 0.0}):
        got = shards.estimate(suite, measured)
        assert not got.timed and got.recorded == len(measured)
        assert got.seconds == dict.fromkeys(suite, 1.0)
        plan, _ = shards.plan(got.seconds, 3)
        assert sorted(len(s) for s in plan.shards) == [3, 3, 4]  # equal counts
        assert_partition(plan, suite)
    # an operator's own 0 s is a time when others have some: a fast test, not an unknown one
    timed = shards.estimate(suite, {suite[0]: 0.0, suite[1]: 2.0})
    assert timed.timed and timed.seconds[suite[0]] == 0.0 and timed.recorded == 2


# ---------------------------------------------------------------------------------- plans


def test_lpt_partitions_and_is_deterministic():
    weights = heavy_tailed(1000)
    first, stability = shards.plan(weights, 5)
    assert_partition(first, weights)
    assert not stability.previous and stability.new == 1000 and stability.moved == 0
    assert all(list(tests) == sorted(tests) for tests in first.shards)
    # the order the tests come in changes nothing
    items = list(weights.items())
    random.Random(3).shuffle(items)
    again, _ = shards.plan(dict(items), 5)
    assert again == first == shards.lpt(weights, 5)
    # ties (equal weights) are broken by test id, then by the lower shard index
    tied, _ = shards.plan({tid("b"): 1.0, tid("a"): 1.0, tid("c"): 1.0}, 2)
    assert tied.shards == ((tid("a"), tid("c")), (tid("b"),))


def test_the_balance_goal_on_a_heavy_tailed_mix():
    """5,000 tests in 8 shards: LPT within 1.05 of the mean; count-based about 1.25."""
    weights = heavy_tailed(5000)
    started = time.perf_counter()
    plan, _ = shards.plan(weights, 8)
    took = time.perf_counter() - started
    count = shards.by_count(list(weights), weights, 8)
    assert_partition(plan, weights)
    assert_partition(count, weights)
    print(
        f"\nheavy-tailed mix, 5,000 tests, 8 shards: slowest/mean {plan.ratio:.4f} by duration "
        f"(LPT, {took * 1000:.0f} ms), {count.ratio:.3f} by count"
    )
    assert plan.ratio <= shards.TARGET
    assert count.ratio > 1.15  # what the plan is for: count-based sharding is far off
    assert max(weights.values()) > 10 * sorted(weights.values())[2500]  # it is heavy-tailed


def test_an_unchanged_history_gives_the_identical_plan():
    weights = heavy_tailed(2000)
    first, _ = shards.plan(weights, 4)
    again, stability = shards.plan(weights, 4, first.shards)
    assert again == first
    assert (stability.kept, stability.moved, stability.new, stability.gone) == (2000, 0, 0, 0)
    assert stability.previous and not stability.replanned


def test_one_changed_duration_moves_only_a_few_tests():
    weights = heavy_tailed(2000)
    first, _ = shards.plan(weights, 4)
    slower = dict(weights)
    test = first.shards[0][0]
    slower[test] += 0.2 * first.mean  # one test now takes a fifth of a shard longer
    second, stability = shards.plan(slower, 4, first.shards)
    assert_partition(second, slower)
    assert second.ratio <= shards.TARGET
    assert 0 < stability.moved <= 20 and not stability.replanned
    moved = {t for i, tests in enumerate(second.shards) for t in tests if t not in first.shards[i]}
    assert len(moved) == stability.moved and stability.kept == 2000 - stability.moved
    # a small change that keeps the balance within the target moves nothing
    nudged = dict(weights)
    nudged[test] *= 1.5
    _, calm = shards.plan(nudged, 4, first.shards)
    assert calm.moved == 0


def test_new_tests_are_placed_and_vanished_ones_dropped():
    weights = heavy_tailed(800)
    first, _ = shards.plan(weights, 4)
    tonight = dict(weights)
    gone = list(tonight)[:30]
    for test in gone:
        del tonight[test]
    new = {tid(f"new{i}"): 0.5 for i in range(50)}
    tonight.update(new)
    second, stability = shards.plan(tonight, 4, first.shards)
    assert_partition(second, tonight)
    assert (stability.new, stability.gone, stability.moved) == (50, 30, 0)
    assert second.ratio <= shards.TARGET
    kept = {t: i for i, tests in enumerate(first.shards) for t in tests}
    assert all(kept[t] == i for i, tests in enumerate(second.shards) for t in tests if t in kept)


def test_a_different_shard_count_keeps_what_it_can():
    weights = heavy_tailed(1200)
    three, _ = shards.plan(weights, 3)
    for n in (2, 5):
        plan, stability = shards.plan(weights, n, three.shards)
        assert_partition(plan, weights)
        assert len(plan.shards) == n and plan.ratio <= shards.TARGET
    _, fewer = shards.plan(weights, 2, three.shards)
    assert fewer.new == len(three.shards[2])  # shard 3's tests are placed anew


def test_a_plan_that_cannot_be_mended_in_place_is_replanned():
    """Two big tests stuck together: no single move narrows the gap, a fresh LPT does."""
    weights = {tid("big1"): 10.0, tid("big2"): 10.0, **{tid(f"s{i}"): 1.0 for i in range(10)}}
    previous = [[tid("big1"), tid("big2")], [tid(f"s{i}") for i in range(10)]]
    plan, stability = shards.plan(weights, 2, previous)
    assert plan.loads == (15.0, 15.0)
    assert stability.replanned and stability.moved > 0
    # numbered to keep most tests where they were: the small ones mostly stay in shard 2
    assert sum(t in previous[1] for t in plan.shards[1]) >= 5


def test_tests_of_no_duration_never_make_it_loop():
    weights = {tid("slow"): 10.0, **{tid(f"zero{i}"): 0.0 for i in range(100)}}
    previous = [list(weights), []]
    plan, stability = shards.plan(weights, 2, previous)
    assert_partition(plan, weights)
    assert stability.moved == 0  # moving a 0 s test helps nothing; the 10 s one cannot help


def test_bad_arguments():
    with pytest.raises(PipelineError, match="at least 1"):
        shards.plan({tid("a"): 1.0}, 0)
    with pytest.raises(PipelineError, match="target ratio"):
        shards.plan({tid("a"): 1.0}, 2, target=0.9)
    empty, _ = shards.plan({}, 3)
    assert empty.shards == ((), (), ()) and empty.ratio == 1.0


def test_the_document_round_trips_and_bad_ones_are_named():
    plan, _ = shards.plan(heavy_tailed(40), 3)
    doc = shards.to_json(plan)
    assert doc["schema"] == shards.SCHEMA and [s["index"] for s in doc["shards"]] == [1, 2, 3]
    assert [tuple(t) for t in shards.from_json(doc, "p.json")] == list(plan.shards)
    assert doc["shards"][0]["seconds"] == round(plan.loads[0], 6)
    for bad, why in (
        ([], "the top level must be dict, got list"),
        ({"schema": 1}, "shards must be list, got NoneType"),
        ({"schema": 9, "shards": []}, "schema is 9, this mps-pipeline reads 1"),
        ({"schema": 1, "shards": [{"index": 2, "tests": []}]}, r"shards\[0\].index is not 1"),
        ({"schema": 1, "shards": [{"index": 1, "tests": [1]}]}, r"tests\[0\] must be str"),
        ({"schema": 1, "shards": [], "shard": []}, r"unknown key\(s\) 'shard'"),
    ):
        with pytest.raises(PipelineError, match=f"p.json: not a shard plan .*{why}"):
            shards.from_json(bad, "p.json")


# --------------------------------------------------------- the real op_db-sized suite


@pytest.mark.realdata
@pytest.mark.slow
def test_the_real_suite_is_planned_whole(tmp_path: Path):
    """The torch 2.13.0 wheel's OpInfos × dtypes × both kinds, each test in one shard."""
    pytest.importorskip("expecttest")  # op_db's own import needs it
    from pipeline.tree.opinfo import load_opinfos
    from pipeline.tree.source import TreeSource

    # op_db's dump is keyed by a hash of its sources: shared with the other realdata tests
    cache = Path(tempfile.gettempdir()) / "mps-pipeline-tests" / "opinfo-cache"
    records = load_opinfos(TreeSource(tmp_path, cache, sys.executable, None))
    suite = [t for r in records for kind in TEST_KINDS for t in r.test_ids(kind)]
    assert len(records) > 650 and len(suite) > 4000
    assert len(set(suite)) == len(suite)  # one id per OpInfo × dtype × kind
    # durations for most of them, by operator (grad tests slower), some operators unmeasured
    rng = random.Random(5)
    scale = {r.stem: rng.lognormvariate(-1.0, 1.5) for r in records}
    measured = {
        t: scale[shards.operator(t)] * (3.0 if "_grad_" in t else 1.0) * rng.uniform(0.5, 1.5)
        for t in suite
        if rng.random() < 0.9
    }
    estimates = shards.estimate(suite, measured)
    assert estimates.by_operator > 0 and estimates.by_all > 0
    started = time.perf_counter()
    plan, _ = shards.plan(estimates.seconds, 3)
    took = time.perf_counter() - started
    assert_partition(plan, suite)
    assert plan.ratio <= shards.TARGET
    count = shards.by_count(suite, estimates.seconds, 3)
    print(
        f"\nreal suite: {len(suite):,} tests of {len(records)} OpInfos in 3 shards, "
        f"slowest/mean {plan.ratio:.4f} (count-based {count.ratio:.3f}), planned in "
        f"{took * 1000:.0f} ms"
    )
    again, stability = shards.plan(estimates.seconds, 3, plan.shards)
    assert again == plan and stability.moved == 0
