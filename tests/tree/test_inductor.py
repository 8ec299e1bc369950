"""The c10::metal names and headers Inductor's generated Metal code uses, read from its code
generator: our fixture in upstream's shape, and the real file of the 2.13.0 wheel."""

from __future__ import annotations

from pipeline.tree import inductor
from tests.conftest import FIXTURES, oldest_only
from tests.releases import Release

FIXTURE = FIXTURES / "impact" / "tree" / "torch" / "_inductor" / "codegen" / "mps.py"


def test_fixture_calls_prefixes_lists_and_headers() -> None:
    found = inductor.parse(FIXTURE.read_text())
    assert found.called == {"remainder"}
    assert found.prefixes == {"threadgroup_"}
    assert found.headers == {"c10/metal/mathish.h", "c10/metal/reduction_utils.h"}
    assert found.calls("remainder") == "c10::metal::remainder"
    assert found.calls("threadgroup_sum") == "c10::metal::threadgroup_{...}"
    assert found.calls("erfinv") == 'c10::metal::{name} with "erfinv"'
    assert found.calls("safe_div") is None


def test_no_dynamic_call_means_quoted_words_are_not_calls() -> None:
    found = inductor.parse('x = "erfinv"\ny = f"c10::metal::floor_divide({a})"\n')
    assert found.literals == frozenset() and found.calls("erfinv") is None
    assert found.calls("floor_divide") == "c10::metal::floor_divide"


@oldest_only
def test_released_torch_codegen(real_release: Release) -> None:
    # the wheel's file (tests/releases.py), not the installed torch: a venv without torch
    # skips, saying so, and CI, which must read it, fails
    found = inductor.parse((real_release.root / "torch/_inductor/codegen/mps.py").read_text())
    # facts of torch 2.13.0's file: a direct call, a prefix family, the special functions
    # called through c10::metal::{name}, and the headers its kernels include
    assert {"floor_divide", "remainder", "sinc"} <= found.called
    assert "threadgroup_" in found.prefixes
    assert found.calls("erfinv") is not None and found.calls("zeta") is not None
    assert {"c10/metal/special_math.h", "c10/metal/reduction_utils.h"} <= found.headers
    assert found.calls("no_such_helper_anywhere") is None
