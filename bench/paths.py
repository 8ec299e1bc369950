"""Issue 31's figures: `paths` over the whole tree of the newest release (its real
native_functions.yaml and stub headers) with the current-shaped host and kernel files of
tests/fixtures/upstream, warm (the index cache filled); and the overloads on each path."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from bench.common import BenchError, Context, Figure, Result, _median, settings_for, timed
from pipeline.tree import paths

UPSTREAM = Path(__file__).parents[1] / "tests" / "fixtures" / "upstream"


def paths_tree(ctx: Context) -> tuple[Path, str]:
    """The newest release's files (tests/releases.py) with the fixtures' .mm and .metal."""
    from tests.releases import NEWEST, WheelUnavailable, release_tree

    try:
        wheel = release_tree(NEWEST)
    except WheelUnavailable as exc:
        raise BenchError(f"torch {NEWEST}'s files: {exc}") from exc
    root = ctx.work / f"paths-{NEWEST}"
    if not root.exists():
        shutil.copytree(wheel / "aten", root / "aten")
        for pattern in (paths.KERNELS_METAL, paths.OPERATIONS_MM, paths.OPINFO_TABLE):
            for src in sorted(UPSTREAM.glob(pattern)):
                dest = root / src.relative_to(UPSTREAM)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dest)
    return root, NEWEST


def bench_paths(ctx: Context) -> Result:
    """Warm ``paths`` over every operator: in process, and as a whole command."""
    from pipeline.guide.exec_paths import operator_paths
    from pipeline.tree.index import load_index

    root, version = paths_tree(ctx)
    settings = settings_for(root, ctx.work / "state-paths", opinfo_table=root / paths.OPINFO_TABLE)
    load_index(settings.tree)  # fills the cache: what "warm" means
    n = ctx.repeats(7)
    report = operator_paths(load_index(settings.tree))
    in_process = timed(lambda: operator_paths(load_index(settings.tree)), n)
    argv = [sys.executable, "-m", "pipeline", "paths", "--json", "--root", str(root),
            "--state-dir", str(settings.state_dir), "--opinfo-table",
            str(root / paths.OPINFO_TABLE)]  # fmt: skip

    def command() -> None:
        subprocess.run(argv, env=dict(ctx.env), capture_output=True, check=True)

    command()
    whole = timed(command, n)
    counts = report.counts()
    overloads = sum(counts.values())
    figures = [
        Figure(f"warm paths in process (load_index + classify), median of {n}",
               _median(in_process), "s", "≤ 1 s", True),
        Figure(f"warm `mps-pipeline paths --json` as a process, median of {n}",
               _median(whole), "s", "≤ 1 s", True),
        *(Figure(f"  overloads on {p}", c, f"({100 * c / overloads:.1f}%)")
          for p, c in counts.items()),
        Figure("  flags", len(report.flags), ""),
    ]  # fmt: skip
    return Result(
        "paths",
        f"paths over the whole tree of torch {version}",
        f"`paths` for all {len(report.operators):,} operators ({overloads:,} overloads) of torch "
        f"{version}'s native_functions.yaml and native/*.h, with tests/fixtures/upstream's "
        ".mm/.metal files (the wheel ships none), the index cache warm",
        tuple(figures),
        (
            "the wheel has no native/*.cpp: a shared kernel's stub is found by its name, and a "
            "composite's callees are not read; rows naming *_mps functions the fixtures do not "
            "define are unknown, so these counts describe this tree, not upstream's main",
        ),
        {
            "in_process_s": in_process,
            "process_s": whole,
            "counts": {p.value: c for p, c in counts.items()},
            "flags": len(report.flags),
        },
    )
