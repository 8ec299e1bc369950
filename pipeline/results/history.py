"""The nightly results history: one run per runner configuration per night, in an SQLite
file or on a PostgreSQL server.

Both backends hold the same schema and answer the same queries, written once here against
:class:`pipeline.results.history_db.HistoryDB`; :mod:`pipeline.results.history_access` says
which history a command uses and opens it, :mod:`pipeline.results.history_pg` is the
server's side. What follows about files, WAL, checks and backups is the SQLite file's.

A *nightly* is the set of runs recorded together by ``python -m pipeline nightly``: they
share ``runs.started`` (UTC, ISO 8601 with microseconds, so text order is time order). The
xfail proposals, regressions, flaky tests and the dashboard's pass-rate chart all read
the last few nightlies.

Schema (version 6)::

    schema_version(version)
    runs(id, started, runner, commit, source)                    -- one per runner per nightly
    tests(id, classname, name, kind, stem, dtype)                 -- each test id once
    results(run_id, test_id, outcome, flaky, attempts, seconds)   -- one per test per run
    run_outcomes(run_id, outcome, tests)                          -- a run's count per outcome
    results_flat                                                  -- view: results joined with tests
    speed(run_id, op, dtype, shape, layout, median, q25, q75, repeats)  -- pipeline.results.speed
    exec_paths(run_id, path, overloads)    -- the tree's overloads per MPS path that night
    run_devices(run_id, chip, gpu, gpu_family, gpu_cores, macos, macos_build, metal,
                virtualization)            -- the device a run's results came from

``seconds`` is the test's JUnit time, summed over its attempts (what the ``shards`` command
balances the sweep by); NULL where unknown. ``run_outcomes`` holds each run's counts per
outcome, written with the run: the dashboard's pass-rate chart reads 60 nights of them
instead of counting 3.6 million results every night. Version 1 had no ``seconds``, version 2
no ``run_outcomes``: :func:`connect` migrates an older file in place, in one transaction
(1 -> 2: the column added, the view recreated; 2 -> 3: the table made and filled from the
results there; 3 -> 4: the ``speed`` table of each runner's kernel micro-benchmarks, empty;
4 -> 5: the ``exec_paths`` table, empty; 5 -> 6: the ``run_devices`` table, empty, the runs
there keeping an unknown device),
its earlier results keeping NULL seconds. :func:`check` accepts every version up to this one
(an older file is valid and waits for its migration) and refuses newer ones.

Test ids live in their own table because a night of the full sweep is about 7,000 tests
on each of three runners: repeating the names in every row made a night 8x bigger, and
the file travels through the Actions cache every night. ``results_flat`` gives the plain
(run_id, classname, name, kind, stem, dtype, outcome, flaky, attempts, seconds) rows for ad-hoc
SQL. The file is in WAL mode; everything a nightly writes is one transaction.

A file that exists but is not a valid history (empty, not SQLite, corrupt, a directory,
another program's database, a newer schema) is refused without being touched: taking an
empty file for a new history would silently drop every earlier night. Only a missing file
starts a new history, made under a temporary name and renamed into place, so a file at the
path is always a complete one. After each night :func:`backup` keeps a copy of the last
few nights beside it (``backups/``), made with SQLite's backup API.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from pipeline.errors import PipelineError
from pipeline.results.device import Device, DeviceJson
from pipeline.results.history_access import (  # noqa: F401 (re-exported)
    for_comparing,
    found,
    locate,
    reader,
    writer,
)
from pipeline.results.history_db import Backend, HistoryDB, HistoryLocation  # noqa: F401
from pipeline.results.history_disk import (  # noqa: F401 (re-exported)
    BACKUPS,
    backup,
    backups,
    not_now,
)
from pipeline.results.history_file import (  # noqa: F401 (the history's API, re-exported)
    FULL_CHECK_EVERY,
    SEAL,
    HistoryCheck,
    backup_and_seal,
    check,
    connect,
    open_read_only,
    seal,
    sealed,
    writes_on_open,
)
from pipeline.results.history_schema import COUNT_RUN, SCHEMA_VERSION  # noqa: F401
from pipeline.results.junit import CaseResult, Outcome


@dataclass(frozen=True)
class Run:
    """One runner's results of one nightly."""

    id: int
    started: str
    runner: str
    commit: str
    source: str


@dataclass(frozen=True)
class Nightly:
    """The runs recorded together (they share ``started``), in runner order."""

    started: str
    runs: tuple[Run, ...]

    @property
    def runners(self) -> tuple[str, ...]:
        return tuple(run.runner for run in self.runs)

    @property
    def commit(self) -> str:
        return next((run.commit for run in self.runs if run.commit), "")


@dataclass(frozen=True)
class Transition:
    """A test whose outcome differs between two runs of one runner."""

    classname: str
    name: str
    kind: str | None
    stem: str | None
    dtype: str | None
    before: Outcome
    after: Outcome
    flaky: bool  # the later result is flaky


@dataclass(frozen=True)
class OutcomeSeries:
    """One test's outcomes on one runner over several nightlies, oldest first."""

    runner: str
    classname: str
    name: str
    kind: str | None
    stem: str | None
    dtype: str | None
    outcomes: tuple[Outcome, ...]
    flaky: tuple[bool, ...]


def timestamp(when: datetime | str | None = None) -> str:
    """``when`` (default: now) as the canonical ``started`` text, UTC with microseconds.

    A naive datetime or ISO string is read as UTC.
    """
    if when is None:
        when = datetime.now(timezone.utc)
    elif isinstance(when, str):
        try:
            when = datetime.fromisoformat(when.replace("Z", "+00:00"))
        except ValueError:
            raise PipelineError(
                f"{when!r} is not an ISO 8601 time such as 2026-03-01T03:17:00Z"
            ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _test_ids(db: HistoryDB, runs: Iterable[Sequence[CaseResult]]) -> dict[tuple[str, str], int]:
    """Every test's id, the night's new tests added first: the tests table is read once a
    night, not once a runner (a round trip and 20,000 rows each on a server)."""
    ids = {(cls, name): i for i, cls, name in db.execute("SELECT id, classname, name FROM tests")}
    # only the tests the history has not seen: after the first night, usually none (under
    # the write lock, so no other writer adds one meanwhile)
    new: dict[tuple[str, str], CaseResult] = {}
    for cases in runs:
        for c in cases:
            if (c.classname, c.name) not in ids:
                new.setdefault((c.classname, c.name), c)  # the first report of it names it
    if not new:
        return ids
    db.insert_rows(
        "tests",
        ("classname", "name", "kind", "stem", "dtype"),
        ((c.classname, c.name, c.kind, c.stem, c.dtype) for c in new.values()),
    )
    return {(cls, name): i for i, cls, name in db.execute("SELECT id, classname, name FROM tests")}


def _counts(case: CaseResult) -> tuple[int, int, float]:
    return int(case.flaky), case.attempts, case.time


def record_nightly(
    db: HistoryDB,
    runs: Mapping[str, Sequence[CaseResult]],
    *,
    commit: str,
    started: str | None = None,
    source: str = "",
    hold: bool = False,
) -> Nightly:
    """Store every runner's results of one nightly in one transaction.

    A non-empty ``source`` (say, the CI run's URL) identifies the nightly: recording the
    same source again (a re-run aggregation job) replaces the earlier record instead of
    counting the same night twice. ``hold``: leave the transaction open for the caller to
    commit (``db.commit()``) or, closing ``db``, roll back; ``db`` reads the night meanwhile.
    """
    started = started or timestamp()
    if hold:
        _record(db, runs, commit, started, source)
    else:
        with db:
            _record(db, runs, commit, started, source)
    return nightly(db, started)


def _record(
    db: HistoryDB,
    runs: Mapping[str, Sequence[CaseResult]],
    commit: str,
    started: str,
    source: str,
) -> None:
    db.lock_writes()  # one night at a time: a re-run source is replaced, never doubled
    if source:
        db.execute("DELETE FROM runs WHERE source = ?", (source,))
    ids = _test_ids(db, runs.values())
    rows: list[tuple[int, int, str, int, int, float]] = []
    run_ids = []
    for runner, cases in runs.items():
        (run_id,) = db.execute(
            'INSERT INTO runs (started, runner, "commit", source) VALUES (?, ?, ?, ?) RETURNING id',
            (started, runner, commit, source),
        ).fetchone()
        run_ids.append(run_id)
        # one id reported twice in a run: the later row wins, as in junit.parse_reports
        run_rows = {
            ids[(c.classname, c.name)]: (
                run_id,
                ids[(c.classname, c.name)],
                Outcome(c.outcome).value,
                *_counts(c),
            )
            for c in cases
        }
        rows.extend(run_rows[test] for test in sorted(run_rows))
    # every run's results in one bulk insert (one COPY on a server), in primary key order
    db.insert_rows(
        "results", ("run_id", "test_id", "outcome", "flaky", "attempts", "seconds"), rows
    )
    db.executemany(COUNT_RUN, [(run_id,) for run_id in run_ids])


def _runs(rows: Iterable[tuple]) -> tuple[Run, ...]:
    return tuple(Run(*row) for row in rows)


def nightly(db: HistoryDB, started: str) -> Nightly:
    """The nightly recorded at ``started``."""
    rows = db.execute(
        'SELECT id, started, runner, "commit", source FROM runs WHERE started = ? ORDER BY id',
        (started,),
    )
    return Nightly(started, _runs(rows))


def nightlies(
    db: HistoryDB, last_n: int | None = None, *, until: str | None = None
) -> tuple[Nightly, ...]:
    """The last ``last_n`` nightlies (all when None), newest first; with ``until``, only
    those that started then or earlier."""
    query = "SELECT started FROM runs WHERE started <= ? GROUP BY started ORDER BY started DESC"
    params: tuple = (until or "\uffff",)  # after every timestamp
    if last_n is not None:
        query += " LIMIT ?"
        params += (last_n,)
    return tuple(nightly(db, started) for (started,) in db.execute(query, params).fetchall())


def previous_run(db: HistoryDB, runner: str, before: str) -> Run | None:
    """``runner``'s latest run from a nightly older than ``before``."""
    row = db.execute(
        'SELECT id, started, runner, "commit", source FROM runs '
        "WHERE runner = ? AND started < ? ORDER BY started DESC LIMIT 1",
        (runner, before),
    ).fetchone()
    return Run(*row) if row else None


def run_cases(
    db: HistoryDB, run_id: int, *, stems: Iterable[str] | None = None
) -> tuple[CaseResult, ...]:
    """The stored results of one run as CaseResults (no message: not stored; time 0.0 where
    the history has no seconds).

    With ``stems``, only those consistency tests.
    """
    query = (
        "SELECT t.classname, t.name, t.kind, t.stem, t.dtype, r.outcome, r.flaky, r.attempts, "
        "r.seconds FROM results AS r JOIN tests AS t ON t.id = r.test_id WHERE r.run_id = ?"
    )
    params: list = [run_id]
    if stems is not None:
        stems = sorted(set(stems))
        query += f" AND t.stem IN ({', '.join('?' * len(stems))})"
        params += stems
    source = f"history run {run_id}"
    rows = db.execute(query + " ORDER BY t.id", params)
    return tuple(
        CaseResult(
            classname,
            name,
            kind,
            stem,
            dtype,
            Outcome(outcome),
            bool(flaky),
            attempts,
            "",
            seconds or 0.0,
            source,
        )  # fmt: skip
        for classname, name, kind, stem, dtype, outcome, flaky, attempts, seconds in rows
    )


def transitions(db: HistoryDB, before: int, after: int) -> tuple[Transition, ...]:
    """Tests whose outcome differs between run ``before`` and run ``after``."""
    rows = db.execute(
        "SELECT t.classname, t.name, t.kind, t.stem, t.dtype, p.outcome, c.outcome, c.flaky "
        "FROM results AS c JOIN results AS p ON p.test_id = c.test_id AND p.run_id = ? "
        "JOIN tests AS t ON t.id = c.test_id "
        "WHERE c.run_id = ? AND p.outcome != c.outcome ORDER BY t.id",
        (before, after),
    )
    return tuple(
        Transition(cls, name, kind, stem, dtype, Outcome(b), Outcome(a), bool(flaky))
        for cls, name, kind, stem, dtype, b, a, flaky in rows
    )


# tests whose outcome differs between two runs; tests the first run has and the second not
_CHANGED = (
    "SELECT c.test_id FROM results AS c JOIN results AS p ON p.run_id = ? "
    "AND p.test_id = c.test_id WHERE c.run_id = ? AND p.outcome != c.outcome"
)
_ONLY_IN = (
    "SELECT test_id FROM results WHERE run_id = ? "
    "EXCEPT SELECT test_id FROM results WHERE run_id = ?"
)


def flipping(db: HistoryDB, last_n: int, *, min_changes: int = 2) -> tuple[OutcomeSeries, ...]:
    """Tests whose outcome changed at least ``min_changes`` times on one runner over the
    last ``last_n`` nightlies (pass → fail → pass is two), with their outcome series.

    One change is a fix or a regression; it takes a change and a change back to call a test
    flaky. Nights a runner did not run the test are left out of its series.
    """
    runs = db.execute(
        "SELECT id, runner FROM runs WHERE started IN (SELECT started FROM runs "
        "    GROUP BY started ORDER BY started DESC LIMIT ?) ORDER BY started, id",
        (last_n,),
    ).fetchall()
    by_runner: dict[str, list[int]] = {}
    for run, runner in runs:
        by_runner.setdefault(runner, []).append(run)
    # Only a test whose outcome differs between two of a runner's consecutive runs, or that
    # one of them lacks, can have changed (a night without the test is left out of its
    # series, so its neighbours then meet): SQLite finds those along the primary key, and
    # only their series are read. Reading every result of the window into Python took
    # 1.5 s for 5 nights of a 3 × 20,000 fleet (0.8 s before that as a window function).
    seen: dict[tuple[str, int], list[tuple[str, int]]] = {}
    for runner, run_ids in by_runner.items():
        if len(run_ids) <= min_changes:
            continue
        candidates: set[int] = set()
        for before, after in itertools.pairwise(run_ids):
            candidates.update(t for (t,) in db.execute(_CHANGED, (before, after)))
            candidates.update(t for (t,) in db.execute(_ONLY_IN, (before, after)))
            candidates.update(t for (t,) in db.execute(_ONLY_IN, (after, before)))
        order = {run: i for i, run in enumerate(run_ids)}
        wanted = sorted(candidates)
        rows: list[tuple[int, int, str, int]] = []
        for chunk in range(0, len(wanted), 500):
            some = wanted[chunk : chunk + 500]
            rows.extend(db.execute(
                "SELECT run_id, test_id, outcome, flaky FROM results "
                f"WHERE run_id IN ({', '.join('?' * len(run_ids))}) "
                f"AND test_id IN ({', '.join('?' * len(some))})",
                [*run_ids, *some],
            ))  # fmt: skip
        rows.sort(key=lambda row: (order[row[0]], row[1]))
        for _run, test, outcome, flaky in rows:
            seen.setdefault((runner, test), []).append((outcome, flaky))
    flipped = {
        key: got
        for key, got in seen.items()
        if len(got) > min_changes
        and sum(a[0] != b[0] for a, b in itertools.pairwise(got)) >= min_changes
    }
    if not flipped:
        return ()
    wanted = sorted({test for _, test in flipped})
    # test id -> (classname, name, kind, stem, dtype)
    tests: dict[int, tuple[str, str, str | None, str | None, str | None]] = {}
    for chunk in range(0, len(wanted), 500):
        ids = wanted[chunk : chunk + 500]
        tests.update(
            (row[0], row[1:])
            for row in db.execute(
                "SELECT id, classname, name, kind, stem, dtype FROM tests "
                f"WHERE id IN ({', '.join('?' * len(ids))})",
                ids,
            )
        )
    series = [
        OutcomeSeries(
            runner,
            *tests[test],
            tuple(Outcome(o) for o, _ in got),
            tuple(bool(f) for _, f in got),
        )
        for (runner, test), got in flipped.items()
    ]
    return tuple(sorted(series, key=lambda s: (s.classname, s.name, s.runner)))


def durations(db: HistoryDB, last_n: int) -> dict[tuple[str, str], list[float]]:
    """(classname, name) -> the test's recorded seconds in the last ``last_n`` nightlies,
    one per run that has them (every runner's), oldest first.

    A version 1 history (opened read-only, unmigrated) has none: ``{}``.
    """
    if "seconds" not in db.columns("results"):
        return {}
    runs = db.execute(
        "SELECT id FROM runs WHERE started IN (SELECT started FROM runs "
        "    GROUP BY started ORDER BY started DESC LIMIT ?) ORDER BY started, id",
        (last_n,),
    ).fetchall()
    # run by run along the primary key: a third of the time of one sorted join
    by_id: dict[int, list[float]] = {}
    for (run,) in runs:
        for test, seconds in db.execute(
            "SELECT test_id, seconds FROM results WHERE run_id = ? AND seconds IS NOT NULL", (run,)
        ):
            by_id.setdefault(test, []).append(seconds)
    names = {i: (cls, name) for i, cls, name in db.execute("SELECT id, classname, name FROM tests")}
    return {names[test]: seconds for test, seconds in by_id.items()}


def outcome_counts(db: HistoryDB, last_n: int) -> tuple[tuple[str, str, dict[str, int]], ...]:
    """(started, runner, {outcome: tests}) for every run of the last ``last_n`` nightlies,
    oldest first."""
    runs = db.execute(
        "SELECT id, started, runner FROM runs WHERE started IN (SELECT started FROM runs "
        "    GROUP BY started ORDER BY started DESC LIMIT ?) ORDER BY started, id",
        (last_n,),
    ).fetchall()
    # the counts stored with each run: counting the window's results took 0.7 s a night for
    # 60 nights of a 3 × 20,000-test fleet (2.1 s as one grouped join)
    out: dict[tuple[str, str], dict[str, int]] = {}
    for run, started, runner in runs:
        for outcome, count in db.execute(
            "SELECT outcome, tests FROM run_outcomes WHERE run_id = ?", (run,)
        ):
            out.setdefault((started, runner), {o.value: 0 for o in Outcome})[outcome] = count
    return tuple((started, runner, counts) for (started, runner), counts in out.items())


def record_paths(db: HistoryDB, run_ids: Iterable[int], counts: Mapping[str, int]) -> None:
    """Store the tree's overloads per MPS path with each run of the night (in the caller's
    transaction): pruned with its runs, read back by :func:`path_counts`."""
    db.executemany(
        "INSERT INTO exec_paths (run_id, path, overloads) VALUES (?, ?, ?)",
        [(run, path, n) for run in run_ids for path, n in counts.items()],
    )


def path_counts(db: HistoryDB, last_n: int) -> tuple[tuple[str, dict[str, int]], ...]:
    """(started, {path: overloads}) for the last ``last_n`` nightlies that recorded them,
    oldest first (every run of a night holds the same counts: the first run's are read). A
    read-only older history without the table has none."""
    if not db.columns("exec_paths"):
        return ()
    rows = db.execute(
        "SELECT r.started, p.path, p.overloads FROM exec_paths AS p JOIN runs AS r "
        "ON r.id = p.run_id WHERE p.run_id IN (SELECT MIN(p2.run_id) FROM exec_paths AS p2 "
        "JOIN runs AS r2 ON r2.id = p2.run_id GROUP BY r2.started ORDER BY r2.started DESC "
        "LIMIT ?) ORDER BY r.started, p.path",
        (last_n,),
    )
    out: dict[str, dict[str, int]] = {}
    for started, path, n in rows:
        out.setdefault(started, {})[path] = n
    return tuple(out.items())


# run_devices' columns are device.json's keys, in its order
DEVICE_COLUMNS = tuple(DeviceJson.__annotations__)


def record_devices(db: HistoryDB, devices: Mapping[int, Device]) -> None:
    """Store the device each run's results came from (run id -> device, in the caller's
    transaction): a VM's too, so its pass/fail results stay marked as a VM's. A run left
    out has an unknown device."""
    db.executemany(
        f"INSERT INTO run_devices (run_id, {', '.join(DEVICE_COLUMNS)}) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(run, *d.to_dict().values()) for run, d in devices.items()],
    )


def device_of(row: Sequence[object], where: str) -> Device:
    """A run_devices row's device columns (in :data:`DEVICE_COLUMNS`' order)."""
    return Device.from_dict(dict(zip(DEVICE_COLUMNS, row, strict=True)), where)


def prune(db: HistoryDB, keep: int) -> int:
    """Delete all but the last ``keep`` nightlies (and tests no run refers to any more).

    Returns how many nightlies were deleted.
    """
    with db:
        db.lock_writes()
        old = db.execute(
            "SELECT started FROM runs GROUP BY started ORDER BY started DESC"
        ).fetchall()[keep:]
        if not old:
            return 0
        by_night = "SELECT id FROM runs WHERE started = ?"
        gone = [run for (started,) in old for (run,) in db.execute(by_night, (started,))]
        # the tests of the runs going; those the newest nightly has stay (one primary key
        # lookup each): scanning every result for the unreferenced tests took 1.3 s on 180
        # nights of a 3 × 20,000-test fleet, and the tests of a night rarely change
        candidates: set[int] = set()
        for run in gone:
            candidates.update(t for (t,) in db.execute(
                "SELECT test_id FROM results WHERE run_id = ?", (run,)))  # fmt: skip
        db.executemany("DELETE FROM runs WHERE started = ?", old)
        newest = db.execute("SELECT id, started FROM runs ORDER BY started DESC, id").fetchall()
        for run, started in newest:
            if started != newest[0][1]:
                break  # the newest nightly's runs only
            candidates.difference_update(t for (t,) in db.execute(
                "SELECT test_id FROM results WHERE run_id = ?", (run,)))  # fmt: skip
        if len(candidates) > 1000:
            db.execute("DELETE FROM tests WHERE id NOT IN (SELECT DISTINCT test_id FROM results)")
        elif candidates:
            runs = [run for run, _ in newest]
            unused = [
                (t,) for t in sorted(candidates)
                if not any(db.execute("SELECT 1 FROM results WHERE run_id = ? AND test_id = ?",
                                      (run, t)).fetchone() for run in runs)
            ]  # fmt: skip
            db.executemany("DELETE FROM tests WHERE id = ?", unused)
    return len(old)
