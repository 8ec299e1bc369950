"""Issue 32's figure: the shader check after `ninja torch_cpu`, against the build stage.

The sandbox with two c10/metal headers of our own, built with real ninja; then, ``repeats``
times, a header edit, the incremental build (its shader steps and the link) and the check.
Also the build whose shader step misses the headers (pytorch#196202): the check must raise.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from pipeline import sandbox
from pipeline.errors import StaleShaderError
from pipeline.run import shaders
from pipeline.run.build import find_ninja
from pipeline.run.ninja_data import NinjaData, read_log

Figures = list[tuple[str, float, str, str, bool]]
HEADER = "c10/metal/utils.h"


def _tree(work: Path, deps: sandbox.ShaderDeps, ninja: str) -> Path:
    root = sandbox.materialize(work / f"shaders-{deps.value}")
    (root / "c10/metal").mkdir(parents=True, exist_ok=True)
    (root / HEADER).write_text("#pragma once\n")
    (root / "build/build.ninja").write_text(sandbox.build_ninja(root, shader_deps=deps))
    subprocess.run([ninja, "-C", str(root / "build"), "torch_cpu"], check=True,
                   capture_output=True)  # fmt: skip
    return root


def _edit(root: Path, n: int) -> None:
    header = root / HEADER
    header.write_text(header.read_text() + f"// edit {n}\n")
    later = header.stat().st_mtime_ns + 2_000_000_000  # past anything the build wrote
    os.utime(header, ns=(later, later))


def shader_figures(work: Path, repeats: int) -> tuple[Figures, list[str], dict[str, Any]]:
    ninja = find_ninja()
    if ninja is None:
        raise RuntimeError("no ninja")
    root = _tree(work, sandbox.ShaderDeps.HEADERS, ninja)
    data = NinjaData(ninja, root / "build")
    builds, checks = [], []
    for n in range(repeats):
        _edit(root, n)
        before = read_log(root / "build")
        start = time.perf_counter()
        subprocess.run([ninja, "-C", str(root / "build"), "torch_cpu"], check=True,
                       capture_output=True)  # fmt: skip
        builds.append(time.perf_counter() - start)
        start = time.perf_counter()
        result = shaders.check(root, NinjaData(ninja, data.build_dir), before, "torch_cpu")
        checks.append(time.perf_counter() - start)
        assert result.status is shaders.CheckStatus.FRESH, result.describe()
    broken = _tree(work, sandbox.ShaderDeps.SHADER_ONLY, ninja)
    _edit(broken, 0)
    before = read_log(broken / "build")
    subprocess.run([ninja, "-C", str(broken / "build"), "torch_cpu"], check=True,
                   capture_output=True)  # fmt: skip
    try:
        shaders.check(broken, NinjaData(ninja, broken / "build"), before, "torch_cpu")
        caught = 0.0
    except StaleShaderError:
        caught = 1.0
    build, check = statistics.median(builds), statistics.median(checks)
    figures: Figures = [
        ("incremental build after a c10/metal header edit (sandbox)", build, "s", "", False),
        ("shader check after it", check, "s", "", True),
        ("check / build stage", check / build, "x", "<= 0.05", True),
        ("stale-shader build caught (1 = yes)", caught, "", "1", True),
    ]
    notes = [f"medians of {repeats}; every check ran ninja's tools on the sandbox's graph"]
    return figures, notes, {"builds": builds, "checks": checks, "caught": bool(caught)}
