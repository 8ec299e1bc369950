"""Issue 20's figures: the review checks on a 1,000-line diff, and one tracker update for
300 operators and 200 open PRs against a local GitHub (pytest-httpserver, real HTTP).

Each function returns plain figures (label, value, unit, goal, headline), notes and raw
data; ``bench/__main__.py`` wraps them into its ``Result``.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import timed
from pipeline import sandbox
from pipeline.config import Settings
from pipeline.tree import paths

Figures = list[tuple[str, float, str, str, bool]]
METAL = "aten/src/ATen/native/mps/kernels/BinaryKernel.metal"

# one added functor, about 25 lines: a bare max, a fast:: call, a helper c10/metal has
_FUNCTOR = """
struct bench{n}_functor {{
  template <typename T, enable_if_t<is_floating_point_v<T>, bool> = true>
  inline T operator()(const T a, const T b) {{
    const float x = float(a);
    const float y = float(b);
    const float m = max(x, y);
    const float s = fast::sin(x) + precise::cos(y);
    if (x < y) {{
      return static_cast<T>(m + s);
    }}
    return static_cast<T>(m - s);
  }}
  template <typename T, enable_if_t<is_integral_v<T>, bool> = true>
  inline float operator()(const T a, const T b) {{
    return c10::metal::max(float(a), float(b));
  }}
}};

template <typename T>
inline T bench{n}_floor_divide(T x, T y) {{
  return ::metal::floor(x / y);
}}

REGISTER_FLOAT_BINARY_OP(bench{n});
"""


def review_figures(
    settings: Settings, changed_file: Callable[[str, str, str], Any], repeats: int
) -> tuple[Figures, list[str], dict[str, Any]]:
    """The checks (all enabled) over a 1,000-line change of BinaryKernel.metal."""
    from pipeline.flows.review import check_changes, helper_headers
    from pipeline.tree.index import load_index
    from pipeline.tree.metal_functions import helpers

    old = (settings.root / METAL).read_text()
    added = ""
    n = 0
    while added.count("\n") < 1000:
        added += _FUNCTOR.format(n=n)
        n += 1
    new = old + added
    change = changed_file(METAL, old, new)
    lines = sum(b - a + 1 for a, b in change.new_ranges)
    index = load_index(settings.tree)
    texts, where = helper_headers(settings.root)
    known = helpers(texts)
    report = check_changes(settings, [change], index=index)
    # the c10/metal headers are read and parsed in every run, as a review run does
    samples = timed(lambda: check_changes(settings, [change], index=index), repeats)
    by_check: dict[str, int] = {}
    for f in report.findings:
        by_check[f.check] = by_check.get(f.check, 0) + 1
    figures: Figures = [
        (f"review checks, {lines:,}-line diff, median of {len(samples)}",
         statistics.median(samples), "s", "≤ 0.5 s", True),
        ("  findings", float(len(report.findings)), "", "", False),
    ]  # fmt: skip
    notes = [
        f"{n} added functors (a bare max, a fast::sin each) and {n} helpers of their own "
        f"(no finding); the index is built once (cached, as a user's is); the c10/metal "
        f"headers are read and parsed each run, from {where or 'nowhere'} "
        f"({len(known)} functions); findings by check: {by_check}"
    ]
    return figures, notes, {"samples": samples, "lines": lines, "findings": by_check}


def _tracker_tree(work: Path, operators: int, already: int) -> Path:
    """The sandbox (``already`` operators in its backlog) with MPSGraph-era yaml rows added
    until ``operators`` are in the backlog."""
    root = work / "tracker-tree"
    shutil.copytree(sandbox.TREE, root, ignore=shutil.ignore_patterns("__pycache__"))
    rows = [
        f"\n- func: benchop{i}.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)\n"
        f"  dispatch:\n    CPU, CUDA: benchop{i}_out\n    MPS: benchop{i}_out_mps\n"
        for i in range(operators - already)
    ]
    yaml = root / paths.NATIVE_YAML
    yaml.write_text(yaml.read_text() + "".join(rows))
    return root


def tracker_figures(
    work: Path, settings_for: Callable[..., Settings], operators: int = 300, prs: int = 200
) -> tuple[Figures, list[str], dict[str, Any]]:
    """One tracker update, first time and unchanged, against a local GitHub."""
    from pytest_httpserver import HTTPServer

    from pipeline.flows.tracker import Cache, client_for, update_tracker
    from pipeline.guide.backlog import backlog
    from pipeline.state import tracker_cache
    from pipeline.tree.index import load_index
    from tests.flows.github_fake import REPO, FakeTrackerGitHub

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    plain = settings_for(sandbox.TREE, work / "tracker-plain",
                         opinfo_table=sandbox.TREE / sandbox.OPINFO_TABLE)  # fmt: skip
    root = _tracker_tree(work, operators, len(backlog(load_index(plain.tree))))
    settings = settings_for(root, work / "tracker-state", opinfo_table=root / sandbox.OPINFO_TABLE)
    listed = len(backlog(load_index(settings.tree)))
    server = HTTPServer(host="127.0.0.1", port=0)
    server.start()
    try:
        settings = dataclasses.replace(
            settings,
            github=dataclasses.replace(settings.github, api_url=server.url_for(""), repo=REPO),
        )
        github = FakeTrackerGitHub(server).install()
        github.issues[1] = "Tracker.\n"
        for n in range(1, prs + 1):
            op = f"benchop{(n * 7) % listed}"
            patch = f"@@ -1,1 +1,1 @@\n-    MPS: {op}_out_mps\n+    CPU, CUDA, MPS: {op}_out\n"
            github.add_pull(1000 + n, f"[MPS] migrate {op}", {paths.NATIVE_YAML: patch})
        runs = []
        for _ in range(2):
            cache = Cache.load(tracker_cache(settings))
            client = client_for(settings, "ghp_bench", cache, sleep=lambda s: None)
            start = time.perf_counter()
            done = update_tracker(settings, client, cache, 1)
            runs.append((time.perf_counter() - start, done))
    finally:
        server.clear()
        server.stop()
    (first_s, first), (again_s, again) = runs
    figures: Figures = [
        (f"tracker, {listed} operators × {prs} open PRs: requests, first time",
         float(first.requests), "requests", "≤ 210", True),
        ("  the same, nothing changed", float(again.requests), "requests", "≤ 5", True),
        ("    of them 304 (not counted by GitHub)", float(again.not_modified), "", "", False),
        ("  time, first update", first_s, "s", "", True),
        ("  time, nothing changed", again_s, "s", "", False),
    ]  # fmt: skip
    notes = [
        f"the sandbox's backlog plus generated MPSGraph-era yaml rows; {prs} open PRs of 1 "
        "file each against pytest-httpserver on 127.0.0.1 (100 per search page, ETags); "
        f"first run: {first.outcome}, second: {again.outcome}; the times include building "
        "the index and the backlog; unchanged: the 2 search pages answer 304, the issue one "
        "200 (its ETag changed with the first run's PATCH; a third run answers 304 for all)"
    ]
    return figures, notes, {"first": first.requests, "unchanged": again.requests,
                            "first_s": first_s, "unchanged_s": again_s}  # fmt: skip
