"""tree/host_launch: kernel launches read from .mm host code of our own in the shapes of
upstream's (tests/fixtures/metal_kernel/.../operations), completing launch-spec entries that
leave buffers and sizes out; what is not read says why and is never guessed."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.flows.kernel import resolve
from pipeline.tree import host_launch, launch
from pipeline.tree.launch import GridKind

FIXTURES = Path(__file__).parents[1] / "fixtures" / "metal_kernel"
SPECS = FIXTURES / "specs"


def launches_of(root: Path = FIXTURES) -> dict[str, host_launch.HostLaunch]:
    return {h.pso: h for h in host_launch.read_launches(root)}


def test_the_common_patterns_are_read() -> None:
    found = launches_of()
    rows = found["sumPSO"]  # "name_" + scalarToMetalTypeString(x), mtl_setArgs
    assert (rows.kernel, rows.args, rows.problem) == (
        "row_sum_[A-Za-z0-9]+",
        ("x", "output", "args"),
        None,
    )
    assert (rows.grid_kind, rows.grid, rows.tptg) == (
        GridKind.THREADGROUPS, ("x.size(0)", "1", "1"), ("256", "1", "1"),
    )  # fmt: skip
    select = found["selectPSO"]  # fmt::format through a local, mtl_dispatch1DJob
    assert select.kernel == "index_select_rows_[A-Za-z0-9]+_[A-Za-z0-9]+"
    assert select.args[-1] == "stream->getErrorBuffer()" and select.grid == ("numThreads",)
    assert found["scanPSO"].args == ("x", "output", "cols")  # mtl_setBytes(enc, cols, 2)
    assert found["maxPSO"].grid == ("x.sizes()[0]", "1", "1")  # through an MTLSize local
    assert "bind_iter_tensors" in str(found["rowsPSO"].problem)


def resolved(name: str) -> dict:
    return dict(
        resolve(launch.read_spec(SPECS / f"{name}.yaml"), host_launch.read_launches(FIXTURES))
    )


def test_entries_without_buffers_and_sizes_take_the_host_codes() -> None:
    case, dtype = resolved("Indexing")["index_select_rows_float_long"]
    assert dtype == "float32" and case.launch_from == "Indexing.mm:22"
    assert case.buffers == ("x", "output", "index", "args", "error")
    assert case.grid_kind is GridKind.THREADS
    assert case.grid == ("((index.numel() * x.size(1)))", "1", "1")
    assert case.threads_per_threadgroup[0] == "min(max_threads, ((index.numel() * x.size(1))))"
    scan, _ = resolved("Scan")["cumsum_rows_float"]  # an integer local passed as a scalar
    (cols,) = scan.structs
    assert (cols.name, cols.type, cols.fields) == ("cols", "uint", (("", "x.size(1)"),))
    assert scan.grid == ("(x.size(0))", "1", "1")
    row_max, _ = resolved("Reduction")["row_max_float"]
    assert row_max.threads_per_threadgroup == ("(64)", "1", "1")


def test_an_entrys_own_launch_wins_and_an_unread_launch_is_no_launch(tmp_path: Path) -> None:
    softmax, _ = resolved("SoftMax")["softmax_rows_float_int"]  # its host code is not read
    assert softmax.launch_from is None and softmax.grid[0] == "ceil_div(x.size(0), 8)"
    spec = tmp_path / "SoftMax.yaml"
    spec.write_text(
        "kernels:\n"
        "  - kernel: softmax_rows_{T}_int\n    reference: torch.softmax(x, -1)\n"
        "    inputs: {x: {rank: 2}}\n"
        "  - kernel: row_sum_{T}\n    reference: x.sum(-1)\n    inputs: {x: {rank: 2}}\n"
        "    structs: {args: {type: ReduceArgs, fields: {rows: x.size(0)}}}\n"
        "    threads_per_threadgroup: [32]\n"
    )
    found = resolve(launch.read_spec(spec), host_launch.read_launches(FIXTURES))
    why = found["softmax_rows_float_int"]
    assert isinstance(why, str) and "bind_iter_tensors" in why and "SoftMax.mm:18" in why
    row_sum = found["row_sum_float"]
    assert not isinstance(row_sum, str)
    assert row_sum[0].threads_per_threadgroup == ("32", "1", "1")  # the entry's, not 256
    assert row_sum[0].grid == ("x.size(0)", "1", "1")  # the host's


HOST = """\
static void f(const Tensor& x, const Tensor& output) {{
  auto pso = lib.getPipelineStateForFunc("k_" + scalarToMetalTypeString(x));
  {before}
  [enc setComputePipelineState:pso];
  {args}
  [enc dispatchThreads:MTLSizeMake({grid}, 1, 1) threadsPerThreadgroup:MTLSizeMake(64, 1, 1)];
}}
"""


@pytest.mark.parametrize(
    ("before", "args", "grid", "why"),
    [
        ("", "mtl_setArgs(enc, x, output);", "helper(x)", "`helper` is no input"),
        ("", "mtl_setArgs(enc, x, output);", "x.numel() + x.foo()", "other than by size"),
        # the output's shape is torch's result's (a reduction's is not its input's): not read
        ("", "mtl_setArgs(enc, x, output);", "output.numel()", "`output` is no input"),
        ("", "mtl_setArgs(enc, x, output, n);", "x.numel()", "`n` is no input, output or struct"),
        ("auto n = x.numel();", "mtl_setArgs(enc, x, output, n);", "x.numel()", "integer local"),
        ("", "mtl_setArgs<1>(enc, output);", "x.numel()", "buffer indices [1] leave a gap"),
        ("", "mtl_setArgs(enc, x, c ? output : x);", "x.numel()", "`?` between"),
        ("", "[enc setBuffer:b offset:0 atIndex:0];", "x.numel()", "`setBuffer:` between"),
    ],
)  # fmt: skip
def test_what_is_not_read_says_why(
    tmp_path: Path, before: str, args: str, grid: str, why: str
) -> None:
    ops = tmp_path / host_launch.HOST_DIR / "operations"
    ops.mkdir(parents=True)
    (ops / "K.mm").write_text(HOST.format(before=before, args=args, grid=grid))
    spec = tmp_path / "K.yaml"
    spec.write_text("kernels:\n  - kernel: k_{T}\n    reference: x\n    inputs: {x: {rank: 1}}\n")
    found = resolve(launch.read_spec(spec), host_launch.read_launches(tmp_path))["k_float"]
    assert isinstance(found, str) and why in found and "K.mm:4" in found, found


def test_a_tree_without_host_code_has_no_launches(tmp_path: Path) -> None:
    assert host_launch.read_launches(tmp_path) == ()
    spec = launch.read_spec(SPECS / "Scan.yaml")
    why = resolve(spec, ())["cumsum_rows_float"]
    assert why == "its entry gives no buffers and sizes, and no .mm launch of it was read"
