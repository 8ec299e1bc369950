"""Upstream's own migrations, replayed: the release before NEWEST, edited by the tool as
upstream's changes ask, must give NEWEST's native_functions.yaml and common_mps.py.

From those two files alone (no kernel sources, no op_db):

- **dispatch**: every operator one of whose entries changed how MPS is served is folded
  with :func:`fold_mps_dispatch` (the yaml step of ``migrate``), one after the other on one
  text. Upstream's change is either a fold into the row CPU and CUDA share (the tool's
  job), or a new MPS-only kernel written by hand (not a migration: nothing to replay).
- **xfails**: every entry upstream removed or narrowed is judged by :func:`decide_xfails`
  on the results the nightly would see were upstream right (the dropped dtypes xpass on the
  runners the entry's list applies to, the dtypes it keeps still xfail), and the decisions
  go through the xfail editor, as the nightly's proposal does.

The figures are the issue's measurement; they are printed (``-s``) and asserted per pair.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from pipeline.edit.native_yaml import fold_mps_dispatch
from pipeline.edit.xfails import apply_xfail_changes
from pipeline.guide.xfails import to_changes
from pipeline.results.decide import (
    XfailDecision,
    decide_xfails,
    entry_kind,
    list_bound,
    runner_version,
    version_key,
)
from pipeline.results.junit import CaseResult, Outcome
from pipeline.tree import common_mps, native_yaml, paths
from pipeline.tree.native_yaml import MpsKind, NativeFunctions
from pipeline.tree.opinfo import OpInfoRecord
from tests.conftest import fetched
from tests.releases import NEWEST, RELEASES, Release

BEFORE = RELEASES[-2]  # the release before NEWEST
# one runner per macOS the nightly covers: a macOS-version list applies to some of them
RUNNERS = ("macos-m1-14", "macos-m2-15", "macos-m2-26")
GRAD_DTYPES = ("float32", "float16")

# What the replay of each pair gives, read from the two releases' files. A new NEWEST
# adds its pair; an entry that changes says what the tool now does differently.
EXPECTED = {
    ("2.14.1", "2.15.0"): {
        "folds": 19,
        # upstream wrote these MPS-only kernels by hand: the tool does not (nor should)
        "hand_written": {"_grouped_mm", "_int_mm", "_scaled_mm_v2", "logspace", "record_stream"},
        # overloads the tool folds beside upstream's: it folds every MPS-only overload of
        # the operator, upstream migrated pow.Tensor_Tensor_out alone
        "beyond_upstream": {"pow.Scalar_out"},
        "removed": 41,
        "narrowed": 0,
    },
}


@dataclass(frozen=True)
class DispatchReplay:
    changed: dict[str, tuple[str, ...]]  # operator -> its entries whose MPS serving changed
    folds: tuple[str, ...]  # operators upstream folded into a shared row
    replayed: tuple[str, ...]  # those whose every changed entry the replay changed alike
    hand_written: tuple[str, ...]  # operators upstream gave a new MPS-only kernel
    missed: tuple[str, ...]  # entries upstream folded that the replay did not
    beyond: tuple[str, ...]  # entries the replay folded that upstream did not
    replayed_text: str


def _mps(entry: native_yaml.NativeFunction) -> tuple[str | None, MpsKind]:
    return entry.kernel_for("MPS"), entry.mps_kind


def replay_dispatch(before_text: str, after: NativeFunctions) -> DispatchReplay:
    before = native_yaml.parse(before_text, paths.NATIVE_YAML)
    now = {e.full_name: e for e in after.entries}
    changed: dict[str, list[str]] = {}
    for entry in before.entries:
        if entry.full_name in now and _mps(entry) != _mps(now[entry.full_name]):
            changed.setdefault(entry.operator, []).append(entry.full_name)
    # a fold leaves every changed entry shared; anything else is a kernel of MPS's own
    folds = [
        op for op, names in changed.items() if all(now[n].mps_kind is MpsKind.SHARED for n in names)
    ]
    text = before_text
    ops = before.operators()
    for op in folds:
        # as the migration plans it: MPS given to entries without only in the add workflow
        add = native_yaml.adds_mps(e.mps_kind for e in ops[op])
        text = fold_mps_dispatch(text, paths.NATIVE_YAML, op, add=add).edit.after
    replayed = {e.full_name: e for e in native_yaml.parse(text, paths.NATIVE_YAML).entries}
    upstream = {n for op in folds for n in changed[op]}
    differ = {
        n
        for n, e in replayed.items()
        if n in now and e.kernel_for("MPS") != now[n].kernel_for("MPS")
    }
    hand_written = [op for op in changed if op not in folds]
    return DispatchReplay(
        changed={op: tuple(names) for op, names in changed.items()},
        folds=tuple(folds),
        replayed=tuple(op for op in folds if not differ & set(changed[op])),
        hand_written=tuple(sorted(hand_written)),
        missed=tuple(sorted(differ & upstream)),
        beyond=tuple(sorted(differ - upstream - {n for op in hand_written for n in changed[op]})),
        replayed_text=text,
    )


def _applies(entry: common_mps.XfailEntry, runner: str) -> bool:
    """Does ``entry``'s list decorate the dense consistency tests on ``runner``?"""
    name = entry.list.upper()
    if "SPARSE" in name or "SKIP" in name:
        return False
    bound = list_bound(entry.list) if "MACOS" in name else None
    if bound is None:
        return True
    side, at = bound
    version = runner_version(runner)
    earlier = version is not None and version_key(version) < version_key(at)
    return earlier if side == "BEFORE" else not earlier


def nightly_if_upstream_was_right(
    entries: Sequence[common_mps.XfailEntry], kept: dict[tuple[str, str, str], tuple | None]
) -> tuple[dict[str, list[CaseResult]], list[OpInfoRecord]]:
    """The results of ``entries``' keys on every runner: a dtype an entry lists xpasses
    where upstream dropped it from that entry, xfails where an entry keeps it, else passes.
    ``kept``: each (list, function, key)'s dtypes in the newer file (absent: removed)."""
    runs: dict[str, list[CaseResult]] = {r: [] for r in RUNNERS}
    infos = []
    for key in dict.fromkeys(e.key for e in entries):
        mine = [e for e in entries if e.key == key]
        tested = tuple(sorted({*GRAD_DTYPES, *(d for e in mine for d in e.dtypes or ())}))
        infos.append(OpInfoRecord(key, "", key, (), tested))
        stem = infos[-1].stem
        for kind in dict.fromkeys(k for e in mine if (k := entry_kind(e))):
            dtypes = tested if kind == "output_match" else GRAD_DTYPES
            for runner in RUNNERS:
                for dtype in dtypes:
                    covering = [
                        e
                        for e in mine
                        if entry_kind(e) == kind
                        and _applies(e, runner)
                        and (e.dtypes is None or dtype in e.dtypes)
                    ]
                    still = [e for e in covering if _keeps(kept, e, dtype)]
                    outcome = (
                        Outcome.XFAIL if still else Outcome.XPASS if covering else Outcome.PASS
                    )
                    name = f"test_{kind}_{stem}_mps_{dtype}"
                    runs[runner].append(
                        CaseResult(
                            "TestConsistencyMPS",
                            name,
                            kind,
                            stem,
                            dtype,
                            outcome,
                            False,
                            1,
                            "",
                            0.1,
                            "replay.xml",
                        )  # fmt: skip
                    )
    return runs, infos


def _keeps(kept: dict, entry: common_mps.XfailEntry, dtype: str) -> bool:
    triple = (entry.list, entry.function, entry.key)
    if triple not in kept:
        return False
    now = kept[triple]
    return now is None or dtype in now


@dataclass(frozen=True)
class XfailReplay:
    removed: int
    narrowed: int
    added: tuple[tuple[str, str, str], ...]  # new entries upstream wrote: not a removal
    decisions: tuple[XfailDecision, ...]
    replayed: dict[tuple[str, str, str], tuple | None]
    expected: dict[tuple[str, str, str], tuple | None]
    text: str


def _triples(model: common_mps.CommonMps) -> dict[tuple[str, str, str], tuple | None]:
    found = {}
    for e in model.entries:
        triple = (e.list, e.function, e.key)
        assert triple not in found, f"{triple} twice: the replay compares entries one to one"
        found[triple] = e.dtypes
    return found


def replay_xfails(before_text: str, after: common_mps.CommonMps) -> XfailReplay:
    before = common_mps.parse(before_text, paths.COMMON_MPS)
    old, new = _triples(before), _triples(after)
    removed = [t for t in old if t not in new]
    narrowed = [t for t in old if t in new and new[t] != old[t]]
    keys = {key for _, _, key in (*removed, *narrowed)}
    entries = [e for e in before.entries if e.key in keys]
    runs, infos = nightly_if_upstream_was_right(entries, new)
    decisions = decide_xfails(entries, runs, RUNNERS, opinfos=infos)
    edit = apply_xfail_changes(before_text, paths.COMMON_MPS, to_changes(decisions))
    return XfailReplay(
        removed=len(removed),
        narrowed=len(narrowed),
        added=tuple(t for t in new if t not in old),
        decisions=decisions,
        replayed=_triples(common_mps.parse(edit.after, paths.COMMON_MPS)),
        expected={t: dtypes for t, dtypes in new.items() if t in old},
        text=edit.after,
    )


# --- the replay itself, on small files ------------------------------------------------------

YAML = """\
- func: mix.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)
  dispatch:
    CPU, CUDA: mix_out
    MPS: mix_out_mps

- func: mix.Scalar_out(Tensor self, Scalar s, *, Tensor(a!) out) -> Tensor(a!)
  dispatch:
    CPU, CUDA: mix_scalar_out
    MPS: mix_scalar_out_mps

- func: fresh(Tensor self) -> Tensor
  dispatch:
    CPU: fresh_cpu
    CUDA: fresh_cuda
"""


def test_a_fold_replays_a_hand_written_kernel_does_not_and_extra_overloads_show() -> None:
    # upstream folded mix.out alone and wrote fresh's MPS kernel by hand
    after = YAML.replace(
        "    CPU, CUDA: mix_out\n    MPS: mix_out_mps\n", "    CPU, CUDA, MPS: mix_out\n"
    )
    after = after.replace("    CUDA: fresh_cuda\n", "    CUDA: fresh_cuda\n    MPS: fresh_mps\n")
    replay = replay_dispatch(YAML, native_yaml.parse(after, paths.NATIVE_YAML))
    assert replay.changed == {"mix": ("mix.out",), "fresh": ("fresh",)}
    assert (replay.folds, replay.replayed, replay.hand_written) == (("mix",), ("mix",), ("fresh",))
    assert (replay.missed, replay.beyond) == ((), ("mix.Scalar_out",))
    # an upstream fold the tool cannot make (no row CPU and CUDA share) is missed
    odd = YAML.replace("CPU, CUDA: mix_out", "CPU: mix_out\n    CUDA: mix_out_cuda")
    folded = odd.replace("    CPU: mix_out\n", "    CPU, MPS: mix_out\n").replace(
        "    MPS: mix_out_mps\n", ""
    )
    replay = replay_dispatch(odd, native_yaml.parse(folded, paths.NATIVE_YAML))
    assert (replay.folds, replay.replayed, replay.missed) == (("mix",), (), ("mix.out",))


COMMON_MPS = """\
import torch

def mps_ops_modifier(ops):
    MACOS_BEFORE_15_0_XFAILLIST = {
        "cosh": [torch.float16],
    }
    UNIMPLEMENTED_XFAILLIST = {
        "cosh": None,
        "mix": [torch.float32, torch.float16],
        "sinh": [torch.int64],
    }
    UNIMPLEMENTED_XFAILLIST_SPARSE = {
        "mix": None,
    }

def mps_ops_grad_modifier(ops):
    XFAILLIST_GRAD = {
        "mix": [torch.float16],
    }
"""


def test_xfail_removals_and_narrowings_replay_through_the_nightlys_decisions() -> None:
    after = (
        COMMON_MPS.replace('        "cosh": [torch.float16],\n', "")
        .replace('        "cosh": None,\n', "")
        .replace('"mix": [torch.float32, torch.float16]', '"mix": [torch.float16]')
    )
    replay = replay_xfails(COMMON_MPS, common_mps.parse(after, paths.COMMON_MPS))
    assert (replay.removed, replay.narrowed, replay.added) == (2, 1, ())
    actions = {(d.list, d.key): d.action for d in replay.decisions}
    assert actions == {
        ("MACOS_BEFORE_15_0_XFAILLIST", "cosh"): "delete",
        ("UNIMPLEMENTED_XFAILLIST", "cosh"): "delete",
        ("UNIMPLEMENTED_XFAILLIST", "mix"): "drop_dtypes",
        ("UNIMPLEMENTED_XFAILLIST_SPARSE", "mix"): "keep",  # the sparse tests: not judged
        ("XFAILLIST_GRAD", "mix"): "keep",  # its float16 still xfails
    }
    assert replay.replayed == replay.expected


# --- the releases -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pair() -> tuple[Release, Release]:
    return fetched(BEFORE), fetched(NEWEST)


@pytest.fixture(scope="module")
def expected(pair) -> dict:
    older, newer = pair
    key = (older.version, newer.version)
    if key not in EXPECTED:
        pytest.fail(f"no expectation for the replay {key}: run it and add its row", False)
    return EXPECTED[key]


@pytest.mark.slow  # over 0.5 CPU-s: out of the fast tier
@pytest.mark.realdata
def test_upstreams_dispatch_changes_replay_from_the_yaml_alone(pair, expected, tmp_path) -> None:
    older, newer = pair
    after = native_yaml.parse(newer.native_yaml.read_text(), paths.NATIVE_YAML)
    replay = replay_dispatch(older.native_yaml.read_text(), after)
    print(
        f"\n{older.version} -> {newer.version}: {len(replay.changed)} operators changed how "
        f"MPS is served ({sum(map(len, replay.changed.values()))} entries); "
        f"{len(replay.folds)} folds into the shared row, {len(replay.replayed)} replayed; "
        f"{len(replay.hand_written)} new MPS-only kernels ({', '.join(replay.hand_written)}); "
        f"folded beyond upstream: {', '.join(replay.beyond) or 'none'}"
    )
    assert len(replay.folds) == len(replay.replayed) == expected["folds"]
    assert set(replay.hand_written) == expected["hand_written"]
    # every change upstream made by folding, the tool's fold makes: no entry missed
    assert replay.missed == ()
    assert set(replay.beyond) == expected["beyond_upstream"]
    # and the file the replay leaves is one the older release's own torchgen accepts, with
    # the MPS kernels our reader sees
    path = tmp_path / "native_functions.yaml"
    path.write_text(replay.replayed_text)
    theirs = older.torchgen_mps(path)
    ours = native_yaml.parse(replay.replayed_text, paths.NATIVE_YAML)
    assert theirs == {
        e.full_name: e.kernel_for("MPS")
        for e in ours.entries
        if e.kernel_for("MPS") is not None and e.full_name in theirs
    }


@pytest.mark.slow  # over 0.5 CPU-s: out of the fast tier
@pytest.mark.realdata
def test_upstreams_xfail_removals_replay_from_common_mps_alone(pair, expected) -> None:
    older, newer = pair
    after = common_mps.parse(newer.common_mps.read_text(), paths.COMMON_MPS)
    replay = replay_xfails(older.common_mps.read_text(), after)
    actions = [d.action for d in replay.decisions]
    print(
        f"\n{older.version} -> {newer.version}: {replay.removed} xfail entries removed, "
        f"{replay.narrowed} narrowed; the nightly's decisions on them: "
        f"{actions.count('delete')} delete, "
        f"{len(actions) - actions.count('delete') - actions.count('keep')} narrow, "
        f"{actions.count('keep')} keep (the same keys' entries upstream kept); "
        f"added upstream (no removal): {len(replay.added)}"
    )
    assert (replay.removed, replay.narrowed) == (expected["removed"], expected["narrowed"])
    # one decision that edits per entry upstream edited: a delete per removal
    assert actions.count("delete") == replay.removed
    assert len(actions) - actions.count("keep") == replay.removed + replay.narrowed
    # the edited file holds exactly the entries upstream's does, dtypes included
    assert replay.replayed == replay.expected
    compile(replay.text, paths.COMMON_MPS, "exec")
