"""The check-math benchmark (issue 17): one functor cold and cached, a file of 55 functors
cold, and the share of upstream-shaped functor forms that compile with no per-functor code.

Called from ``bench/__main__.py`` (``bench_math``), which passes its Figure and Result types.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline import sandbox
from pipeline.flows import math as flow
from pipeline.guide.math import Target
from pipeline.run import cxx, reference
from pipeline.tree import metal
from pipeline.tree.source import TreeSource

REPO = Path(__file__).resolve().parent.parent
FORMS = REPO / "tests" / "fixtures" / "metal_math" / "forms"
KERNELS = "aten/src/ATen/native/mps/kernels"
FILE_FUNCTORS = 55  # upstream's BinaryKernel.metal registers about that many
# one-line bodies for the generated file: unary and binary math of every kind of call
_UNARY = (
    "precise::sin(float(x))", "precise::exp(float(x))", "::metal::floor(float(x))",
    "c10::metal::erf(float(x))", "precise::tanh(float(x))", "::metal::fabs(float(x))",
    "c10::metal::log1p(float(x))", "::metal::rint(float(x))", "precise::sqrt(float(x))",
    "c10::metal::digamma(float(x))", "::metal::sign(float(x))",
)  # fmt: skip
_BINARY = (
    "precise::atan2(float(a), float(b))", "::metal::fmax(float(a), float(b))",
    "c10::metal::max(float(a), float(b))", "::metal::copysign(float(a), float(b))",
    "c10::metal::fmod(float(a), float(b))", "c10::metal::xlogy(float(a), float(b))",
    "precise::pow(float(a), float(b))", "c10::metal::logaddexp(float(a), float(b))",
    "float(a) * float(b) + 1.0f", "c10::metal::hypot(float(a), float(b))",
    "::metal::nextafter(float(a), float(b))",
)  # fmt: skip


def _c10_include() -> Path | None:
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return None
    include = Path(spec.origin).parent / "include"
    return include if (include / "c10" / "metal" / "indexing.h").is_file() else None


def wheel_build() -> tuple[cxx.Compiler, cxx.Headers]:
    """The compiler and the installed torch wheel's c10/metal headers the benchmarks build with."""
    include = _c10_include()
    if include is None:
        raise RuntimeError("torch is not installed: no c10/metal headers to compile against")
    return cxx.find_compiler(None), cxx.Headers(include, "the torch wheel")


def generated_file(n: int) -> str:
    """A .metal file of ``n`` functors, each registered for float, half, bfloat and int."""
    lines = [
        "#include <c10/metal/indexing.h>",
        "#include <c10/metal/special_math.h>",
        "#include <c10/metal/utils.h>",
        "#include <metal_stdlib>",
        "using namespace metal;",
        "using namespace c10::metal;",
        "",
    ]
    for i in range(n):
        unary = i % 2 == 0
        body = (_UNARY if unary else _BINARY)[(i // 2) % len(_UNARY)]
        params = "const T x" if unary else "const T a, const T b"
        lines += [
            f"struct f{i}_functor {{",
            "  template <typename T, enable_if_t<is_floating_point_v<T>, bool> = true>",
            f"  inline T operator()({params}) {{",
            f"    return static_cast<T>({body});",
            "  }",
            "  template <typename T, enable_if_t<is_integral_v<T>, bool> = true>",
            f"  inline float operator()({params}) {{",
            f"    return {body};",
            "  }",
            "};",
        ]
        macro = "REGISTER_UNARY_OP" if unary else "REGISTER_BINARY_OP"
        for dtype, out in (
            ("float", "float"),
            ("half", "half"),
            ("bfloat", "bfloat"),
            ("int", "float"),
        ):
            lines.append(f"{macro}(f{i}, {dtype}, {out});")
        lines.append("")
    return "\n".join(lines)


def run(ctx: Any, figure: Callable[..., Any], result: Callable[..., Any]) -> Any:
    compiler, headers = wheel_build()
    work = ctx.work / "math"
    root = work / "tree"
    shutil.copytree(sandbox.TREE, root, ignore=shutil.ignore_patterns("__pycache__"))
    source = TreeSource(root, work / "cache", sys.executable, None)

    def runners(cache: Path) -> flow.Runners:
        builder = cxx.Builder(compiler, headers, root, cache)
        return flow.Runners(
            builder, lambda cases: reference.references(source, cases, work / "cache" / "math")
        )

    metal_file = root / KERNELS / "BinaryKernel.metal"
    atan2 = Target(
        "atan2", metal_file, f"{KERNELS}/BinaryKernel.metal", "atan2", None, "atan2", None
    )
    # the driver and torch's answers first: built once per compiler, cached by the request
    warm = runners(work / "objects-warm")
    warm.builder.driver()
    start = time.perf_counter()
    flow.check([atan2], warm, scratch=work / "scratch")
    reference_cold = time.perf_counter() - start

    colds, cacheds = [], []
    for i in range(ctx.repeats(3)):
        fresh = runners(work / f"objects-{i}")
        shutil.copytree(warm.builder.cache_dir, fresh.builder.cache_dir)
        for so in fresh.builder.cache_dir.glob("atan2-*"):
            so.unlink()  # the functor's own object goes: a cache miss
        start = time.perf_counter()
        report = flow.check([atan2], fresh, scratch=work / "scratch")
        colds.append(time.perf_counter() - start)
        assert not report.failed and not report.functors[0].cached
        start = time.perf_counter()
        report = flow.check([atan2], fresh, scratch=work / "scratch")
        cacheds.append(time.perf_counter() - start)
        assert report.functors[0].cached

    # a file of 55 functors, every object cold
    big = root / KERNELS / "Generated55.metal"
    big.write_text(generated_file(FILE_FUNCTORS))
    builder = cxx.Builder(compiler, headers, root, work / "objects-55")
    builder.driver()
    start = time.perf_counter()
    built = builder.build_all([(big, f"f{i}") for i in range(FILE_FUNCTORS)])
    file_cold = time.perf_counter() - start
    file_ok = sum(1 for b in built if b.error is None)

    # the forms found upstream, as fixtures of our own: every registered functor of each
    forms, failed = [], []
    for path in sorted(FORMS.glob("*.metal")):
        parsed = metal.parse(path.read_text(encoding="utf-8"), path.name)
        forms += [(path, k) for k in dict.fromkeys(r.kernel for r in parsed.registrations)]
    form_builder = cxx.Builder(compiler, headers, FORMS.parent, work / "objects-forms")
    for b in form_builder.build_all(forms):
        if b.error is not None:
            failed.append(f"{b.metal.name}:{b.kernel}: {b.error}")
    share = 100.0 * (len(forms) - len(failed)) / len(forms) if forms else 0.0
    median = sorted(colds)[len(colds) // 2]
    cached = sorted(cacheds)[len(cacheds) // 2]
    return result(
        name="math",
        title=f"check-math ({compiler.identity})",
        measures=(
            "one functor (the sandbox's atan2, 9 dtypes) compiled, run and compared with torch "
            "in-process, its object cold and then cached; a generated file of 55 functors "
            "built cold in parallel; the share of the upstream-shaped form fixtures "
            "(tests/fixtures/metal_math/forms) that compile with no per-functor code"
        ),
        figures=(
            figure("one functor, object cold", median, "s", goal="<= 1.5 s", headline=True),
            figure("one functor, cached", cached, "s", goal="<= 0.1 s", headline=True),
            figure(
                f"{FILE_FUNCTORS}-functor file, cold", file_cold, "s", goal="<= 30 s", headline=True
            ),
            figure("forms compiling unchanged", share, "%", goal=">= 95%", headline=True),
            figure("torch references, first time", reference_cold, "s"),
        ),
        notes=(
            f"{file_ok} of {FILE_FUNCTORS} generated functors and {len(forms) - len(failed)} "
            f"of {len(forms)} form functors ({len(list(FORMS.glob('*.metal')))} files) compiled",
            "torch's answers are cached by request: the first check of a (kernel, dtypes) "
            "starts the interpreter and imports torch; 'object cold' reuses them",
            *failed,
        ),
        data={
            "cold_s": colds,
            "cached_s": cacheds,
            "file_cold_s": file_cold,
            "file_ok": file_ok,
            "forms": len(forms),
            "forms_failed": failed,
            "reference_cold_s": reference_cold,
        },
    )
