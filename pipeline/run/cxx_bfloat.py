"""Metal's bfloat as a compiler's built-in ``__bf16``, for what the shim's class cannot build
(see :mod:`pipeline.run.cxx`'s module doc): which compiler has one that behaves as Metal's,
found by building and running BFLOAT_PROBE, its verdict kept by the compiler's identity."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

from pipeline.fsio import write_atomic
from pipeline.run.cxx import HALF_PROBE, Compiler, digest, has_half, version_line

# where a built-in bfloat may be: clang >= 17, Debian's versioned ones too
BFLOAT_CANDIDATES = ("clang++", "clang++-20", "clang++-19", "clang++-18", "clang++-17")

# Metal's bfloat as the built-in __bf16: its usual arithmetic conversions, constexpr bits,
# and one rounding per operation (a*b+c in float, rounded once, would give 0.00787353515625)
BFLOAT_FLAGS: tuple[str, ...] = (
    "-Xclang",
    "-fbfloat16-excess-precision=none",
    "-DMPS_SHIM_NATIVE_BFLOAT=1",
)
BFLOAT_PROBE = """#include <type_traits>
static_assert(std::is_same_v<decltype(true ? (__bf16)1 : 1.0f), float>, "");
static_assert(std::is_same_v<decltype(true ? (__bf16)1 : 1), __bf16>, "");
static_assert(__builtin_bit_cast(unsigned short, (__bf16)-__builtin_inff()) == 0xff80, "");
__attribute__((noinline)) __bf16 fma_like(__bf16 a, __bf16 b, __bf16 c) { return a * b + c; }
__attribute__((noinline)) __bf16 round_float(float x) { return (__bf16)x; }
int main() {
  const __bf16 a = 1.0078125f, c = -1.0078125f;
  const bool per_op = float(fma_like(a, a, c)) == 0.0078125f;
  const bool even = __builtin_bit_cast(unsigned short, round_float(1.00390625f)) == 0x3f80;
  return per_op && even ? 0 : 1;
}
"""


def find_bfloat_compiler(setting: str | None, cache_dir: Path) -> Compiler | None:
    """The ``math.cxx`` setting, else the first of BFLOAT_CANDIDATES on PATH, with Metal's
    bfloat as the built-in ``__bf16`` (see the module doc); None when none passes. The
    probe's verdict is kept in ``cache_dir`` by the compiler's identity: building and
    running it costs most of a second, every run."""
    for name in (setting,) if setting else BFLOAT_CANDIDATES:
        path = shutil.which(name)
        identity = version_line(path) if path is not None else None
        if path is None or identity is None:
            continue
        found = _probed(Compiler(path, identity), cache_dir)
        if found is not None:
            return found
    return None


def _probed(compiler: Compiler, cache_dir: Path) -> Compiler | None:
    """``_with_bfloat``'s verdict, kept as JSON: null (no built-in bfloat) or the libraries
    its conversions link with; anything else in the file is probed again."""
    key = digest([compiler.path, compiler.identity, BFLOAT_PROBE, HALF_PROBE, *BFLOAT_FLAGS])
    kept = cache_dir / f"bfloat-probe-{key[:20]}.json"
    try:
        verdict = json.loads(kept.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        verdict = False
    if verdict is None:
        return None
    if isinstance(verdict, list) and all(isinstance(x, str) for x in verdict):
        return Compiler(compiler.path, compiler.identity, BFLOAT_FLAGS, tuple(verdict))
    found = _with_bfloat(compiler) if has_half(compiler.path) else None
    cache_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(kept, json.dumps(None if found is None else list(found.bfloat_libs)))
    return found


def _with_bfloat(compiler: Compiler) -> Compiler | None:
    """``compiler`` with BFLOAT_FLAGS when BFLOAT_PROBE builds and passes with them, with
    libgcc or else compiler-rt's builtins."""
    with tempfile.TemporaryDirectory(prefix="mps-bfloat-probe-") as tmp:
        source, exe = Path(tmp) / "probe.cpp", Path(tmp) / "probe"
        source.write_text(BFLOAT_PROBE, encoding="utf-8")
        for libs in ((), _compiler_rt_builtins(compiler.path)):
            if libs is None:
                continue
            command = [compiler.path, "-std=c++17", "-O1", *BFLOAT_FLAGS, "-o", str(exe)]
            if _runs([*command, str(source), *libs]) and _runs([str(exe)]):
                return Compiler(compiler.path, compiler.identity, BFLOAT_FLAGS, libs)
    return None


def _compiler_rt_builtins(path: str) -> tuple[str, ...] | None:
    try:
        proc = subprocess.run(
            [path, "--rtlib=compiler-rt", "-print-libgcc-file-name"],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    archive = proc.stdout.strip()
    return (archive,) if proc.returncode == 0 and Path(archive).is_file() else None


def _runs(command: list[str]) -> bool:
    try:
        proc = subprocess.run(command, capture_output=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0
