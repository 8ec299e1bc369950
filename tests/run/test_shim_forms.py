"""Every functor form found upstream (tests/fixtures/metal_math/forms, fixtures of our own in
upstream's shape) compiles through the shim with the real c10/metal headers, with no
per-functor code, and records the registrations its file makes."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.run import cxx
from pipeline.tree import metal
from tests.flows.math_helpers import FIXTURES

pytestmark = [pytest.mark.slow, pytest.mark.realdata]

FORMS = sorted((FIXTURES / "forms").glob("*.metal"))


def test_every_form_compiles_and_records_its_registrations(
    tmp_path: Path, host_cxx: cxx.Compiler, real_c10_include: Path
) -> None:
    assert len(FORMS) >= 15
    targets, expected = [], {}
    for path in FORMS:
        parsed = metal.parse(path.read_text(encoding="utf-8"), path.name)
        for r in parsed.registrations:
            if r.core_macro == "REGISTER_BINARY_CASTOUT_OP":
                continue  # adds a kernel variant, no math of its own
            expected.setdefault(r.kernel, []).append((r.input, r.output))
        targets += [(path, k) for k in dict.fromkeys(r.kernel for r in parsed.registrations)]
    builder = cxx.Builder(host_cxx, cxx.Headers(real_c10_include, "wheel"), FIXTURES, tmp_path)
    builds = builder.build_all(targets)
    failed = [f"{b.metal.name}:{b.kernel}: {b.error}" for b in builds if b.error]
    assert not failed, "\n".join(failed)
    driver = builder.driver()
    from pipeline.results.math import metal_dtype

    for b in builds:
        regs = cxx.list_registrations(driver, b.library)
        got = [(metal_dtype(r.input), metal_dtype(r.output)) for r in regs]
        assert got == expected[b.kernel], b.kernel
        # what each functor returns is what its file registers (Metal's static_assert)
        assert all(r.result == r.output for r in regs), b.kernel
