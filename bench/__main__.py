"""Performance figures for issue notes: ``python -m bench [--quick] [--only NAME...]``.

Every figure is a median of repeated runs, or a ratio of two medians, printed with what it
measures. The goal an issue set is shown beside it for context; nothing is checked against
it, so the command only fails when a benchmark cannot run at all.

Benchmarks (``--only`` names):

- ``index``: a cold ``build_index`` of the real wheel files, with a per-reader breakdown;
- ``audit``: a warm ``doit audit op=atan2`` against doit's own floor and a bare interpreter,
  the same audit through ``python -m pipeline``, and where the time goes (cProfile phases,
  ``-X importtime`` of ``pipeline.tasks``);
- ``migrate``: a no-op ``doit migrate_op op=atan2`` (everything up to date) against the floor;
- ``junit``: parsing a 100,000-testcase JUnit report;
- ``junit-peer``, ``yaml-peer``: whole processes side by side with junitparser (time and
  peak memory) and torchgen's ``parse_native_yaml`` (see :mod:`bench.peers`);
- ``shards``: planning 20,000 tests' shards from a history of 7 nights × 3 runners;
- ``fleet``: a nightly at fleet size (3 runners × 20,000 results, 180 nights kept): history
  generation, one night's ingestion in a subprocess (time, peak RSS) with the history's
  integrity check and without it, alternately, the history's size, the analysis,
  ``shards`` planning, summary.json's and the dashboard's sizes (see :mod:`bench.fleet`);
- ``server``: the history on a PostgreSQL server against the SQLite file at fleet size (3
  runners × 20,000 results, 365 nights): one night on each, the dashboard's queries, four
  aggregation jobs at once, one night's export (see :mod:`bench.server`);
- ``dashboard``: index.html's size at 100,000 results a night;
- ``selection``: tests selected for single-operator changes, sandbox and real yaml, and
  whether the changed operator was missed;
- ``kernel``: check-kernel's fixture files built cold and cached, a 2048x2048 softmax per
  schedule, and upstream's kernel files that compile (see :mod:`bench.kernel`);
- ``review``: the review checks on a 1,000-line diff (:mod:`bench.review`);
- ``paths``: warm ``paths`` over every operator of the newest release's yaml, with the
  upstream-shaped fixtures' host and kernel files, and the overloads on each path;
- ``tracker``: one migration-tracker update for 300 operators and 200 open PRs against a
  local GitHub: requests the first time and when nothing changed, and its time.

Counts read from the source rather than timed (string-key lookups, untyped mappings, where
errors become exit codes, long functions) are ``python -m bench.code`` (:mod:`bench.code`).

All trees, doit databases and state directories are temporary. What is kept between runs,
under ``--cache-dir``, is only what a user's machine keeps too: the op_db dump and a
bytecode cache for the subprocesses. Results are also written to ``<cache-dir>/bench.json``.
The closing ratio table puts every hot path beside its peer measured in the same run.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Mapping, Sequence
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bench.common import (
    _FLOOR_DODO,
    DODO,
    WHEEL_FILES,
    BenchError,
    Context,
    Figure,
    Result,
    _median,
    command,
    doit_command,
    make_context,
    round_robin,
    run,
    settings_for,
    timed,
    wheel_file,
)
from bench.fleet import FLEET_RUNNERS, bench_dashboard, bench_fleet  # noqa: F401 (FLEET_RUNNERS: re-exported)
from bench.paths import bench_paths
from bench.peers import bench_junit_peer, bench_yaml_peer
from bench.server import bench_server
from pipeline import sandbox
from pipeline.config import Settings, load_settings
from pipeline.errors import PipelineError
from pipeline.fsio import write_atomic
from pipeline.impact.changes import ChangedFile
from pipeline.tree import common_mps, metal, native_yaml, objc, opinfo, paths
from pipeline.workspace import prepare

NATIVE_YAML = paths.NATIVE_YAML
COMMON_MPS = paths.COMMON_MPS
BENCHMARKS = (
    "index", "audit", "migrate", "transaction", "junit", "junit-peer", "yaml-peer", "shards",
    "fleet", "dashboard", "server", "suspects", "selection", "math", "kernel", "review",
    "tracker", "paths", "shaders",
)  # fmt: skip
AUDIT_OP = "atan2"
# real native_functions.yaml edits: the first MPS-specific entry of each is folded
REAL_FOLDS = ("logit", "pow", "addbmm")
JUNIT_CASES = 100_000
SUSPECT_COMMITS = 50  # a night's range of PyTorch commits
SUSPECT_OPS = 5  # regressed operators whose suspects are named over that range
SHARD_TESTS = 20_000  # the shards benchmark's suite, recorded for 7 nights on 3 runners
WIDTH = 100  # of the printed report (notes are wrapped to it)
# --- trees and settings ---------------------------------------------------------------------


def real_tree(ctx: Context) -> Path:
    """A temporary tree of the wheel's yaml and common_mps.py plus the sandbox's sources.

    The wheel has no ``.metal``/``.mm`` files, so the sandbox's stand in; its static OpInfo
    table is copied too, for benchmarks that must not import op_db.
    """
    if "real_tree" in ctx.memo:
        return ctx.memo["real_tree"]
    root = ctx.work / "real-tree"
    for rel, (package, inside) in WHEEL_FILES.items():
        src = wheel_file(package, inside)
        if src is None:
            raise BenchError(f"{package}/{inside} not found: install torch==2.13.0 (nox -s bench)")
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, root / rel)
    patterns = (paths.KERNELS_METAL, paths.OPERATIONS_MM, paths.OPINFO_TABLE)
    for src in sorted(p for pattern in patterns for p in sandbox.TREE.glob(pattern)):
        dest = root / src.relative_to(sandbox.TREE)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
    ctx.memo["real_tree"] = root
    return root


def changed_file(path: str, old: str, new: str) -> ChangedFile:
    """``old`` -> ``new`` of one file as a ChangedFile with the line ranges a diff reports."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    old_ranges, new_ranges = [], []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, a, b).get_opcodes():
        if tag == "equal":
            continue
        if i2 > i1:
            old_ranges.append((i1 + 1, i2))
        if j2 > j1:
            new_ranges.append((j1 + 1, j2))
    return ChangedFile(path, "M", old, new, tuple(old_ranges), tuple(new_ranges))


# --- 1. cold index ----------------------------------------------------------------------------


def bench_index(ctx: Context) -> Result:
    """Median of cold ``build_index`` runs on the real wheel files, and per reader."""
    from pipeline.tree.index import build_index, load_index

    root = real_tree(ctx)
    table = root / sandbox.OPINFO_TABLE
    settings = settings_for(root, ctx.work / "state-index", opinfo_table=table)
    n = ctx.repeats(5)
    cold = timed(lambda: build_index(settings.tree), n)
    readers = {
        "native_yaml.read": lambda: native_yaml.read(root),
        "metal.read": lambda: metal.read(root),
        "objc.read": lambda: objc.read(root),
        "common_mps.read": lambda: common_mps.read(root),
        "opinfo.load_opinfos (table)": lambda: opinfo.load_opinfos(settings.tree),
    }
    per_reader = {name: timed(fn, n) for name, fn in readers.items()}
    load_index(settings.tree)  # fills the cache
    warm = timed(lambda: load_index(settings.tree), n)
    lines = len((root / NATIVE_YAML).read_text().splitlines())
    index = build_index(settings.tree)
    figures = [
        Figure(f"cold build_index, median of {n}", _median(cold), "s", "< 1.5 s", True),
        *(Figure(f"  {name}", _median(s), "s") for name, s in per_reader.items()),
        Figure(f"warm load_index (cache hit), median of {n}", _median(warm), "s"),
    ]
    return Result(
        "index",
        "cold index of the real tree",
        f"build_index() with no index cache on a temporary tree of the torch 2.13.0 wheel's "
        f"native_functions.yaml ({lines:,} lines, {len(index.native.entries):,} entries) and "
        f"common_mps.py ({len(index.xfails.entries)} xfail entries), plus the sandbox's "
        f".metal/.mm files; then each reader alone",
        tuple(figures),
        (
            "OpInfos come from the sandbox's static table: the op_db import (seconds, cached "
            "on disk after the first run) is excluded",
            "input files are in the OS page cache; 'cold' means no index cache",
        ),
        {
            "cold_s": cold,
            "per_reader_s": per_reader,
            "warm_load_index_s": warm,
            "yaml_lines": lines,
        },
    )


# --- 2. warm audit ----------------------------------------------------------------------------


def doit_floor(ctx: Context) -> Callable[[], object]:
    """doit's own cost: a dodo with one always-up-to-date task, run like ours, as a callable
    (its first, untimed run done)."""
    floor = ctx.work / "floor"
    dodo = floor / "dodo.py"
    argv = [*doit_command(), "-f", str(dodo), "-d", str(floor), "noop"]
    if not dodo.is_file():
        floor.mkdir(parents=True, exist_ok=True)
        dodo.write_text(_FLOOR_DODO.format(dep_file=str(floor / "doit.sqlite")))
        run(ctx, argv, floor)
    return command(ctx, argv, floor)


def doit_pipeline(cwd: Path, state: Path, *args: str) -> list[str]:
    """``doit -f <repo>/dodo.py -d <cwd> ARGS state_dir=<state>``."""
    return [*doit_command(), "-f", str(DODO), "-d", str(cwd), *args, f"state_dir={state}"]


# cumulative-time phases of one cProfile'd run: (file suffix, function) -> label
DOIT_PHASES = {
    ("doit/__main__.py", "main"): "profiled total (after interpreter start-up)",
    ("doit/loader.py", "get_module"): "import dodo.py (pipeline.tasks and its imports)",
    ("doit/loader.py", "load_tasks"): "create tasks (task_* functions, file_dep globs)",
    ("doit/runner.py", "run_all"): "run (up-to-date checks, actions)",
}
CLI_PHASES = {
    ("pipeline/__main__.py", "<module>"): "profiled total (after interpreter start-up)",
    ("importlib/__init__.py", "import_module"): "import the command's module",
    ("pipeline/config.py", "load_settings"): "load_settings",
    ("pipeline/tree/index.py", "load_index"): "load_index (warm cache)",
    ("pipeline/tree/index.py", "find_references"): "find_references (git grep)",
    ("pipeline/report/guide.py", "render_checklist"): "render the checklist",
}


def profile_phases(
    ctx: Context, module_argv: Sequence[str], cwd: Path, phases: Mapping[tuple[str, str], str]
) -> dict[str, float]:
    """Cumulative seconds of ``phases`` in one cProfile'd ``python -m MODULE ARGS`` run.

    cProfile slows Python code down, so read these as shares of the profiled total.
    """
    out = ctx.work / "phases.prof"
    argv = [sys.executable, "-m", "cProfile", "-o", str(out), "-m", *module_argv]
    run(ctx, argv, cwd, ok=(0, 1))
    found: dict[str, float] = {}
    stats = pstats.Stats(str(out)).stats  # type: ignore[attr-defined]
    for (filename, _line, func), stat in stats.items():
        for (suffix, name), label in phases.items():
            if func == name and filename.replace(os.sep, "/").endswith(suffix):
                found[label] = max(found.get(label, 0.0), stat[3])
    return {label: found[label] for label in phases.values() if label in found}


def import_breakdown(
    ctx: Context, module: str, preload: str = "", top: int = 3
) -> dict[str, float]:
    """Median cumulative import seconds of ``module``, of its ``top`` costliest direct
    imports, and of the chain of imports that dominates the costliest one.

    ``preload`` is imported first (what the caller has already imported). From
    ``-X importtime``, whose own overhead inflates the numbers a little.
    """
    code = f"{preload}; import {module}" if preload else f"import {module}"
    runs = []
    for _ in range(ctx.repeats(3)):
        proc = run(ctx, [sys.executable, "-X", "importtime", "-c", code], ctx.work)
        runs.append(import_costs(proc.stderr, module))
    med = {name: _median([r[name] for r in runs if name in r]) for r in runs for name in r}
    chains = sorted((n for n in med if " > " in n), key=med.__getitem__, reverse=True)[:1]
    children = [n for n in med if n != module and " > " not in n]
    heavy = sorted(children, key=med.__getitem__, reverse=True)[:top]
    return {n: med[n] for n in [module, *heavy, *chains] if n in med}


def import_costs(importtime: str, module: str) -> dict[str, float]:
    """From ``-X importtime`` output: cumulative seconds of ``module`` and of each of its
    direct imports over 1 ms, and ``a > b > c`` for the chain below the costliest direct
    import while each link holds at least half of its parent's time."""
    rows: list[tuple[int, str, float]] = []
    for line in importtime.splitlines():
        if not line.startswith("import time:") or line.count("|") != 2:
            continue
        _, cumulative, name = line.split("|")
        if not cumulative.strip().isdigit():
            continue  # the header line
        depth = (len(name) - len(name.lstrip(" "))) // 2
        rows.append((depth, name.strip(), int(cumulative) / 1e6))

    def children(i: int) -> list[int]:
        # an import's own imports are printed before it, one level deeper
        found = []
        for j in range(i - 1, -1, -1):
            if rows[j][0] <= rows[i][0]:
                break
            if rows[j][0] == rows[i][0] + 1:
                found.append(j)
        return sorted(found, key=lambda j: rows[j][2], reverse=True)

    at = next((i for i, row in enumerate(rows) if row[1] == module), None)
    if at is None:
        return {}
    costs = {module: rows[at][2]}
    heavy = [j for j in children(at) if rows[j][2] > 0.001]
    costs.update((rows[j][1], rows[j][2]) for j in heavy)
    if heavy:
        chain, link = [rows[heavy[0]][1]], heavy[0]
        while (below := children(link)) and rows[below[0]][2] >= rows[link][2] / 2:
            link = below[0]
            chain.append(rows[link][1])
        if len(chain) > 1:
            costs[" > ".join(chain)] = rows[link][2]
    return costs


def audit_in_process(settings: Settings, n: int) -> list[float]:
    """The audit task's own work, in this process: warm load_index, record, checklist."""
    from pipeline.flows.audit import record_audit

    console = Console(file=io.StringIO(), width=100)
    return timed(lambda: record_audit(settings, AUDIT_OP, console), n)


def bench_audit(ctx: Context) -> Result:
    """Warm ``doit audit op=atan2`` against doit's floor, a bare python, and the CLI."""
    cwd, state = ctx.work / "cwd-audit", ctx.work / "state-audit"
    cwd.mkdir(parents=True, exist_ok=True)
    n = ctx.repeats(5)
    argv = doit_pipeline(cwd, state, "audit", f"op={AUDIT_OP}")
    run(ctx, argv, cwd)  # materialises the sandbox, fills the index cache and bytecode
    # the checklist fails for an operator still on MPSGraph: exit status 1 is the answer
    cli = [sys.executable, "-m", "pipeline", "audit", AUDIT_OP, "--state-dir", str(state)]
    run(ctx, cli, cwd, ok=(0, 1))
    samples = round_robin(
        {
            "audit": command(ctx, argv, cwd),
            "cli": command(ctx, cli, cwd, ok=(0, 1)),
            "floor": doit_floor(ctx),
            "python": command(ctx, [sys.executable, "-c", "pass"], ctx.work),
        },
        n,
    )
    audit, cli_runs, floor, python = (samples[k] for k in ("audit", "cli", "floor", "python"))
    settings = prepare(load_settings({"root": "sandbox", "state_dir": str(state)}, env={}, cwd=cwd))
    work = audit_in_process(settings, n)
    doit_args = argv[len(doit_command()) :]
    phases = profile_phases(ctx, ["doit", *doit_args], cwd, DOIT_PHASES)
    cli_phases = profile_phases(ctx, cli[2:], cwd, CLI_PHASES)
    imports = import_breakdown(ctx, "pipeline.tasks", "import doit.doit_cmd, doit.loader")
    cli_imports = import_breakdown(ctx, "pipeline.commands.audit", "import pipeline.__main__")
    m_audit, m_cli, m_floor, m_py = map(_median, (audit, cli_runs, floor, python))
    figures = [
        Figure(f"doit audit op={AUDIT_OP}, warm, median of {n}", m_audit, "s", "< 0.3 s", True),
        Figure("  doit floor (one up-to-date task, no deps)", m_floor, "s"),
        Figure("  python -c pass", m_py, "s"),
        Figure("  audit / doit floor", m_audit / m_floor, "x", headline=True),
        Figure("  audit / python -c pass", m_audit / m_py, "x"),
        Figure("  audit - doit floor", m_audit - m_floor, "s"),
        Figure(f"python -m pipeline audit {AUDIT_OP}, warm", m_cli, "s", "< 0.3 s", True),
        Figure("  CLI / python -c pass", m_cli / m_py, "x"),
        Figure("where the time goes: audit's work in-process (warm)", _median(work), "s"),
        *(Figure(f"  doit profile: {label}", secs, "s") for label, secs in phases.items()),
        *(
            Figure(f"  dodo import: {name}" + (" (after doit's)" if i == 0 else ""), secs, "s")
            for i, (name, secs) in enumerate(imports.items())
        ),
        *(Figure(f"  CLI profile: {label}", secs, "s") for label, secs in cli_phases.items()),
        *(
            Figure(f"  CLI import: {name}" + (" (after __main__)" if i == 0 else ""), secs, "s")
            for i, (name, secs) in enumerate(cli_imports.items())
        ),
    ]
    return Result(
        "audit",
        "warm audit",
        f"wall time of `doit -f dodo.py -d <tmp> audit op={AUDIT_OP} state_dir=<tmp>` on a "
        "sandbox copy after one untimed run (index cache warm), including interpreter start-up",
        tuple(figures),
        (
            "the four commands' runs alternate (round robin), so a change in load hits all; "
            "subprocesses use a bytecode cache (PYTHONPYCACHEPREFIX under the bench cache), as "
            "an installed package does"
            + (
                "; this shell sets PYTHONDONTWRITEBYTECODE=1, which would add a compile of "
                "every pipeline module to each start"
                if os.environ.get("PYTHONDONTWRITEBYTECODE")
                else ""
            ),
            "in-process: flows.audit.record_audit (load_index from its cache, record, checklist, "
            "render) timed in this process, no start-up or imports",
            "profile: one cProfile'd run each (inflated; read as shares of its total). import: "
            "-X importtime of pipeline.tasks after doit's modules (and of the CLI's audit module), "
            "its costliest direct imports, and the chain of imports that dominates the costliest",
        ),
        {
            "doit_audit_s": audit,
            "vs_peer": [
                {
                    "path": f"warm doit audit op={AUDIT_OP}",
                    "ours": m_audit,
                    "peer": m_floor,
                    "peer_name": "doit's floor: a no-op one-task dodo",
                    "unit": "s",
                },
                {
                    "path": f"warm mps-pipeline audit {AUDIT_OP}",
                    "ours": m_cli,
                    "peer": m_py,
                    "peer_name": "python -c pass",
                    "unit": "s",
                },
            ],  # fmt: skip
            "cli_audit_s": cli_runs,
            "doit_floor_s": floor,
            "python_s": python,
            "in_process_s": work,
            "doit_profile_s": phases,
            "cli_profile_s": cli_phases,
            "imports_s": imports,
            "cli_imports_s": cli_imports,
        },
    )


# --- 3. no-op migrate -------------------------------------------------------------------------


def bench_migrate(ctx: Context) -> Result:
    """``doit migrate_op op=atan2`` when every task is up to date, against doit's floor."""
    cwd, state = ctx.work / "cwd-migrate", ctx.work / "state-migrate"
    cwd.mkdir(parents=True, exist_ok=True)
    n = ctx.repeats(5)
    argv = doit_pipeline(cwd, state, "migrate_op", f"op={AUDIT_OP}")
    start = time.perf_counter()
    run(ctx, argv, cwd)
    first = time.perf_counter() - start
    executed: list[str] = []

    def once() -> None:
        out = run(ctx, argv, cwd).stdout
        # doit prints ". task" for a task it runs and "-- task" for one it skips
        executed.extend(line for line in out.splitlines() if line.startswith(". "))

    samples = round_robin({"noop": once, "floor": doit_floor(ctx)}, n)
    noop, floor = samples["noop"], samples["floor"]
    phases = profile_phases(ctx, ["doit", *argv[len(doit_command()) :]], cwd, DOIT_PHASES)
    m_noop, m_floor = _median(noop), _median(floor)
    figures = [
        Figure(
            f"no-op doit migrate_op op={AUDIT_OP}, median of {n}", m_noop, "s", "well < 1 s", True
        ),
        Figure("  doit floor (one up-to-date task, no deps)", m_floor, "s"),
        Figure("  no-op / doit floor", m_noop / m_floor, "x", headline=True),
        Figure("  no-op - doit floor", m_noop - m_floor, "s"),
        Figure("  tasks executed in the timed runs", len(executed), ""),
        *(Figure(f"  doit profile: {label}", secs, "s") for label, secs in phases.items()),
        Figure(
            "first run: edit, build, test, table, drop xfails (not part of figures)", first, "s"
        ),
    ]
    return Result(
        "migrate",
        "no-op migrate_op",
        f"wall time of `doit migrate_op op={AUDIT_OP}` on a sandbox copy where it already ran "
        "once (untimed): every stage up to date, so doit only loads tasks and checks file_deps",
        tuple(figures),
        (
            "the floor is the same doit, sqlite3 backend and interpreter; its runs alternate "
            "with the no-op's",
        ),
        {
            "noop_s": noop,
            "doit_floor_s": floor,
            "first_run_s": first,
            "profile_s": phases,
            "vs_peer": [
                {
                    "path": f"no-op doit migrate_op op={AUDIT_OP}",
                    "ours": m_noop,
                    "peer": m_floor,
                    "peer_name": "doit's floor: a no-op one-task dodo",
                    "unit": "s",
                },
            ],  # fmt: skip
        },
    )


# --- 3b. the edit transaction's cost -----------------------------------------------------------


def bench_transaction(ctx: Context) -> Result:
    """What the tree lock and the journaled commit cost, against plain atomic writes."""
    from pipeline.edit import transaction
    from pipeline.guide.plan import plan_edits
    from pipeline.tree.index import load_index

    n = ctx.repeats(15)
    root = sandbox.materialize(ctx.work / "txn-tree")
    settings = settings_for(root, ctx.work / "txn-state", opinfo_table=root / sandbox.OPINFO_TABLE)
    edits = plan_edits(load_index(settings.tree), AUDIT_OP).edits
    back = [dataclasses.replace(e, before=e.after, after=e.before) for e in edits]

    def lock() -> None:
        with transaction.tree_lock(root, wait=0):
            pass

    def recover_idle() -> None:
        with transaction.tree_lock(root, wait=0):
            transaction.recover(root)

    flip = [False]

    def commit() -> None:  # alternate forward and back, so every call writes every file
        transaction.commit(root, back if flip[0] else edits, force=True)
        flip[0] = not flip[0]

    def plain() -> None:
        for e in back if flip[0] else edits:
            write_atomic(root / e.rel, e.after)
        flip[0] = not flip[0]

    samples = round_robin(
        {"lock": lock, "recover": recover_idle, "commit": commit, "plain": plain}, n
    )
    m = {k: _median(v) for k, v in samples.items()}
    figures = [
        Figure(f"tree lock, take and release, median of {n}", m["lock"], "s"),
        Figure(
            "  lock + recover() with no journal (every writing stage pays this)", m["recover"], "s"
        ),
        Figure(f"journaled commit of {AUDIT_OP}'s {len(edits)} files", m["commit"], "s"),
        Figure(f"  plain atomic writes of the same {len(edits)} files", m["plain"], "s"),
        Figure("  commit / plain writes", m["commit"] / m["plain"], "x", headline=True),
        Figure("  journal's cost (commit - plain)", m["commit"] - m["plain"], "s"),
    ]
    return Result(
        "transaction",
        "edit transaction",
        "in-process cost of the per-tree lock (flock + git rev-parse for the tree's git dir) "
        "and of one journaled commit (guards incl. git status, journal, temps, renames, "
        "ownership) against writing the same files with fsio.write_atomic",
        tuple(figures),
        ("the calls alternate (round robin); the commit's guards run `git status` per file",),
        {k: v for k, v in samples.items()},
    )


# --- 4. JUnit ingestion -----------------------------------------------------------------------


def bench_junit(ctx: Context, n_cases: int = JUNIT_CASES) -> Result:
    """Median time of ``parse_report`` on a synthetic ``n_cases``-testcase report."""
    from bench.synthetic import make_report
    from pipeline.results.junit import parse_report

    path = ctx.work / f"junit-{n_cases}.xml"
    path.write_text(make_report(n_cases), encoding="utf-8")
    counts: list[int] = []
    samples: list[float] = []
    for _ in range(ctx.repeats(3)):
        start = time.perf_counter()
        report = parse_report(path)
        samples.append(time.perf_counter() - start)
        counts.append(len(report.cases))
        del report  # freeing 100,000 results is not part of parsing
    n = len(samples)
    if set(counts) != {n_cases}:
        raise BenchError(f"parse_report found {sorted(set(counts))} cases, expected {n_cases}")
    median = _median(samples)
    size = path.stat().st_size / 1e6
    return Result(
        "junit",
        "JUnit ingestion",
        f"parse_report() of make_report({n_cases:,}) written to a temporary file ({size:.1f} MB; "
        "pass/fail/error/xfail/xpass/skip mix and both rerun shapes)",
        (
            Figure(
                f"parse_report, {n_cases:,} testcases, median of {n}", median, "s", "< 1 s", True
            ),
            Figure("  throughput", n_cases / median, "cases/s"),
        ),
        (),
        {"parse_s": samples, "cases": n_cases, "megabytes": round(size, 2)},
    )


def bench_shards(ctx: Context, n_tests: int = SHARD_TESTS, nights: int = 7) -> Result:
    """``shards``' own work on a history of ``nights`` × 3 runners × ``n_tests`` tests with
    heavy-tailed durations: reading the durations, medians, estimates and the plan."""
    import random

    from pipeline.dtypes import MPS_TEST_DTYPES
    from pipeline.results import history, shards
    from pipeline.results.junit import CaseResult, Outcome

    rng = random.Random(7)
    names = [
        (f"op{i // len(MPS_TEST_DTYPES)}", MPS_TEST_DTYPES[i % len(MPS_TEST_DTYPES)])
        for i in range(n_tests)
    ]
    base = [rng.lognormvariate(-1.0, 1.75) for _ in names]
    path = ctx.work / "shards" / "nightly.sqlite"
    db = history.connect(path)
    try:
        for night in range(nights):
            runs = {
                runner: [
                    CaseResult(
                        "test_mps.TestConsistencyMPS",
                        f"test_output_match_{op}_mps_{dt}",
                        "output_match",
                        op,
                        dt,
                        Outcome.PASS,
                        False,
                        1,
                        "",
                        seconds * speed * rng.uniform(0.8, 1.2),
                        "bench",
                    )  # fmt: skip
                    for (op, dt), seconds in zip(names, base, strict=True)
                ]
                for runner, speed in (("m1", 1.3), ("m2", 1.0), ("m2-26", 1.0))
            }
            history.record_nightly(
                db, runs, commit="", started=history.timestamp(f"2026-03-{night + 1:02d}T03:17Z")
            )
    finally:
        db.close()
    suite = [shards.test_id("TestConsistencyMPS", f"test_output_match_{op}_mps_{dt}")
             for op, dt in names]  # fmt: skip
    reads, plans = [], []
    result = None
    for _ in range(ctx.repeats(5)):
        start = time.perf_counter()
        ro = history.open_read_only(path)
        try:
            found = history.durations(ro, nights)
        finally:
            ro.close()
        samples = {shards.test_id(c, n): v for (c, n), v in found.items()}
        read = time.perf_counter()
        estimates = shards.estimate(suite, shards.medians(samples))
        result, _ = shards.plan(estimates.seconds, 3)
        plans.append(time.perf_counter() - read)
        reads.append(read - start)
    assert result is not None
    count = shards.by_count(suite, estimates.seconds, 3)
    total = [r + p for r, p in zip(reads, plans, strict=True)]
    n = len(total)
    return Result(
        "shards",
        "Shard planning",
        f"shards' work without the OpInfo load: a history of {nights} nights × 3 runners × "
        f"{n_tests:,} tests ({path.stat().st_size / 1e6:.1f} MB), read, medians, estimates "
        "and a 3-shard plan",
        (
            Figure(f"plan {n_tests:,} tests, median of {n}", _median(total), "s", "", True),
            Figure("  reading the durations", _median(reads), "s"),
            Figure("  medians, estimates, LPT", _median(plans), "s"),
            Figure("  slowest / mean shard, by duration", result.ratio, "x", "<= 1.05"),
            Figure("  slowest / mean shard, by count", count.ratio, "x"),
        ),
        (),
        {
            "read_s": reads,
            "plan_s": plans,
            "tests": n_tests,
            "nights": nights,
            "ratio": result.ratio,
            "count_ratio": count.ratio,
        },  # fmt: skip
    )


# --- 5. test selection ------------------------------------------------------------------------


def sandbox_cases(root: Path, settings: Settings) -> list[tuple[str, str, tuple[ChangedFile, ...]]]:
    """One change per operator with MPS dispatch rows and Metal functors, of two kinds.

    ``dispatch``: every MPS dispatch row of the operator names another kernel.
    ``functor``: a statement is added to each of the operator's functors (for a functor a
    macro generates, next to the macro's invocation). Returns (operator, kind, changes).
    """
    from pipeline.tree.index import build_index

    index = build_index(settings.tree)
    yaml_text = (root / NATIVE_YAML).read_text()
    cases = []
    for op in index.operators():
        record = index.record(op, find_references=False)
        entries = index.entries_by_operator().get(op, ())
        rows = [r for e in entries for r in e.dispatch if "MPS" in r.keys]
        if not rows or not record.functors:
            continue
        lines = yaml_text.splitlines(keepends=True)
        for row in rows:
            lines[row.line - 1] = lines[row.line - 1].replace(row.kernel, row.kernel + "_v2", 1)
        cases.append((op, "dispatch", (changed_file(NATIVE_YAML, yaml_text, "".join(lines)),)))
        by_file: dict[str, list[metal.Functor]] = {}
        for functor in record.functors:
            by_file.setdefault(functor.span.path, []).append(functor)
        changes = []
        for rel, functors in sorted(by_file.items()):
            text = (root / rel).read_text()
            lines = text.splitlines(keepends=True)
            # bottom-up, so earlier line numbers stay valid
            for functor in sorted(functors, key=lambda f: f.span.start, reverse=True):
                if functor.macro:
                    end = functor.span.end - 1
                    lines[end] = lines[end].rstrip("\n") + ' static_assert(true, "bench");\n'
                else:
                    lines.insert(functor.span.start, "  static constexpr int bench_edit = 1;\n")
            changes.append(changed_file(rel, text, "".join(lines)))
        cases.append((op, "functor", tuple(changes)))
    return cases


def real_yaml_cases(root: Path) -> list[tuple[str, str, tuple[ChangedFile, ...]]]:
    """For each of REAL_FOLDS, its first MPS-specific entry folded into the shared CPU/CUDA
    row by the pipeline's own editor (only that entry's hunk is kept)."""
    from pipeline.edit.native_yaml import fold_mps_dispatch

    text = (root / NATIVE_YAML).read_text()
    old = text.splitlines(keepends=True)
    cases = []
    for op in REAL_FOLDS:
        result = fold_mps_dispatch(text, NATIVE_YAML, op)
        if not result.folded:
            continue
        new = result.edit.after.splitlines(keepends=True)
        # hunks come in file order, as the folded entries do: keep the first one
        hunk = next(o for o in SequenceMatcher(None, old, new).get_opcodes() if o[0] != "equal")
        _, i1, i2, j1, j2 = hunk
        after = "".join(old[:i1] + new[j1:j2] + old[i2:])
        cases.append((op, result.folded[0], (changed_file(NATIVE_YAML, text, after),)))
    return cases


def _selection_rows(
    root: Path,
    opinfos: Sequence[opinfo.OpInfoRecord],
    cases: Sequence[tuple[str, str, tuple[ChangedFile, ...]]],
) -> list[dict[str, Any]]:
    from pipeline.impact.selection import selection_report

    rows = selection_report(root, opinfos, [(op, changes) for op, _, changes in cases])
    for row, (_, what, _) in zip(rows, cases, strict=True):
        row["change"] = what
    return rows


def real_opinfos(ctx: Context, root: Path) -> tuple[tuple[opinfo.OpInfoRecord, ...], bool, float]:
    """op_db's OpInfos through load_opinfos (python = this interpreter), the dump cached under
    the bench cache; returns (records, whether the dump was cold, seconds)."""
    settings = settings_for(root, ctx.cache, opinfo_table=None)
    before = set(settings.cache_dir.glob("opinfo-*.json"))
    start = time.perf_counter()
    records = opinfo.load_opinfos(settings.tree)
    seconds = time.perf_counter() - start
    cold = bool(set(settings.cache_dir.glob("opinfo-*.json")) - before)
    return records, cold, seconds


def bench_selection(ctx: Context, *, real: bool = True) -> Result:
    """Tests selected for single-operator changes versus the suite, and misses."""
    root = ctx.work / "sandbox-selection"
    shutil.copytree(sandbox.TREE, root, ignore=shutil.ignore_patterns("__pycache__"))
    table = root / sandbox.OPINFO_TABLE
    settings = settings_for(root, ctx.work / "state-selection", opinfo_table=table)
    cases = sandbox_cases(root, settings)
    start = time.perf_counter()
    rows = _selection_rows(root, opinfo.load_table(table), cases)
    sandbox_s = time.perf_counter() - start
    figures = _selection_figures("sandbox", rows)
    figures.append(Figure("  analysis time for all sandbox cases", sandbox_s, "s"))
    notes = [
        f"sandbox: {len(cases)} changes over {len({op for op, _, _ in cases})} operators "
        "(each operator with MPS dispatch rows and functors: a dispatch-row edit and a "
        "functor edit)"
    ]
    data: dict[str, Any] = {"sandbox": rows}
    try:
        tree = real_tree(ctx) if real else None
    except BenchError as exc:
        tree = None
        notes.append(f"real yaml: not run: {exc}")
    if tree is not None:
        opinfos, cold, load_s = real_opinfos(ctx, tree)
        real_rows = _selection_rows(tree, opinfos, real_yaml_cases(tree))
        figures += _selection_figures("real yaml", real_rows)
        figures.append(
            Figure(
                f"  op_db load ({'cold: dumped by a subprocess' if cold else 'warm: cached'})",
                load_s,
                "s",
            )
        )
        folded = ", ".join(f"{r['change']}" for r in real_rows)
        notes.append(
            f"real yaml: one MPS-specific entry folded by pipeline.edit.native_yaml in the "
            f"wheel's native_functions.yaml ({folded}); OpInfos from the real op_db "
            f"({len(opinfos)} OpInfos) via load_opinfos, "
            + ("cold (first run: op_db imported in a subprocess)" if cold else "warm (cached dump)")
        )
        for row in real_rows:
            notes.append(
                f"  {row['change']}: selected {row['selected']} of {row['total']} "
                f"(own tests {row['own_tests']}), affected {row['affected']}, "
                f"missed {row['missed']}"
            )
        data["real_yaml"] = real_rows
        data["real_opinfo_cold"] = cold
        data["real_opinfo_load_s"] = load_s
    return Result(
        "selection",
        "test selection (issue 4)",
        "for each single-operator change: consistency tests selected by pipeline.impact versus "
        "the whole suite (every OpInfo x dtype, output_match), and whether the changed operator "
        "was missed (not named, and its tests not all selected)",
        tuple(figures),
        tuple(notes),
        data,
    )


def _selection_figures(label: str, rows: list[dict[str, Any]]) -> list[Figure]:
    if not rows:
        return [Figure(f"{label}: changes analysed", 0, "")]
    selected = [r["selected"] for r in rows]
    fractions = [100 * r["fraction"] for r in rows]
    return [
        Figure(f"{label}: tests selected per change, median", _median(selected), "tests"),
        Figure(f"  {label}: whole suite", rows[0]["total"], "tests"),
        Figure(f"  {label}: selected share, median", _median(fractions), "%", headline=True),
        Figure(f"  {label}: selected share, max", max(fractions), "%"),
        Figure(
            f"  {label}: changes selecting exactly the operator's own tests",
            sum(r["affected"] == [r["operator"]] and r["selected"] == r["own_tests"] for r in rows),
            f"of {len(rows)}",
        ),
        Figure(f"  {label}: full sweeps", sum(r["full_sweep"] for r in rows), ""),
        Figure(
            f"  {label}: changed operators missed", sum(r["missed"] for r in rows), "", "0", True
        ),
    ]


def bench_suspects(ctx: Context, n_commits: int | None = None) -> Result:
    """Naming the suspects of a night's regressions over a range of commits of a checkout."""
    from pipeline.impact.suspects import CommitAnalysis

    n_commits = n_commits or (10 if ctx.quick else SUSPECT_COMMITS)
    # the wheel's 15,789-line yaml, as a yaml commit costs on a real checkout
    root = ctx.work / "suspects-tree"
    shutil.copytree(real_tree(ctx), root)
    settings = settings_for(
        root, ctx.work / "suspects-state", opinfo_table=root / sandbox.OPINFO_TABLE
    )
    git = ["git", "-C", str(root), "-c", "user.name=bench", "-c", "user.email=bench@localhost"]

    def commit(message: str) -> str:
        subprocess.run([*git, "add", "-A"], check=True, capture_output=True)
        subprocess.run([*git, "commit", "-qm", message], check=True, capture_output=True)
        return subprocess.run(
            [*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True
        ).stdout.strip()

    subprocess.run([*git, "init", "-q"], check=True, capture_output=True)
    before = after = commit("base")
    # a realistic mix: mostly files no MPS rule reads, then host files, kernels, the yaml
    (root / "docs").mkdir()
    touched = [root / "docs" / "notes.md", root / "docs" / "notes.md",
               *sorted(root.glob(paths.OPERATIONS_MM))[:1],
               *sorted(root.glob(paths.KERNELS_METAL))[:1], root / NATIVE_YAML]  # fmt: skip
    for i in range(n_commits):
        target = touched[i % len(touched)]
        if target.suffix == ".md":
            change = f"\n# change {i}\n"
        elif target.suffix == ".yaml":  # a new operator's row: the whole yaml is read again
            change = f"\n- func: mps_bench_{i}(Tensor self) -> Tensor\n  variants: function\n"
        else:  # code every operator of the file may use
            change = f"\nstatic inline int mps_bench_helper_{i}() {{ return {i}; }}\n"
        with target.open("a", encoding="utf-8") as fh:
            fh.write(change)
        after = commit(f"change {i}: {target.name}")
    infos = opinfo.load_opinfos(settings.tree)
    ops = sorted({i.stem for i in infos})[:SUSPECT_OPS]

    found: dict[str, int] = {}

    def name_all() -> None:
        analysis = CommitAnalysis(root, infos)
        for op in ops:
            found[op] = len(analysis.suspects(before, after, op).suspects)
        found["analysed"] = analysis.analysed

    samples = timed(name_all, ctx.repeats(3))
    return Result(
        "suspects",
        "regression suspects over a range of commits",
        f"{n_commits} commits (docs, .mm, .metal, native_functions.yaml edits) on the wheel's "
        "yaml with the sandbox's kernels, "
        f"suspects named for {len(ops)} regressed operators, each commit analysed once",
        (
            Figure(f"{len(ops)} operators over {n_commits} commits", _median(samples), "s",
                   "< 5 s", True),
            Figure("  per commit", _median(samples) / n_commits, "s"),
        ),
        notes=("one commit in five edits native_functions.yaml: those dominate (the yaml is "
               "parsed for the commit and its parent)",),
        data={"commits": n_commits, "operators": ops, "found": found},
    )  # fmt: skip


# --- issue 20: review checks, tracker -----------------------------------------------------------


def _wrap_result(name: str, title: str, measures: str, out: tuple) -> Result:
    figures, notes, data = out
    return Result(name, title, measures, tuple(Figure(*f) for f in figures), tuple(notes), data)


def bench_review(ctx: Context) -> Result:
    from bench.review import review_figures

    root = ctx.work / "review-tree"
    shutil.copytree(sandbox.TREE, root, ignore=shutil.ignore_patterns("__pycache__"))
    table = root / sandbox.OPINFO_TABLE
    settings = settings_for(root, ctx.work / "review-state", opinfo_table=table)
    out = review_figures(settings, changed_file, ctx.repeats(5))
    return _wrap_result(
        "review",
        "review checks",
        "check_changes() with every check over one changed file",
        out,
    )


def bench_tracker(ctx: Context) -> Result:
    from bench.review import tracker_figures

    out = tracker_figures(ctx.work, settings_for)
    return _wrap_result(
        "tracker", "migration tracker",
        "update_tracker() twice against a local GitHub: requests sent and wall time", out,
    )  # fmt: skip


def bench_shaders(ctx: Context) -> Result:
    """Issue 32: the shader check after an incremental build, and the stale build caught."""
    from bench.shaders import shader_figures

    try:
        out = shader_figures(ctx.work, ctx.repeats(5))
    except RuntimeError as exc:  # no ninja
        raise BenchError(str(exc)) from exc
    return _wrap_result(
        "shaders", "shader check",
        "shaders.check() after `ninja torch_cpu` following a c10/metal header edit", out,
    )  # fmt: skip


# --- the command ------------------------------------------------------------------------------


def bench_math(ctx: Context) -> Result:
    """check-math: one functor cold and cached, 55 functors cold, the forms that compile."""
    from bench import math as math_bench

    try:
        result: Result = math_bench.run(ctx, Figure, Result)
    except RuntimeError as exc:  # no torch, no compiler
        raise BenchError(str(exc)) from exc
    return result


def bench_kernel(ctx: Context) -> Result:
    """check-kernel: fixture files cold and cached, a 2048x2048 softmax per schedule."""
    from bench import kernel as kernel_bench

    try:
        result: Result = kernel_bench.run(ctx, Figure, Result)
    except RuntimeError as exc:  # no torch, no compiler
        raise BenchError(str(exc)) from exc
    return result


RUNNERS: dict[str, Callable[[Context], Result]] = {
    "index": bench_index,
    "audit": bench_audit,
    "migrate": bench_migrate,
    "transaction": bench_transaction,
    "junit": bench_junit,
    "junit-peer": bench_junit_peer,
    "yaml-peer": bench_yaml_peer,
    "shards": bench_shards,
    "fleet": bench_fleet,
    "dashboard": bench_dashboard,
    "server": bench_server,
    "suspects": bench_suspects,
    "selection": bench_selection,
    "math": bench_math,
    "kernel": bench_kernel,
    "review": bench_review,
    "tracker": bench_tracker,
    "paths": bench_paths,
    "shaders": bench_shaders,
}


def render(result: Result, console: Console) -> None:
    """One benchmark's section: what it measures, its figures with goals, its notes."""
    console.print(f"[bold]{result.name}[/]: {result.title}")
    console.print(_wrap("measures: ", result.measures), markup=False)
    width = max(len(f.label) for f in result.figures) + 2
    for f in result.figures:
        goal = f"   goal: {f.goal}" if f.goal else ""
        console.print(f"  {f.label:<{width}}{f.text():>16}{goal}", markup=False)
    for note in result.notes:
        console.print(_wrap("note: ", note), markup=False, style="dim")
    console.print()


def _wrap(head: str, text: str) -> str:
    return textwrap.fill(
        text, WIDTH, initial_indent="  " + head, subsequent_indent="  " + " " * len(head)
    )


def summary_table(results: Sequence[Result], failures: Mapping[str, str]) -> Table:
    """The closing table: each benchmark's headline figures."""
    table = Table(title="mps-pipeline bench (medians; goals for context, not checked)")
    for column in ("benchmark", "figure", "value", "goal"):
        table.add_column(column, justify="right" if column == "value" else "left")
    for result in results:
        for f in result.figures:
            if f.headline:
                table.add_row(result.name, f.label.strip(), f.text(), f.goal)
    for name, error in failures.items():
        table.add_row(name, "[red]could not run[/]", "", escape(error.splitlines()[0][:60]))
    return table


def ratio_table(results: Sequence[Result]) -> Table:
    """Every hot path against its peer, measured in this run: ours, the peer, the ratio."""
    table = Table(title="ours against the peer a user would pick instead (same run, medians)")
    for column in ("hot path", "ours", "peer", "the peer", "ours / peer"):
        table.add_column(column, justify="left" if column in ("hot path", "the peer") else "right")
    for result in results:
        for c in result.data.get("vs_peer", ()):
            unit = c["unit"]
            ours, peer = (f"{c[k]:.3f} s" if unit == "s" else f"{c[k]:.0f} {unit}"
                          for k in ("ours", "peer"))  # fmt: skip
            table.add_row(c["path"], ours, peer, c["peer_name"], f"{c['ours'] / c['peer']:.2f}x")
    return table


def _load() -> float | None:
    """The 1-minute load average, where the platform has one."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (about a third)")
    parser.add_argument(
        "--only",
        nargs="+",
        choices=BENCHMARKS,
        metavar="NAME",
        help=f"run only these: {', '.join(BENCHMARKS)}",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "mps-pipeline-bench",
        help="kept between runs: op_db dump, bytecode, bench.json (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    console = Console(highlight=False, soft_wrap=True, width=max(WIDTH, Console().width))
    cache = args.cache_dir.resolve()
    cache.mkdir(parents=True, exist_ok=True)
    names = [n for n in BENCHMARKS if not args.only or n in args.only]
    results: list[Result] = []
    failures: dict[str, str] = {}
    started, load_before = time.perf_counter(), _load()
    with tempfile.TemporaryDirectory(prefix="mps-pipeline-bench-") as tmp:
        ctx = make_context(Path(tmp), cache, quick=args.quick)
        for name in names:
            try:
                result = RUNNERS[name](ctx)
            except (BenchError, PipelineError, OSError, subprocess.SubprocessError) as exc:
                failures[name] = str(exc)
                console.print(f"[bold]{name}[/]: [red]could not run[/]: {escape(str(exc))}\n")
                continue
            results.append(result)
            render(result, console)
    total, load = time.perf_counter() - started, (load_before, _load())
    console.print(summary_table(results, failures))
    if any(r.data.get("vs_peer") for r in results):
        console.print(ratio_table(results))
    if None not in load:
        console.print(
            f"load average (1 min) {load[0]:.2f} at start, {load[1]:.2f} at the end, on "
            f"{os.cpu_count()} CPUs: other work on the machine inflates wall times"
        )
    out = cache / "bench.json"
    out.write_text(
        json.dumps(
            {
                "python": sys.version.split()[0],
                "quick": args.quick,
                "total_s": round(total, 2),
                "cpus": os.cpu_count(),
                "load_average": load,
                "results": [dataclasses.asdict(r) for r in results],
                "failures": failures,
            },
            indent=1,
            default=str,
        )
        + "\n"
    )
    console.print(f"total {total:.1f} s; results also in {out}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
