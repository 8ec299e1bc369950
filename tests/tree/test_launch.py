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
