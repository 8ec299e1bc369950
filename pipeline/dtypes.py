"""Dtype vocabulary shared by every reader: canonical names are torch's (``float32``...).

Test ids (``test_output_match_atan2_mps_float32``), JUnit tables and xfail lists all use
the canonical name; Metal type names and torch aliases are mapped here and nowhere else.
"""

from __future__ import annotations

# The consistency-test kinds of test_mps.py (``test_<kind>_<op>_mps_<dtype>``), in display
# order: config, OpInfo test ids, JUnit parsing and the sandbox backend all use this one.
TEST_KINDS: tuple[str, ...] = ("output_match", "output_grad_match")

METAL_TO_DTYPE: dict[str, str] = {
    "float": "float32",
    "half": "float16",
    "bfloat": "bfloat16",
    "long": "int64",
    "int": "int32",
    "short": "int16",
    "char": "int8",
    "uchar": "uint8",
    "bool": "bool",
    "float2": "complex64",
    "half2": "complex32",
    # c10/metal/float8.h (torch 2.15): BinaryKernel.metal registers eq/ne for it
    "float8_e4m3fn": "float8_e4m3fn",
}
# canonical dtype name -> Metal type name
DTYPE_TO_METAL: dict[str, str] = {dtype: name for name, dtype in METAL_TO_DTYPE.items()}

# torch attribute names (``torch.half``) -> canonical dtype name
TORCH_ALIASES: dict[str, str] = {
    "float": "float32",
    "float32": "float32",
    "half": "float16",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "double": "float64",
    "float64": "float64",
    "long": "int64",
    "int64": "int64",
    "int": "int32",
    "int32": "int32",
    "short": "int16",
    "int16": "int16",
    "int8": "int8",
    "uint8": "uint8",
    "uint16": "uint16",
    "uint32": "uint32",
    "uint64": "uint64",
    "bool": "bool",
    "cfloat": "complex64",
    "complex64": "complex64",
    "chalf": "complex32",
    "complex32": "complex32",
    "cdouble": "complex128",
    "complex128": "complex128",
    "float8_e4m3fn": "float8_e4m3fn",
}

# The dtypes test_mps.py's consistency tests are instantiated for, in display order.
MPS_TEST_DTYPES: tuple[str, ...] = (
    "float32",
    "float16",
    "bfloat16",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "bool",
    "complex64",
    "complex32",
)
# The complex dtypes MPS kernels support (complex128 is 64-bit floating point: never).
COMPLEX: frozenset[str] = frozenset({"complex64", "complex32"})


def canonical(name: str) -> str:
    """Map ``torch.half``/``half``/``float16`` to ``float16``; raise KeyError if unknown."""
    return TORCH_ALIASES[name.removeprefix("torch.")]


def sort_key(dtype: str) -> tuple[int, str]:
    """Order dtypes as the tables show them: MPS test order first, then alphabetically."""
    try:
        return (MPS_TEST_DTYPES.index(dtype), dtype)
    except ValueError:
        return (len(MPS_TEST_DTYPES), dtype)
