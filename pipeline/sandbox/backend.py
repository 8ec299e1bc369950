"""The simulated MPS device the sandbox's test/test_mps.py runs on.

It answers one question, "does ``op`` work on MPS for ``dtype``?", from two sources:

- the artifact ``ninja -C build torch_cpu`` built (``build/lib/torch_cpu.mpsim.json``, see
  :mod:`pipeline.sandbox.compile`): how each functional overload of the operator reaches
  MPS. A native Metal kernel works for exactly the input dtypes its functor is registered
  for; an overload with no MPS kernel raises the NotImplementedError PyTorch raises;
- ``mpsgraph_gaps.yaml`` next to this module: what a registration cannot tell (dtypes the
  old MPSGraph implementations get wrong, numerical mismatches, macOS-version gaps,
  gradient mismatches, which overloads an OpInfo variant reaches).

:func:`check` raises the exception a real run would show; :func:`supports` is its boolean
form. The simulated macOS release is ``MPS_SIM_MACOS_VERSION`` (default 15.5); the build
directory is ``MPS_SIM_BUILD_DIR`` (default ``build``, relative to the tree root).
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import yaml

from pipeline.dtypes import DTYPE_TO_METAL, TEST_KINDS

ARTIFACT = "lib/torch_cpu.mpsim.json"
BUILD_DIR_ENV = "MPS_SIM_BUILD_DIR"
MACOS_ENV = "MPS_SIM_MACOS_VERSION"
DEFAULT_MACOS = "15.5"
GAPS_FILE = Path(__file__).with_name("mpsgraph_gaps.yaml")
NOT_BUILT = "torch_cpu not built: run ninja -C build torch_cpu"

# c10's ScalarType names, as MPS error messages spell them
_SCALAR_TYPE = {
    "float32": "Float",
    "float16": "Half",
    "bfloat16": "BFloat16",
    "int64": "Long",
    "int32": "Int",
    "int16": "Short",
    "int8": "Char",
    "uint8": "Byte",
    "bool": "Bool",
    "complex64": "ComplexFloat",
    "complex32": "ComplexHalf",
}
_EXCEPTIONS: dict[str, type[Exception]] = {
    "RuntimeError": RuntimeError,
    "TypeError": TypeError,
    "NotImplementedError": NotImplementedError,
    "AssertionError": AssertionError,
}


class NotBuiltError(RuntimeError):
    """The tree has no built torch_cpu artifact (or an unreadable one)."""


def artifact_path(root: Path) -> Path:
    """Where ``ninja -C build torch_cpu`` puts the artifact of the tree at ``root``."""
    return Path(root) / os.environ.get(BUILD_DIR_ENV, "build") / ARTIFACT


def load_artifact(root: Path) -> dict:
    """The built artifact of the tree at ``root``; NotBuiltError if there is none."""
    path = artifact_path(root)
    try:
        stamp = path.stat().st_mtime_ns
    except FileNotFoundError:
        raise NotBuiltError(NOT_BUILT) from None
    return _read_artifact(path, stamp)


@functools.lru_cache(maxsize=8)
def _read_artifact(path: Path, stamp: int) -> dict:
    # stamp is part of the cache key: a rebuild between two calls is seen
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise NotBuiltError(f"{NOT_BUILT} ({path} is unreadable: {exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("operators"), dict):
        raise NotBuiltError(f"{NOT_BUILT} ({path} is not a torch_cpu artifact)")
    return data


@functools.lru_cache(maxsize=1)
def load_gaps() -> dict:
    """The simulated device's known gaps (mpsgraph_gaps.yaml), sections defaulted."""
    data = yaml.safe_load(GAPS_FILE.read_text(encoding="utf-8")) or {}
    for section in ("mpsgraph", "numerics", "backward", "variants"):
        data.setdefault(section, {})
    data.setdefault("mpsgraph_complex", [])
    data.setdefault("macos", [])
    return data


def macos_version() -> tuple[int, ...]:
    """The simulated macOS release, from MPS_SIM_MACOS_VERSION (``"14.2"`` -> ``(14, 2)``)."""
    return _version(os.environ.get(MACOS_ENV) or DEFAULT_MACOS)


def _version(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in str(text).strip().split("."))
    except ValueError:
        raise ValueError(f"{MACOS_ENV}={text!r} is not a version such as 14.4") from None


def not_implemented(overload: str) -> NotImplementedError:
    """The error PyTorch raises for an operator without an MPS kernel."""
    return NotImplementedError(
        f"The operator 'aten::{overload}' is not currently implemented for the MPS device. "
        "If you want this op to be considered for addition please comment on "
        "https://github.com/pytorch/pytorch/issues/141287 and mention use-case, that "
        "resulted in missing op. As a temporary fix, you can set the environment variable "
        "`PYTORCH_ENABLE_MPS_FALLBACK=1` to use the CPU as a fallback for this op. WARNING: "
        "this will be slower than running natively on MPS."
    )


def _mismatch(what: str) -> AssertionError:
    return AssertionError(
        "Tensor-likes are not close!\n\n"
        "Mismatched elements: 3 / 25 (12.0%)\n"
        "Greatest absolute difference: 0.0078125 at index (2, 1) (up to 1e-05 allowed)\n"
        "Greatest relative difference: 0.00390625 at index (2, 1) (up to 0.001 allowed)\n\n"
        f"(simulated MPS device: {what})"
    )


def _gap_error(spec: str | None, op: str, dtype: str) -> Exception:
    if not spec or spec == "mismatch":
        return _mismatch(f"MPSGraph {op} differs from CPU for {dtype}")
    name, _, message = spec.partition(": ")
    exc = _EXCEPTIONS.get(name)
    if exc is None:
        return RuntimeError(spec.format(dtype=dtype))
    return exc(message.format(dtype=dtype))


def _check_overload(op: str, dtype: str, record: dict, stubs: list[str] | None) -> None:
    served = record.get("mps")
    if served in ("composite", "shared"):
        return
    if served is None:
        raise not_implemented(record.get("overload") or op)
    if "stubs" not in record:  # an MPS-only *_mps function: MPSGraph
        _check_mpsgraph(op, dtype)
        return
    for stub, reg in record.get("stubs", {}).items():
        if stubs is not None and stub not in stubs:
            continue
        if reg is None:
            raise RuntimeError(f"{stub}: DispatchStub: missing kernel for mps")
        if not reg.get("native"):
            _check_mpsgraph(op, dtype)
            continue
        if dtype not in {pair[0] for pair in reg.get("pairs", ())}:
            metal = DTYPE_TO_METAL.get(dtype, dtype)
            raise RuntimeError(
                f"Failed to create function state object for: "
                f"{reg.get('kernel_name')}_dense_{metal}_{metal}"
            )


def _check_mpsgraph(op: str, dtype: str) -> None:
    gaps = load_gaps()
    if dtype.startswith("complex") and op not in gaps["mpsgraph_complex"]:
        raise TypeError(
            f"Trying to convert {_SCALAR_TYPE.get(dtype, dtype)} to the MPS backend but it "
            "does not have support for that dtype."
        )
    gap = gaps["mpsgraph"].get(op) or {}
    if dtype in (gap.get("dtypes") or ()):
        raise _gap_error(gap.get("error"), op, dtype)


def check(
    op: str,
    dtype: str,
    *,
    root: Path | None = None,
    key: str | None = None,
    kind: str = "output_match",
) -> None:
    """Run ``op`` (an ATen operator such as ``atan2``) on the simulated device for ``dtype``.

    ``key`` is the OpInfo key (name + variant_test_name; default ``op``): it selects the
    overloads an OpInfo variant reaches and its numerical gaps. ``kind`` is the test kind.
    Returns if the op works; raises what PyTorch would (NotImplementedError for a missing
    kernel, RuntimeError/TypeError from a kernel, AssertionError for a CPU mismatch), and
    NotBuiltError when torch_cpu has not been built.
    """
    if kind not in TEST_KINDS:
        raise ValueError(f"unknown test kind {kind!r}; expected one of {TEST_KINDS}")
    artifact = load_artifact(Path.cwd() if root is None else root)
    key = key or op
    gaps = load_gaps()
    record = artifact["operators"].get(op)
    if record is None:
        raise not_implemented(op)
    variant = gaps["variants"].get(key) or {}
    wanted = variant.get("overloads")
    for name, overload in record.get("overloads", {}).items():
        if wanted is None or name in wanted:
            _check_overload(op, dtype, overload, variant.get("stubs"))
    if dtype in (gaps["numerics"].get(key) or ()):
        raise _mismatch(f"{key} is numerically off for {dtype}")
    for gap in gaps["macos"]:
        applies = gap.get("key") == key and dtype in (gap.get("dtypes") or ())
        if applies and macos_version() < _version(gap["before"]):
            raise _mismatch(f"{key} {dtype} is wrong before macOS {gap['before']}")
    if kind == "output_grad_match" and dtype in (gaps["backward"].get(key) or ()):
        raise _mismatch(f"the gradient of {key} differs for {dtype}")


def supports(
    op: str,
    dtype: str,
    *,
    root: Path | None = None,
    key: str | None = None,
    kind: str = "output_match",
) -> bool:
    """Whether :func:`check` passes; NotBuiltError still propagates (nothing to ask)."""
    try:
        check(op, dtype, root=root, key=key, kind=kind)
    except NotBuiltError:
        raise
    except (NotImplementedError, RuntimeError, TypeError, AssertionError):
        return False
    return True
