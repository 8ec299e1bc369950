"""run/upstream_bench.py: the checkout's own bench_mps_ops.py helpers, run by the script we
write, and their rows read back (here a bench_mps_ops.py of our own, on the CPU torch)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pipeline.errors import DocumentError
from pipeline.run.speed import BenchOp
from pipeline.run.upstream_bench import _figures, run

# bench_mps_ops.py's shape: a helper per arity, called with the torch function, device and
# dtype, returning torch.utils.benchmark measurements. torch.no_such_op is named so that
# covered() picks it, and fails when the script looks it up.
BENCH = """\
import torch
from torch.utils.benchmark import Timer


def bench_unary(fn, device, dtype):
    x = torch.ones(8, device=device, dtype=dtype)
    timer = Timer("f(x)", globals={"f": fn, "x": x}, description="8")
    return [timer.blocked_autorange(min_run_time=0.01)]


# torch.abs, torch.no_such_op
"""


@pytest.mark.slow
def test_rows_come_back_as_figures_and_errors(tmp_path: Path) -> None:
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "bench_mps_ops.py").write_text(BENCH)
    ops = (
        BenchOp("abs", "abs", 1, ("float32", "bfloat16")),
        BenchOp("nope", "no_such_op", 1, ("float32",)),
    )
    figures = run(sys.executable, tmp_path, ops, tmp_path / "out", "cpu")
    by_op = {(f.op, f.dtype): f for f in figures}
    # bfloat16 is not one of the dtypes upstream's main() times
    assert sorted(by_op) == [("abs", "float32"), ("nope", "float32")]
    timed = by_op["abs", "float32"]
    assert (timed.label, timed.error) == ("8", "")
    assert isinstance(timed.median, float) and isinstance(timed.iqr, float)
    failed = by_op["nope", "float32"]
    assert failed.median is None and failed.label == ""
    assert failed.error.startswith("AttributeError: ")


def test_a_row_with_an_unknown_key_is_refused() -> None:
    row = {"op": "abs", "dtype": "float32", "median": 1e-6, "iqr": 0, "lable": "8"}
    with pytest.raises(DocumentError, match=r"rows\[0\] has unknown key\(s\) 'lable'"):
        _figures({"rows": [json.loads(json.dumps(row))]}, "upstream.json")
