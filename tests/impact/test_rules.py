"""The rule registry (pipeline/impact/rules): one rule per kind ``classify`` returns, each a
module-level ``rule(change, ctx)`` that works on its own, given a :class:`Context`."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import pytest

from pipeline import sandbox
from pipeline.impact import analyze, classify, load_view, rules
from pipeline.impact.changes import ChangedFile
from pipeline.impact.model import (
    COMMON_MPS,
    MPS_RUNTIME_DIR,
    OPINFO_DEFINITIONS,
    SHARED_NATIVE_DIR,
    TESTING_DIR,
    Context,
    Findings,
)
from pipeline.impact.rules import RULES
from pipeline.impact.view import (
    C10_METAL_DIR,
    KERNELS_DIR,
    MPS_DIR,
    NATIVE_YAML,
    OPERATIONS_DIR,
    Resolver,
)
from pipeline.tree import paths
from pipeline.tree.opinfo import load_table

OPINFOS = load_table(sandbox.TREE / sandbox.OPINFO_TABLE)
# one path per place classify tells apart, built from the constants it reads
PLACES = (
    NATIVE_YAML,
    KERNELS_DIR + "Foo.metal",
    KERNELS_DIR + "Foo.h",
    C10_METAL_DIR + "utils.h",
    OPERATIONS_DIR + "Foo.mm",
    MPS_DIR + "OperationUtils.mm",
    MPS_RUNTIME_DIR + "MPSStream.mm",
    SHARED_NATIVE_DIR + "Foo.cpp",
    SHARED_NATIVE_DIR + "Foo.h",
    SHARED_NATIVE_DIR + "cpu/Foo.cpp",
    COMMON_MPS,
    OPINFO_DEFINITIONS[0],
    OPINFO_DEFINITIONS[1] + "definitions/linalg.py",
    paths.TEST_MPS,
    TESTING_DIR + "_comparison.py",
    paths.INDUCTOR_MPS_CODEGEN,
    "docs/source/mps.rst",
)


def _sandbox_files() -> list[str]:
    return sorted(
        f.relative_to(sandbox.TREE).as_posix()
        for f in sandbox.TREE.rglob("*")
        if f.is_file() and "__pycache__" not in f.parts
    )


def test_the_registry_has_one_rule_for_each_kind_classify_returns() -> None:
    kinds = {classify(path) for path in (*PLACES, *_sandbox_files())}
    documented = set(re.findall(r"\w+", classify.__doc__.split("):", 1)[1])) - {"or"}  # type: ignore[union-attr]
    assert kinds == documented == set(RULES)
    assert len(RULES) == 14


def test_every_rule_module_registers_its_rule() -> None:
    registered = set(RULES.values())
    modules = [m.name for m in pkgutil.iter_modules(rules.__path__)]
    assert len(modules) == 10
    for name in modules:
        module = importlib.import_module(f"{rules.__name__}.{name}")
        if name == "simple":
            kinds = ("mps_other", "test_mps", "testing", "inductor_codegen", "ignored")
            assert {RULES[k] for k in kinds} == {
                module.mps_other,
                module.test_mps,
                module.testing,
                module.inductor_codegen,
                module.ignored,
            }
        else:
            assert module.rule in registered, name
    for kind, fn in RULES.items():
        assert list(inspect.signature(fn).parameters) == ["change", "ctx"], kind


def _context(changes: list[ChangedFile]) -> Context:
    """The context ``analyze`` gives its rules for ``changes`` over the sandbox tree."""
    new = load_view(sandbox.TREE).with_texts({c.path: c.new_text for c in changes})
    return Context(new, new, Resolver([new], OPINFOS), OPINFOS, Findings())


def _whole_file(path: str) -> ChangedFile:
    text = (sandbox.TREE / path).read_text()
    return ChangedFile(path, "M", None, text, (), ((1, len(text.splitlines())),))


@pytest.mark.parametrize("path", _sandbox_files())
def test_a_rule_called_on_its_own_finds_what_analyze_reports(path: str) -> None:
    """Every line of each sandbox file changed, without the previous version."""
    change = _whole_file(path)
    ctx = _context([change])
    RULES[classify(path)](change, ctx)
    impact = analyze([change], opinfos=OPINFOS, view=load_view(sandbox.TREE))
    assert sorted(ctx.found.reasons) == list(impact.operator_names)
    assert tuple(ctx.found.sweep) == impact.full_sweep_reasons
    assert ctx.found.build == impact.build_needed
    assert tuple(sorted(ctx.found.ignored)) == impact.ignored


def test_rules_over_the_sandbox_find_operators_and_sweeps() -> None:
    found = Findings()
    for path in _sandbox_files():
        change = _whole_file(path)
        ctx = _context([change])
        RULES[classify(path)](change, ctx)
        found.reasons.update(ctx.found.reasons)
        found.sweep.update(ctx.found.sweep)
        found.ignored += ctx.found.ignored
    assert {"atan2", "hypot"} <= set(found.reasons)
    assert any(paths.TEST_MPS in reason for reason in found.sweep)
    assert "README.md" in found.ignored


@pytest.mark.parametrize(
    ("kind", "path", "build", "says"),
    [
        ("mps_other", MPS_RUNTIME_DIR + "MPSStream.mm", True, "shared MPS infrastructure"),
        ("test_mps", paths.TEST_MPS, False, "every consistency test may differ"),
        ("testing", TESTING_DIR + "_comparison.py", False, "shared test infrastructure"),
    ],
)
def test_the_rules_that_read_nothing_ask_for_the_sweep(
    kind: str, path: str, build: bool, says: str
) -> None:
    change = ChangedFile(path, "M", "a\n", "b\n", ((1, 1),), ((1, 1),))
    ctx = _context([])
    assert classify(path) == kind
    RULES[kind](change, ctx)
    assert list(ctx.found.sweep) == [f"{path} changed: {says}"]
    assert ctx.found.build is build
    assert not ctx.found.reasons and not ctx.found.ignored


def test_an_ignored_file_is_listed_and_nothing_else() -> None:
    change = ChangedFile("docs/source/mps.rst", "M", "a\n", "b\n", ((1, 1),), ((1, 1),))
    ctx = _context([])
    RULES[classify(change.path)](change, ctx)
    assert ctx.found.ignored == ["docs/source/mps.rst"]
    assert not ctx.found.sweep and not ctx.found.reasons and not ctx.found.build
