"""Each hot path against what a user would pick instead, measured side by side in one run.

Both sides are whole processes (interpreter start-up and imports included, as a user pays
them) on the same input, their runs alternating (A, B, A, B...) so that a change in the
machine's load hits both; the figures are medians, of wall time and of each process's own
CPU time (user + system: on a shared machine the steadier of the two). Each process
reports its own peak resident memory (``bench.rss.peak_rss_mb``) on its last line.

- ``junit-peer``: :func:`pipeline.results.junit.parse_report` against junitparser's
  ``JUnitXml.fromfile`` plus a walk over every case that reads what ``parse_report``
  gives: classname, name, time and each result element's tag, message and type;
- ``yaml-peer``: :func:`pipeline.tree.native_yaml.parse` of the wheel's
  native_functions.yaml against torchgen's ``parse_native_yaml`` of the same file.

The tasks' peers (doit's no-op floor, ``python -c pass``) are measured by the ``audit`` and
``migrate`` benchmarks, the nightly's (the same nightly with its integrity check off) by
``fleet``; every benchmark's comparisons are gathered in the closing ratio table.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.common import (
    REPO,
    WHEEL_FILES,
    BenchError,
    Context,
    Figure,
    Result,
    _median,
    wheel_file,
)

JUNIT_CASES = 100_000
# appended to every child: its peak resident memory, in MiB (bench.rss.peak_rss_mb)
_PEAK = "\nfrom bench.rss import peak_rss_mb\nprint('peak', peak_rss_mb())\n"
_OURS_JUNIT = """\
import sys
from pipeline.results.junit import parse_report
report = parse_report(sys.argv[1])
print(len(report.cases))
"""
_JUNITPARSER = """\
import sys
from junitparser import JUnitXml
xml = JUnitXml.fromfile(sys.argv[1])
seen = set()
for suite in xml:
    for case in suite:
        found = (case.classname, case.name, case.time,
                 [(r._tag, r.message, r.type) for r in case.result])
        seen.add((case.classname, case.name))
print(len(seen))
"""
_OURS_YAML = """\
import sys
from pathlib import Path
from pipeline.tree import native_yaml
parsed = native_yaml.parse(Path(sys.argv[1]).read_text(encoding="utf-8"), sys.argv[1])
print(len(parsed.entries))
"""
_TORCHGEN = """\
import sys
from torchgen.gen import parse_native_yaml
parsed = parse_native_yaml(sys.argv[1], sys.argv[2])
print(len(parsed.native_functions))
"""


def _timed_child(ctx: Context, argv: Sequence[str]) -> tuple[float, str]:
    """Run ``argv`` (it must succeed): its wall seconds and its stdout."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        list(argv), cwd=REPO, env=dict(ctx.env), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    out, err = proc.communicate()
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise BenchError(f"`{' '.join(argv[:3])} ...` exited {proc.returncode}: {err[-400:]}")
    return wall, out


def side_by_side(
    ctx: Context, programs: Mapping[str, tuple[str, Sequence[str]]], n: int
) -> dict[str, dict[str, list[Any]]]:
    """``n`` runs of each ``python -c CODE ARGS`` of ``programs`` (name -> (code, args)),
    alternating: per name, the wall and CPU seconds, peak MiB and first output line of
    each run."""
    import resource

    found: dict[str, dict[str, list[Any]]] = {
        name: {"seconds": [], "cpu_s": [], "peak_mib": [], "output": []} for name in programs
    }
    for _ in range(n):
        for name, (code, args) in programs.items():
            # the CPU of this child alone (user + system), which a loaded machine inflates
            # least: the kernel's account of the reaped children, before and after
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            wall, stdout = _timed_child(ctx, [sys.executable, "-c", code + _PEAK, *args])
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            found[name]["seconds"].append(wall)
            found[name]["cpu_s"].append(cpu)
            lines = stdout.split("\n")
            peak = next(line for line in reversed(lines) if line.startswith("peak "))
            found[name]["peak_mib"].append(float(peak.split()[1]))
            found[name]["output"].append(lines[0])
    return found


def _comparison(path: str, ours: float, peer: float, peer_name: str, unit: str) -> dict:
    return {"path": path, "ours": ours, "peer": peer, "peer_name": peer_name, "unit": unit}


def bench_junit_peer(ctx: Context, n_cases: int = JUNIT_CASES) -> Result:
    """parse_report against junitparser, time and peak memory, on one generated report."""
    from bench.synthetic import make_report

    path = ctx.work / f"junit-peer-{n_cases}.xml"
    path.write_text(make_report(n_cases), encoding="utf-8")
    n = max(5, ctx.repeats(7))
    got = side_by_side(
        ctx, {"ours": (_OURS_JUNIT, [str(path)]), "junitparser": (_JUNITPARSER, [str(path)])}, n
    )
    counts = {name: set(runs["output"]) for name, runs in got.items()}
    if counts != {"ours": {str(n_cases)}, "junitparser": {str(n_cases)}}:
        raise BenchError(f"the two readers found different test ids: {counts}")
    t = {name: _median(runs["seconds"]) for name, runs in got.items()}
    cpu = {name: _median(runs["cpu_s"]) for name, runs in got.items()}
    m = {name: _median(runs["peak_mib"]) for name, runs in got.items()}
    what = f"read {n_cases:,} JUnit test cases"
    peer = "junitparser JUnitXml.fromfile + a walk over every case"
    return Result(
        "junit-peer",
        "JUnit reading against junitparser",
        f"whole processes on make_report({n_cases:,}) ({path.stat().st_size / 1e6:.1f} MB), "
        f"{n} runs each, alternating: `parse_report(path)` against `{peer}` reading each "
        "case's classname, name, time and results (tag, message, type)",
        (
            Figure(f"parse_report process, median of {n}", t["ours"], "s", "", True),
            Figure("  junitparser process", t["junitparser"], "s"),
            Figure("  ours / junitparser, time", t["ours"] / t["junitparser"], "x", "<= 0.5", True),
            Figure("parse_report process, CPU (user + system)", cpu["ours"], "s"),
            Figure("  junitparser process, CPU", cpu["junitparser"], "s"),
            Figure(
                "  ours / junitparser, CPU", cpu["ours"] / cpu["junitparser"], "x", "<= 0.5", True
            ),
            Figure("parse_report peak memory", m["ours"], "MiB", "", True),
            Figure("  junitparser peak memory", m["junitparser"], "MiB"),
            Figure("  ours / junitparser, memory", m["ours"] / m["junitparser"], "x", "< 1", True),
        ),
        ("both count the same distinct test ids (a rerun's attempts fold into one)",),
        {
            "runs": got,
            "vs_peer": [
                _comparison(what, t["ours"], t["junitparser"], peer, "s"),
                _comparison(f"{what}: CPU", cpu["ours"], cpu["junitparser"], peer, "s"),
                _comparison(f"{what}: peak memory", m["ours"], m["junitparser"], peer, "MiB"),
            ],
        },
    )


def bench_yaml_peer(ctx: Context) -> Result:
    """Our native_functions.yaml reader against torchgen's, on the torch 2.13.0 wheel's file."""
    from pipeline.tree import paths

    yaml = wheel_file(*WHEEL_FILES[paths.NATIVE_YAML])
    tags = wheel_file("torchgen", "packaged/ATen/native/tags.yaml")
    if yaml is None or tags is None:
        raise BenchError("torchgen's packaged native_functions.yaml not found: install torch")
    n = max(5, ctx.repeats(7))
    got = side_by_side(
        ctx,
        {"ours": (_OURS_YAML, [str(yaml)]), "torchgen": (_TORCHGEN, [str(yaml), str(tags)])},
        n,
    )
    t = {name: _median(runs["seconds"]) for name, runs in got.items()}
    cpu = {name: _median(runs["cpu_s"]) for name, runs in got.items()}
    lines = len(Path(yaml).read_text(encoding="utf-8").splitlines())
    what = f"read native_functions.yaml ({lines:,} lines)"
    return Result(
        "yaml-peer",
        "native_functions.yaml against torchgen",
        f"whole processes, {n} runs each, alternating: native_yaml.parse of the wheel's "
        "file against torchgen.gen.parse_native_yaml(yaml, tags) of the same file",
        (
            Figure(f"native_yaml.parse process, median of {n}", t["ours"], "s", "", True),
            Figure("  torchgen parse_native_yaml process", t["torchgen"], "s"),
            Figure("  ours / torchgen", t["ours"] / t["torchgen"], "x", "< 1", True),
            Figure("  ours / torchgen, CPU", cpu["ours"] / cpu["torchgen"], "x"),
        ),
        (f"entries: ours {got['ours']['output'][0]}, torchgen {got['torchgen']['output'][0]}",),
        {
            "runs": got,
            "vs_peer": [
                _comparison(what, t["ours"], t["torchgen"], "torchgen parse_native_yaml", "s"),
                _comparison(f"{what}: CPU", cpu["ours"], cpu["torchgen"], "torchgen", "s"),
            ],
        },
    )
