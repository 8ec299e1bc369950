"""The result types of impact analysis and the context its rules share.

``AffectedOp`` and ``Impact`` are what :func:`~pipeline.impact.analyze.analyze` returns;
``Findings`` is what the rules add to while it runs, ``Context`` what each rule is given, and
``Side`` one version of a changed file as a rule reads it. The path constants are the places
:func:`~pipeline.impact.analyze.classify` and the rules both name.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TypedDict

from pipeline.fields import read
from pipeline.impact import cscan, pyscan
from pipeline.impact.changes import ChangedFile, Range
from pipeline.impact.view import Resolver, TreeView
from pipeline.tree import paths
from pipeline.tree.opinfo import OpInfoRecord

COMMON_MPS = paths.COMMON_MPS
OPINFO_DEFINITIONS = (
    "torch/testing/_internal/common_methods_invocations.py",
    "torch/testing/_internal/opinfo/",
)
TESTING_DIR = "torch/testing/"
# MPS runtime outside native/mps: allocator, streams, device; nothing op-specific
MPS_RUNTIME_DIR = "aten/src/ATen/mps/"
# structured kernels shared by every backend (BinaryOps.cpp...); cpu/, cuda/... are not
SHARED_NATIVE_DIR = paths.NATIVE_DIR + "/"
SCHEMA = 1  # of the affected --json document (docs/machine-output.md)
# What a reason's changed place is to its operator: its own code or entry (functor, kernel,
# stub, registration, dispatch row, structured kernel, xfail or OpInfo entry), or code it
# shares with others (a header, a macro, a helper, another operator's functor it uses)
OWN = "own"
SHARED = "shared"


@dataclass(frozen=True)
class AffectedOp:
    """An operator a change reaches, and every reason found for it.

    ``kinds`` runs parallel to ``reasons``: :data:`OWN` or :data:`SHARED` for each. ``keys``
    are the OpInfo keys the operator is limited to (None: every OpInfo matching its name).
    Neither is in ``to_dict()``: ``affected --json`` keeps its documented shape.
    """

    operator: str
    reasons: tuple[str, ...]
    kinds: tuple[str, ...] = ()
    keys: frozenset[str] | None = None

    @property
    def own(self) -> bool:
        """Whether some reason is a change of the operator's own code or entry."""
        return OWN in self.kinds

    def matches(self, info: OpInfoRecord) -> bool:
        """Whether this operator's tests include ``info``'s (as the test selection has it)."""
        if self.keys is not None:
            return info.key in self.keys
        return self.operator in (info.name, info.aten_name) or self.operator in info.aliases


class AffectedOpJson(TypedDict):
    operator: str
    reasons: list[str]


class ImpactJson(TypedDict):
    """results.json's ``impact``."""

    operators: list[AffectedOpJson]
    full_sweep: bool
    full_sweep_reasons: list[str]
    build_needed: bool
    ignored: list[str]
    selected: int
    total: int
    fraction: float
    test_ids: list[str]
    warnings: list[str]
    inductor_tests: list[str]
    inductor_reasons: list[str]


class AffectedJson(ImpactJson):
    """The ``affected --json`` document."""

    schema: int


@dataclass(frozen=True)
class Impact:
    """What a diff affects and which consistency tests to run for it."""

    operators: tuple[AffectedOp, ...]
    full_sweep: bool
    full_sweep_reasons: tuple[str, ...]
    build_needed: bool
    ignored: tuple[str, ...]
    test_ids: tuple[str, ...]
    selected: int
    total: int
    warnings: tuple[str, ...] = ()
    # the Inductor test files (paths.INDUCTOR_MPS_TESTS) a change of c10/metal or of
    # Inductor's Metal codegen selects, whole, and why; outside the consistency suite's counts
    inductor_tests: tuple[str, ...] = ()
    inductor_reasons: tuple[str, ...] = ()

    @property
    def fraction(self) -> float:
        """Share of the consistency suite selected (0.0 for an empty suite)."""
        return self.selected / self.total if self.total else 0.0

    @property
    def operator_names(self) -> tuple[str, ...]:
        return tuple(op.operator for op in self.operators)

    def to_dict(self) -> ImpactJson:
        """Plain data for ``--json`` and for the PR report."""
        return {
            "operators": [
                {"operator": o.operator, "reasons": list(o.reasons)} for o in self.operators
            ],
            "full_sweep": self.full_sweep,
            "full_sweep_reasons": list(self.full_sweep_reasons),
            "build_needed": self.build_needed,
            "ignored": list(self.ignored),
            "selected": self.selected,
            "total": self.total,
            "fraction": round(self.fraction, 6),
            "test_ids": list(self.test_ids),
            "warnings": list(self.warnings),
            "inductor_tests": list(self.inductor_tests),
            "inductor_reasons": list(self.inductor_reasons),
        }

    @classmethod
    def from_json(cls, data: object, doc: str, where: str) -> Impact:
        """``to_dict()`` read back (results.json's ``impact``), every key checked; the
        operators' kinds and keys, which the document does not hold, are left unknown."""
        found = read(_Written, data, doc, where)
        return cls(
            operators=tuple(AffectedOp(op.operator, op.reasons) for op in found.operators),
            full_sweep=found.full_sweep,
            full_sweep_reasons=found.full_sweep_reasons,
            build_needed=found.build_needed,
            ignored=found.ignored,
            test_ids=found.test_ids,
            selected=found.selected,
            total=found.total,
            warnings=found.warnings,
            inductor_tests=found.inductor_tests,
            inductor_reasons=found.inductor_reasons,
        )

    def to_json(self) -> AffectedJson:
        """The ``affected --json`` document: ``to_dict()`` with its schema version."""
        return {"schema": SCHEMA, **self.to_dict()}


@dataclass(frozen=True)
class _WrittenOp:
    operator: str
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class _Written:
    """:meth:`Impact.to_dict` as written (:class:`ImpactJson`)."""

    operators: tuple[_WrittenOp, ...]
    full_sweep: bool
    full_sweep_reasons: tuple[str, ...]
    build_needed: bool
    ignored: tuple[str, ...]
    selected: int
    total: int
    fraction: float  # derived from selected and total: only checked
    test_ids: tuple[str, ...]
    warnings: tuple[str, ...]
    # absent from an older writer's document: it selected no Inductor test
    inductor_tests: tuple[str, ...] = ()
    inductor_reasons: tuple[str, ...] = ()


@dataclass
class Findings:
    """What the rules found so far: operators with their reasons, sweep reasons, and more."""

    # operator -> reason -> its kind (OWN wins when one reason is found both ways)
    reasons: dict[str, dict[str, str]] = field(default_factory=dict)
    # operator -> OpInfo keys it is limited to (None: every OpInfo matching the operator)
    keys: dict[str, set[str] | None] = field(default_factory=dict)
    sweep: dict[str, None] = field(default_factory=dict)
    build: bool = False
    ignored: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # why the Inductor MPS tests are selected (none: they are not)
    inductor: dict[str, None] = field(default_factory=dict)
    # (operator, construct) pairs already given a reason: an edited functor shows up in
    # both versions of its file, and one reason is enough
    said: set[tuple[str, tuple]] = field(default_factory=set)

    def hit(
        self,
        op: str,
        reason: str,
        *,
        build: bool,
        keys: Iterable[str] | None = None,
        construct: tuple | None = None,
        shared: bool = False,
    ) -> None:
        if construct is None or (op, construct) not in self.said:
            kinds = self.reasons.setdefault(op, {})
            kinds[reason] = OWN if kinds.get(reason) == OWN or not shared else SHARED
        if construct is not None:
            self.said.add((op, construct))
        self.build |= build
        if keys is None:
            self.keys[op] = None
        elif op not in self.keys:
            self.keys[op] = set(keys)
        elif self.keys[op] is not None:
            self.keys[op] |= set(keys)  # type: ignore[operator]

    def full(self, reason: str, *, build: bool) -> None:
        self.sweep[reason] = None
        self.build |= build


@dataclass(frozen=True)
class Side:
    """One version of a changed file: its text, the changed lines in it, and its tree."""

    path: str
    text: str
    ranges: tuple[Range, ...]
    view: TreeView
    old: bool

    @property
    def name(self) -> str:
        return posixpath.basename(self.path)

    def where(self, line: int) -> str:
        """``Binary.metal:12 `` (``Binary.metal:12 (old) `` for a line of the old version)."""
        return f"{self.name}:{line} " + ("(old) " if self.old else "")

    def changed_code_lines(self, language: str) -> Iterator[int]:
        """Changed lines holding code (``language`` "c" or "python"), comments skipped."""
        if language == "python":
            return self.changed_lines(pyscan.code_line_numbers(self.text).__contains__)
        code = cscan.code_lines(self.text, self.path)
        return self.changed_lines(lambda n: cscan.is_code(code, n, n))

    def changed_lines(self, is_code: Callable[[int], bool]) -> Iterator[int]:
        for start, end in self.ranges:
            for line in range(start, end + 1):
                if is_code(line):
                    yield line


@dataclass
class Context:
    """What every rule is given: both versions of the tree, lookups across them, the OpInfos,
    and the findings to add to."""

    old: TreeView
    new: TreeView
    resolver: Resolver
    opinfos: tuple[OpInfoRecord, ...]
    found: Findings


def sides(change: ChangedFile, ctx: Context) -> list[Side]:
    """The new version's changed lines, then the old one's (removed code counts too)."""
    versions = []
    if change.new_text is not None and change.new_ranges:
        versions.append(Side(change.path, change.new_text, change.new_ranges, ctx.new, False))
    if change.old_text is not None and change.old_ranges:
        versions.append(Side(change.path, change.old_text, change.old_ranges, ctx.old, True))
    return versions
