"""The pure verdicts of check-math: decoding, tolerances, NaN/inf, crashes, dtype findings."""

from __future__ import annotations

import struct

from pipeline.results.math import Agreement, Kind, Known, check_dtype, compare_value, decode


def f32(*values: float) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def test_decode_bfloat16_and_complex() -> None:
    assert decode(struct.pack("<2H", 0x3F80, 0xC000), "bfloat16") == [1.0, -2.0]
    assert decode(struct.pack("<4f", 1, 2, 3, -4), "complex64") == [1 + 2j, 3 - 4j]
    assert decode(b"\x00\x01", "bool") == [False, True]


def test_compare_value_kinds() -> None:
    nan, inf = float("nan"), float("inf")
    assert compare_value(nan, nan, "float32") is None
    assert compare_value(1.0, nan, "float32") is Kind.SPECIAL
    assert compare_value(inf, -inf, "float32") is Kind.SPECIAL
    assert compare_value(1.0 + 1e-7, 1.0, "float32") is None
    assert compare_value(1.001, 1.0, "float32") is Kind.PRECISION
    assert compare_value(1.001, 1.0, "float16") is None  # half: rtol 1e-3, atol 1e-2
    assert compare_value(3, 4, "int32") is Kind.EXACT
    assert compare_value(complex(1, nan), complex(1, 2), "complex64") is Kind.SPECIAL


def _check(**kw):
    args = dict(
        kernel="k",
        names=["k", "op"],
        input_type="float",
        output_type="float",
        result_type="float",
        inputs=(f32(1.0, 2.0, 3.0, 1e-40),),
        reference=f32(1.0, 2.0, 3.0, 1.0),
        torch_dtype="float32",
        torch_errors={},
        output=f32(1.0, 2.5, 3.0, 1e-40),
        status=b"\0\0\0\0",
    )
    args.update(kw)
    return check_dtype(**args)


def test_check_counts_and_counterexamples() -> None:
    check = _check()
    assert (check.checked, check.matched, check.precision) == (4, 2, 1)
    # the subnormal input's disagreement is counted apart and does not fail
    assert check.subnormal == 1
    assert check.status is Agreement.MISMATCH
    (example,) = check.counterexamples
    assert example.inputs == ("2.0",) and example.kernel == "2.5" and example.torch == "2.0"


def test_crash_is_a_finding_unless_torch_refuses_too() -> None:
    crashed = _check(output=f32(1, 2, 3, 0), reference=f32(1, 2, 3, 0), status=b"\0\x08\0\0")
    assert crashed.crashes == 1 and crashed.counterexamples[0].kernel == "SIGFPE"
    refused = _check(
        output=f32(1, 2, 3, 0),
        reference=f32(1, 2, 3, 0),
        status=b"\0\x08\0\0",
        torch_errors={1: "ZeroDivisionError"},
    )
    assert refused.crashes == 0 and refused.refused == 1 and refused.status is Agreement.OK


def test_dtype_findings_and_known() -> None:
    ints = struct.pack("<2i", 1, 2)
    check = _check(
        input_type="int",
        output_type="int",
        result_type="int",
        inputs=(ints,),
        output=ints,
        reference=f32(1, 2),
        status=b"\0\0",
    )
    assert check.findings == ("registered int32 -> int32, but torch gives float32",)
    assert check.status is Agreement.MISMATCH
    known = _check(known=[Known("op", "float32", "reviewed")])
    assert known.status is Agreement.KNOWN and known.known == "reviewed"
    other = _check(known=[Known("op", "float16", "reviewed")])
    assert other.status is Agreement.MISMATCH


def test_no_reference_is_not_a_failure() -> None:
    check = _check(reference=None, torch_dtype=None, no_reference="no torch function")
    assert check.status is Agreement.NO_REFERENCE
