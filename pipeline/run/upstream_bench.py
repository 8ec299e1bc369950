"""Upstream's reference benchmark, ``test/bench_mps_ops.py``, run for the operators it covers,
so its figures stand beside ours.

The file keeps generic helpers, ``bench_unary(func, device=, dtype=)`` and
``bench_binary(func, device=, dtype=)``, each returning ``torch.utils.benchmark``
measurements labelled by layout (``dense``, ``transposed``, ``strided``...), and a
``main()`` that times a few operators (``torch.sqrt``, ``torch.fmax``...). An operator is
covered when the file names its callable (``torch.<call>``) and has the helper for its arity;
the helper is called from the checkout's own file, never copied.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import PipelineError
from pipeline.fields import read
from pipeline.fsio import write_atomic
from pipeline.results.speed import UpstreamFigure
from pipeline.run.speed import BenchOp

BENCH_FILE = "test/bench_mps_ops.py"
HELPERS = {1: "bench_unary", 2: "bench_binary"}
# the dtypes upstream's main() times its operators in
UPSTREAM_DTYPES = ("float32", "float16")
SCRIPT = '''\
"""Written by mps-pipeline (pipeline/run/upstream_bench.py): the checkout's
test/bench_mps_ops.py helpers for the operators it covers. Usage: python S SPEC OUT"""
import json
import sys

import torch

spec = json.load(open(sys.argv[1]))
sys.path.insert(0, spec["test_dir"])
import bench_mps_ops  # noqa: E402  the checkout's own file

rows = []
for op in spec["ops"]:
    helper = getattr(bench_mps_ops, op["helper"])
    for dtype_name in op["dtypes"]:
        try:
            found = helper(getattr(torch, op["call"]), device=spec["device"],
                           dtype=getattr(torch, dtype_name))
        except Exception as exc:
            rows.append({"op": op["op"], "dtype": dtype_name,
                         "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"})
            continue
        for m in found:
            rows.append({"op": op["op"], "dtype": dtype_name, "label": m.description,
                         "median": m.median, "iqr": m.iqr})
json.dump({"rows": rows}, open(sys.argv[2], "w"), indent=1)
'''


def covered(root: Path, ops: tuple[BenchOp, ...]) -> tuple[tuple[BenchOp, str], ...]:
    """(operator, helper) for each of ``ops`` the checkout's bench_mps_ops.py times."""
    path = root / BENCH_FILE
    if not path.is_file():
        return ()
    text = path.read_text(encoding="utf-8", errors="replace")
    defined = set(re.findall(r"^def (\w+)\(", text, re.M))
    return tuple(
        (op, HELPERS[op.arity])
        for op in ops
        if op.arity in HELPERS
        and HELPERS[op.arity] in defined
        and re.search(rf"\btorch\.{re.escape(op.call)}\b", text)
    )


def run(
    python: str, root: Path, ops: tuple[BenchOp, ...], folder: Path, device: str
) -> tuple[UpstreamFigure, ...]:
    """Upstream's figures for the covered ``ops`` (empty when none is covered)."""
    chosen = covered(root, ops)
    if not chosen:
        return ()
    folder.mkdir(parents=True, exist_ok=True)
    script, spec, out = (folder / n for n in ("upstream_bench.py", "upstream_spec.json",
                                              "upstream.json"))  # fmt: skip
    write_atomic(script, SCRIPT)
    write_atomic(spec, json.dumps({
        "test_dir": str(root / "test"), "device": device,
        "ops": [{"op": op.op, "call": op.call, "helper": helper,
                 "dtypes": [d for d in op.dtypes if d in UPSTREAM_DTYPES]}
                for op, helper in chosen],
    }))  # fmt: skip
    try:
        proc = subprocess.run([python, str(script), str(spec), str(out)], capture_output=True,
                              text=True, timeout=3600, check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PipelineError(f"speed: {BENCH_FILE} could not run: {exc}") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise PipelineError(f"speed: {BENCH_FILE} failed (exit {proc.returncode}): {last}")
    return _figures(json.loads(out.read_text(encoding="utf-8")), out.name)


def _figures(data: object, doc: str) -> tuple[UpstreamFigure, ...]:
    """The rows SCRIPT wrote (``data``, from ``doc``) as figures."""
    rows = read(_Rows, data, doc).rows
    return tuple(
        UpstreamFigure(r.op, r.dtype, r.label or "", r.median, r.iqr, r.error or "") for r in rows
    )


@dataclass(frozen=True)
class _Row:
    """One row SCRIPT writes: a measurement (label, median, iqr) or the error instead."""

    op: str
    dtype: str
    label: str | None = None
    median: float | None = None
    iqr: float | None = None
    error: str | None = None


@dataclass(frozen=True)
class _Rows:
    rows: tuple[_Row, ...]
