"""A regression's suspects: real commits in a git copy of the sandbox, each analysed once.

The range holds three commits: atan2's own functor, a registration macro atan2 shares with
copysign and div, and a docs change; they are named own first, shared next, docs never.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.impact import affected
from pipeline.impact.analyze import OWN, SHARED
from pipeline.impact.suspects import SWEEP, CommitAnalysis
from tests.conftest import commit, git
from tests.impact.test_impact_sandbox import (
    BINARY_KERNEL_MM,
    BINARY_METAL,
    KERNELS,
    OPINFOS,
    YAML,
)
from tests.impact.test_impact_sandbox import commit as commit_and_analyse

ATAN2_LINE = "return static_cast<T>(precise::atan2(float(a), float(b)));"
INT2FLOAT_BOOL = "  REGISTER_BINARY_OP(NAME, bool, float)\n"


def _edit(root: Path, rel: str, old: str, new: str) -> None:
    path = root / rel
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} must occur once in {rel}"
    path.write_text(text.replace(old, new))


def three_commits(root: Path) -> tuple[str, dict[str, str]]:
    """Three commits on the git checkout at ``root``: atan2's own functor ("own"), a macro
    atan2 shares ("shared"), a docs page ("docs"); the commit before them, and theirs."""
    before = git(root, "rev-parse", "HEAD")
    atan2 = ATAN2_LINE.replace("float(b)))", "float(b)) + 0.0f)")
    _edit(root, BINARY_METAL, ATAN2_LINE, atan2)
    own = commit(root, "mps: atan2 takes the float path for halves")
    _edit(root, BINARY_METAL, INT2FLOAT_BOOL, INT2FLOAT_BOOL.replace("float", "half"))
    shared = commit(root, "mps: bool inputs of int-to-float binary ops give half")
    (root / "docs").mkdir()
    (root / "docs" / "mps.md").write_text("# MPS notes\n")
    docs = commit(root, "docs: MPS notes")
    return before, {"own": own, "shared": shared, "docs": docs}


@pytest.fixture
def history(sandbox_tree: Path) -> tuple[Path, str, dict[str, str]]:
    """The sandbox copy, its first commit, and three commits after it, by what they touch."""
    return (sandbox_tree, *three_commits(sandbox_tree))


def test_suspects_are_ranked_own_then_shared_and_the_docs_commit_is_absent(history) -> None:
    root, before, shas = history
    analysis = CommitAnalysis(root, OPINFOS)
    found = analysis.suspects(before, shas["docs"], "atan2")
    assert [(s.commit, s.kind) for s in found.suspects] == [
        (shas["own"], OWN),
        (shas["shared"], SHARED),
    ]
    own, shared = found.suspects
    assert own.title == "mps: atan2 takes the float path for halves"
    assert own.reasons == ("BinaryKernel.metal:49 functor atan2_functor changed",)
    assert shared.reasons[0].endswith("shared macro REGISTER_INT2FLOAT_BINARY_OP changed")
    assert found.note == ""
    # copysign shares the macro only; hypot neither: the docs commit affects nobody
    copysign = analysis.suspects(before, shas["docs"], "copysign")
    assert [(s.commit, s.kind) for s in copysign.suspects] == [(shas["shared"], SHARED)]
    hypot = analysis.suspects(before, shas["docs"], "hypot")
    assert hypot.suspects == ()
    span = f"{before[:12]}..{shas['docs'][:12]}"
    assert hypot.note == f"none of the 3 commits in {span} can affect hypot"
    # each commit was analysed once, for all three operators
    assert analysis.analysed == 3


def test_each_commit_is_analysed_as_affected_would(history) -> None:
    """The walk derives each commit's sources from its parent's: the same impact as
    ``affected(root, sha^, sha)``, which reads the whole tree at ``sha``."""
    root, before, shas = history
    analysis = CommitAnalysis(root, OPINFOS)
    analysis.suspects(before, shas["docs"], "atan2")
    for name in ("own", "shared"):
        sha = shas[name]
        assert analysis._impacts[sha] == affected(root, f"{sha}^", sha, opinfos=OPINFOS), name
    assert analysis._impacts[shas["docs"]] is None  # nothing a rule reads: not analysed
    assert affected(root, f"{shas['docs']}^", shas["docs"], opinfos=OPINFOS).operators == ()


def test_same_commit_lacking_commits_and_unknown_commits_say_why(history) -> None:
    root, before, shas = history
    analysis = CommitAnalysis(root, OPINFOS)
    same = analysis.suspects(shas["own"], shas["own"], "atan2")
    assert same.suspects == ()
    assert same.note == (
        "same PyTorch commit as last night: not a code change (flaky or environment)"
    )
    gone = "0123456789abcdef0123456789abcdef01234567"
    lacking = analysis.suspects(gone, shas["docs"], "atan2")
    assert lacking.suspects == ()
    assert lacking.note == f"the checkout lacks {gone}: fetch it to name suspects"
    unknown = analysis.suspects("", shas["docs"], "atan2")
    assert unknown.note.startswith("the PyTorch commit of last night's run is not recorded")
    assert analysis.analysed == 0


def test_a_long_range_is_cut_to_its_newest_commits_and_says_so(history) -> None:
    root, before, shas = history
    analysis = CommitAnalysis(root, OPINFOS, limit=2)
    found = analysis.suspects(before, shas["docs"], "atan2")
    # the own commit is the oldest of three: only the shared one is among the newest two
    assert [s.kind for s in found.suspects] == [SHARED]
    assert found.note == "3 commits in range: only the newest 2 were analysed"
    assert analysis.analysed == 2


def test_a_change_to_every_test_is_a_sweep_suspect_even_for_other_tests(history) -> None:
    root, _before, shas = history
    _edit(root, "test/test_mps.py", "import re\n", "import os  # noqa: F401\nimport re\n")
    sweep = commit(root, "test_mps: one more import")
    analysis = CommitAnalysis(root, OPINFOS)
    (found,) = analysis.suspects(shas["docs"], sweep, "hypot").suspects
    assert found.kind == SWEEP and found.commit == sweep
    assert found.reasons == ("test/test_mps.py changed: every consistency test may differ",)
    other = analysis.suspects(shas["docs"], sweep, None)  # not a consistency test
    assert [s.kind for s in other.suspects] == [SWEEP]
    assert other.note == "not a consistency test: only commits that may affect every test count"


def test_a_range_that_does_not_descend_says_so(history) -> None:
    root, before, shas = history
    git(root, "checkout", "-q", "-b", "side", before)
    _edit(root, BINARY_METAL, ATAN2_LINE, ATAN2_LINE.replace("float(a)", "(float)a"))
    side = commit(root, "mps: atan2 cast, on a side branch")
    found = CommitAnalysis(root, OPINFOS).suspects(shas["docs"], side, "atan2")
    assert [s.commit for s in found.suspects] == [side]
    assert found.note == (
        f"{side[:12]} does not descend from {shas['docs'][:12]}: the commits are those of "
        f"{side[:12]} that {shas['docs'][:12]} lacks"
    )


# --- the kinds of reasons the impact analysis gives each operator ------------------------


def _kinds(impact, op: str) -> set[str]:
    (found,) = [o for o in impact.operators if o.operator == op]
    assert len(found.kinds) == len(found.reasons)
    return set(found.kinds)


def test_reasons_say_whether_the_change_is_the_operators_own_or_shared(sandbox_tree) -> None:
    root = sandbox_tree
    impact = commit_and_analyse(root, {BINARY_METAL: (ATAN2_LINE, ATAN2_LINE + " ")})
    assert _kinds(impact, "atan2") == {OWN}
    bool_half = INT2FLOAT_BOOL.replace("float", "half")
    impact = commit_and_analyse(root, {BINARY_METAL: (INT2FLOAT_BOOL, bool_half)})
    assert {op.operator: set(op.kinds) for op in impact.operators} == {
        "atan2": {SHARED},
        "copysign": {SHARED},
        "div": {SHARED},
    }
    impact = commit_and_analyse(
        root, {YAML: ("    MPS: exp2_out_mps\n", "    MPS: exp2_out\n")}
    )  # a dispatch row
    assert _kinds(impact, "exp2") == {OWN}
    mm = 'lib.exec_binary_kernel(iter, "maximum");'
    impact = commit_and_analyse(root, {BINARY_KERNEL_MM: (mm, mm + "  // NaN")})
    assert _kinds(impact, "maximum") == {OWN}  # its stub kernel
    header = KERNELS + "BinaryHelpers.h"
    include = "#include <ATen/native/mps/kernels/BinaryHelpers.h>\n"
    commit_and_analyse(
        root,
        {
            header: "#pragma once\ninline float half_of(float x) {\n  return x / 2;\n}\n",
            BINARY_METAL: ("#include <metal_stdlib>\n", f"#include <metal_stdlib>\n{include}"),
        },
    )
    impact = commit_and_analyse(root, {header: ("return x / 2;", "return x * 0.5f;")})
    assert {k for op in impact.operators for k in op.kinds} == {SHARED}
