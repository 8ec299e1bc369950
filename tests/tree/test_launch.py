"""A launch spec that cannot be read is an input error (exit 2) naming the file and the key,
and saying where the format is described; a .metal file not found says what to give."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.errors import EXIT_INPUT, LaunchSpecError, NoKernelFileError, failure
from pipeline.flows.kernel import find_metal
from pipeline.tree import launch

FIXTURES = Path(__file__).parents[1] / "fixtures" / "metal_kernel"


def test_the_fixture_specs_read() -> None:
    spec = launch.read_spec(FIXTURES / "specs" / "Reduction.yaml")
    assert spec.cases


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("kernels: [\n", "not YAML"),
        ("kernels: []\nextra: 1\n", "unknown key(s) extra"),
        ("[1, 2]\n", "a launch spec is {kernels: [entries]}"),
        (
            "kernels: [{kernel: k, reference: x, inputs: {x: {rank: two}}}]\n",
            "kernels[0].inputs.x.rank must be int or null, got str",
        ),
        (
            "kernels: [{kernel: k, reference: x, inputs: {x: }, output: {dtype: float33}}]\n",
            "k: output: unknown dtype 'float33'",
        ),
        (
            "kernels: [{kernel: k, reference: x, inputs: {x: }, threads: [[1]]}]\n",
            "kernels[0].threads[0] is [1], not an expression (a string or a number)",
        ),
        (
            "kernels: [{kernel: k, reference: x, inputs: {x: {strided: true, colour: red}}}]\n",
            "k: input x: unknown key(s) colour",
        ),
    ],
)
def test_a_bad_spec_is_exit_2_and_names_the_problem_and_the_format(
    tmp_path: Path, text: str, said: str
) -> None:
    path = tmp_path / "Bad.yaml"
    path.write_text(text)
    with pytest.raises(LaunchSpecError) as caught:
        launch.read_spec(path)
    result = failure(caught.value)
    assert result.code == EXIT_INPUT
    assert str(path) in result.line and said in result.line
    assert result.line.endswith('(its format: docs/check-kernel.md, "The launch spec")')


def test_no_kernel_file_says_what_to_give(sandbox_settings) -> None:
    with pytest.raises(NoKernelFileError) as caught:
        find_metal(sandbox_settings, "Nope.metal")
    result = failure(caught.value)
    assert result.code == EXIT_INPUT
    assert result.line.startswith("Nope.metal: no such .metal file (looked in ")
    assert result.line.endswith("give a path to one, or the name or stem of a file in that folder")


def test_an_entry_reads_into_its_models(tmp_path: Path) -> None:
    path = tmp_path / "K.yaml"
    path.write_text(
        "kernels:\n"
        "  - kernel: k_{T}\n    dtypes: [half]\n    reference: x + 1\n"
        "    inputs: {x: {rank: 2, strided: true}, i: {dtype: long, range: [0, x.size(0)]}}\n"
        "    output: {shape: [4, n], host: out}\n    buffers: [x, i, output, n]\n"
        "    structs: {n: {type: uint, value: 4}, a: {type: A, fields: {r: x.size(0)}}}\n"
        "    threadgroups: [8]\n    threads_per_threadgroup: [256, 1]\n"
    )
    (case,) = launch.read_spec(path).cases
    assert case.dtypes == ("float16",) and case.host_name("float16") == "k_half"
    assert case.inputs == (
        launch.TensorInput("x", 2, None, None, True),
        launch.TensorInput("i", 1, "int64", ("0", "x.size(0)"), False),
    )
    assert (case.output_like, case.output_shape, case.output_host) == ("x", ("4", "n"), "out")
    assert case.structs == (
        launch.StructArg("n", "uint", (("", "4"),)),
        launch.StructArg("a", "A", (("r", "x.size(0)"),)),
    )
    assert case.grid_kind is launch.GridKind.THREADGROUPS
    assert (case.grid, case.threads_per_threadgroup) == (("8", "1", "1"), ("256", "1", "1"))
