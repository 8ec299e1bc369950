"""Per-operator, per-dtype outcome tables, for one runner or several side by side.

A row is one OpInfo (by test stem) and test kind; a column is a dtype; a cell holds what each
runner saw for that test. The xfail decisions and the nightly history read the per-runner
results; the renderers (pipeline/report/render.py) show the aggregate.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, TypedDict, cast

from pipeline.dtypes import TEST_KINDS, sort_key
from pipeline.fields import dump, read
from pipeline.results.junit import CaseResult, Outcome, combine_results

if TYPE_CHECKING:
    from pipeline.tree.opinfo import OpInfoRecord

LOCAL_RUNNER = "local"


class RunnerResultJson(TypedDict):
    outcome: str
    flaky: bool
    attempts: int
    message: str


class CellJson(TypedDict):
    outcome: str
    flaky: bool
    mixed: bool
    runners: dict[str, RunnerResultJson]


class RowJson(TypedDict):
    stem: str
    kind: str
    name: str
    cells: dict[str, str | CellJson]  # dtype -> a plain cell's outcome (compact), or the cell


class TableJson(TypedDict):
    runners: list[str]
    dtypes: list[str]
    counts: dict[str, int]
    flaky: int
    ignored: int
    rows: list[RowJson]


# When runners disagree, the cell shows the most alarming outcome: a failure anywhere
# matters more than an xpass, an xpass (something to clean up) more than an xfail.
SEVERITY: tuple[Outcome, ...] = (
    Outcome.ERROR,
    Outcome.FAIL,
    Outcome.XPASS,
    Outcome.XFAIL,
    Outcome.PASS,
    Outcome.SKIP,
)


@dataclass(frozen=True)
class RunnerResult:
    """One runner's result for one test."""

    runner: str
    outcome: Outcome
    flaky: bool
    attempts: int
    message: str


@dataclass(frozen=True)
class Cell:
    """One test (operator, kind, dtype) across the runners that ran it, in runner order."""

    dtype: str
    results: tuple[RunnerResult, ...]

    @property
    def outcome(self) -> Outcome:
        """The shared outcome, or the most severe one when runners disagree."""
        seen = {r.outcome for r in self.results}
        return next(o for o in SEVERITY if o in seen)

    @property
    def flaky(self) -> bool:
        return any(r.flaky for r in self.results)

    @property
    def mixed(self) -> bool:
        """Runners disagree (not flakiness: different chips/OS versions may differ)."""
        return len({r.outcome for r in self.results}) > 1

    def for_runner(self, runner: str) -> RunnerResult | None:
        return next((r for r in self.results if r.runner == runner), None)


@dataclass(frozen=True)
class Row:
    """All dtypes of one operator's test kind; ``name`` is the display name."""

    stem: str
    kind: str
    name: str
    cells: tuple[Cell, ...]  # in dtype display order

    @property
    def dtypes(self) -> tuple[str, ...]:
        return tuple(c.dtype for c in self.cells)

    def cell(self, dtype: str) -> Cell | None:
        return next((c for c in self.cells if c.dtype == dtype), None)


def _kind_rank(row: Row) -> tuple[int, str]:
    """output_match before output_grad_match, any other kind after them."""
    return (TEST_KINDS.index(row.kind) if row.kind in TEST_KINDS else len(TEST_KINDS), row.kind)


@dataclass(frozen=True)
class DtypeTable:
    """Outcomes by (operator, kind) and dtype; ``ignored`` counts non-consistency tests."""

    rows: tuple[Row, ...]
    dtypes: tuple[str, ...]
    runners: tuple[str, ...]
    ignored: int = 0

    @cached_property
    def _index(self) -> dict[tuple[str, str], Row]:
        return {(row.stem, row.kind): row for row in self.rows}

    @property
    def kinds(self) -> tuple[str, ...]:
        """Test kinds present, output_match first."""
        return tuple(dict.fromkeys(row.kind for row in sorted(self.rows, key=_kind_rank)))

    def row(self, stem: str, kind: str = "output_match") -> Row | None:
        return self._index.get((stem, kind))

    def cell(self, stem: str, kind: str, dtype: str) -> Cell | None:
        row = self.row(stem, kind)
        return row.cell(dtype) if row else None

    def counts(self, runner: str | None = None) -> dict[str, int]:
        """Cells per outcome: the aggregate outcome, or what ``runner`` saw."""
        counts = {o.value: 0 for o in Outcome}
        for row in self.rows:
            for cell in row.cells:
                if runner is None:
                    counts[cell.outcome.value] += 1
                elif (result := cell.for_runner(runner)) is not None:
                    counts[result.outcome.value] += 1
        return counts

    @property
    def flaky_count(self) -> int:
        return sum(cell.flaky for row in self.rows for cell in row.cells)

    def plain(self, cell: Cell) -> bool:
        """Every runner of the table ran ``cell`` with the same outcome, in one attempt, not
        flaky and with no message: summary.json spells it as that outcome alone."""
        first = cell.results[0]
        return len(cell.results) == len(self.runners) and all(
            r.outcome is first.outcome and not r.flaky and r.attempts == 1 and not r.message
            for r in cell.results
        )

    def to_dict(self, *, compact: bool = False) -> TableJson:
        """Plain JSON-serialisable data (the shape render_json writes).

        ``compact`` (the nightly's summary.json): a *plain* cell, one every runner of the
        table ran with the same outcome, in one attempt, not flaky and with no message, is
        just its outcome (``"pass"``); the others keep every runner's result. A fleet night
        of 3 × 20,000 tests was 13 MB of table, nearly all of it plain cells spelled out.
        """
        return cast(TableJson, dump(_TableDoc.of(self, compact)))

    @classmethod
    def read(cls, data: object, doc: str, where: str) -> DtypeTable:
        """:meth:`to_dict` read back from ``doc`` at ``where``, in either form (a plain cell
        is every runner of the table with its outcome, in one attempt), every key checked."""
        found = read(_TableDoc, data, doc, where)
        rows = tuple(row.row(found.runners) for row in found.rows)
        return cls(rows, found.dtypes, found.runners, found.ignored)


@dataclass(frozen=True)
class _RunnerDoc:
    outcome: Outcome
    flaky: bool
    attempts: int
    message: str


@dataclass(frozen=True)
class _CellDoc:
    """A cell spelled out; its outcome, flaky and mixed are for readers: the runners'."""

    outcome: Outcome
    flaky: bool
    mixed: bool
    runners: dict[str, _RunnerDoc]


@dataclass(frozen=True)
class _RowDoc:
    stem: str
    kind: str
    name: str
    cells: dict[str, Outcome | _CellDoc]  # dtype -> a plain cell's outcome, or the cell

    def __post_init__(self) -> None:
        if self.kind not in TEST_KINDS:
            raise ValueError(f"kind is {self.kind!r}, not one of {', '.join(TEST_KINDS)}")

    def row(self, runners: tuple[str, ...]) -> Row:
        cells = []
        for dtype, cell in self.cells.items():
            if isinstance(cell, Outcome):
                results = tuple(RunnerResult(r, cell, False, 1, "") for r in runners)
            else:
                results = tuple(
                    RunnerResult(r, x.outcome, x.flaky, x.attempts, x.message)
                    for r, x in cell.runners.items()
                )
            cells.append(Cell(dtype, results))
        return Row(self.stem, self.kind, self.name, tuple(cells))


@dataclass(frozen=True)
class _TableDoc:
    """A table as JSON holds it; ``counts`` and ``flaky`` are for readers: the cells'."""

    runners: tuple[str, ...]
    dtypes: tuple[str, ...]
    counts: dict[str, int]
    flaky: int
    ignored: int
    rows: tuple[_RowDoc, ...]

    @classmethod
    def of(cls, table: DtypeTable, compact: bool) -> _TableDoc:
        def cell(c: Cell) -> Outcome | _CellDoc:
            if compact and table.plain(c):
                return c.results[0].outcome
            runners = {
                r.runner: _RunnerDoc(r.outcome, r.flaky, r.attempts, r.message) for r in c.results
            }
            return _CellDoc(c.outcome, c.flaky, c.mixed, runners)

        rows = tuple(
            _RowDoc(row.stem, row.kind, row.name, {c.dtype: cell(c) for c in row.cells})
            for row in table.rows
        )
        return cls(table.runners, table.dtypes, table.counts(), table.flaky_count, table.ignored,
                   rows)  # fmt: skip


def display_names(opinfos: Iterable[OpInfoRecord]) -> dict[str, str]:
    """Test stem -> "name (variant)": the row labels of a per-dtype table (``names=``)."""
    return {
        info.stem: info.name + (f" ({info.variant_test_name})" if info.variant_test_name else "")
        for info in opinfos
    }


def build_table(
    cases: Iterable[CaseResult],
    names: Mapping[str, str] | None = None,
    runner: str = LOCAL_RUNNER,
) -> DtypeTable:
    """The table of one run. ``names`` maps a test stem to "name (variant)" for display."""
    return merge_runs({runner: list(cases)}, names)


def merge_runs(
    runs: Mapping[str, Sequence[CaseResult]], names: Mapping[str, str] | None = None
) -> DtypeTable:
    """One table over several runners (e.g. macos-m1-14, macos-m2-15), keeping each result.

    Tests that are not consistency tests are counted in ``ignored``. A test reported twice
    by one runner is folded with ``combine_results`` (the later one wins).
    """
    names = names or {}
    grid: dict[tuple[str, str], dict[str, dict[str, CaseResult]]] = {}
    ignored = 0
    for runner, cases in runs.items():
        for case in cases:
            if case.kind is None or case.stem is None or case.dtype is None:
                ignored += 1
                continue
            by_runner = grid.setdefault((case.stem, case.kind), {}).setdefault(case.dtype, {})
            previous = by_runner.get(runner)
            by_runner[runner] = case if previous is None else combine_results(previous, case)
    runner_order = tuple(runs)
    rows = []
    for (stem, kind), by_dtype in grid.items():
        cells = tuple(
            Cell(
                dtype,
                tuple(
                    RunnerResult(r, c.outcome, c.flaky, c.attempts, c.message)
                    for r in runner_order
                    if (c := by_dtype[dtype].get(r)) is not None
                ),
            )
            for dtype in sorted(by_dtype, key=sort_key)
        )
        rows.append(Row(stem, kind, names.get(stem, stem), cells))
    rows.sort(key=lambda row: (row.name, _kind_rank(row), row.stem))
    dtypes = sorted({cell.dtype for row in rows for cell in row.cells}, key=sort_key)
    return DtypeTable(tuple(rows), tuple(dtypes), runner_order, ignored)
