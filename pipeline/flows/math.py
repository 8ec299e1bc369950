"""The math flow: compile each target functor on the host, run it on edge values and OpInfo
samples, and compare with torch on CPU (see ``mps-pipeline check-math``).

Steps: build every functor's object in parallel (cached, :mod:`pipeline.run.cxx`); read the
registrations each object recorded; ask the interpreter for inputs and references of every
(kernel, dtype) at once (:mod:`pipeline.run.reference`, cached); run each functor's
registrations in its own driver process, in parallel; compare
(:func:`pipeline.results.math.check_dtype`). The runners come in as parameters.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from pipeline import state
from pipeline.config import Settings
from pipeline.dtypes import METAL_TO_DTYPE
from pipeline.errors import (
    NothingToCheckError,
    NoTorchError,
    UnknownOperatorError,
    WorkLeftError,
)
from pipeline.flows.request import Request
from pipeline.guide import math as guide_math
from pipeline.guide.math import Target
from pipeline.report.math import render_markdown, render_terminal, to_json
from pipeline.results.math import (
    DtypeCheck,
    FunctorCheck,
    Known,
    MathReport,
    check_dtype,
    metal_dtype,
)
from pipeline.run import cxx, cxx_bfloat, reference
from pipeline.run.reference import Case, TorchAnswer
from pipeline.tree.index import TreeIndex, load_index

ReferenceFn = Callable[[list[Case]], Mapping[str, TorchAnswer]]
RunFn = Callable[[Path, Path, Sequence[cxx.Registered], Sequence[cxx.Job], Path], cxx.RunOutcome]

ALPHA_NOTE = "an ALPHA kernel whose alpha is a parameter struct: no one torch argument takes it"
# which torch arguments fill a struct's fields is the host's to say (nan_to_num's posinf is
# the dtype's max when None): through a launch form the host lookup does not read
STRUCT_LAUNCH = "exec_*_kernel_with_params, a launch form the host lookup does not read"


@dataclass(frozen=True)
class Runners:
    builder: cxx.Builder
    references: ReferenceFn
    run_jobs: RunFn = cxx.run_jobs


def _case_id(kernel: str, dtype: str) -> str:
    return f"{kernel}/{dtype}"


def _struct_alpha(r: cxx.Registered) -> bool:
    """Whether the registration's alpha is a parameter struct (``ELUParams_float``), not a
    scalar of a dtype torch has: its fields are no one argument of a torch operator."""
    return r.alpha_size > 0 and metal_dtype(r.alpha) not in METAL_TO_DTYPE.values()


def check(
    targets: Sequence[Target],
    runners: Runners,
    *,
    known: Sequence[Known] = (),
    scratch: Path,
    on_built: Callable[[cxx.FunctorBuild], None] | None = None,
) -> MathReport:
    builder = runners.builder
    builds = builder.build_all([(t.metal, t.kernel) for t in targets], on_built)
    ok = [b for b in builds if b.built]
    driver = builder.driver() if ok else None
    registered: dict[str, list[cxx.Registered]] = {}
    cases: list[Case] = []
    plans: dict[str, list[cxx.Registered]] = {}
    skipped: dict[str, tuple[str, ...]] = {}
    for t, b in zip(targets, builds, strict=False):
        if not b.built or driver is None:
            continue
        regs = [r for r in cxx.list_registrations(driver, b.library) if r.kernel == t.kernel]
        registered[t.kernel] = regs
        chosen: list[cxx.Registered] = []
        left: list[cxx.Registered] = []
        for r in regs:
            dtype = metal_dtype(r.input)
            (chosen if t.dtypes is None or dtype in t.dtypes else left).append(r)
        plans[t.kernel] = chosen
        skipped[t.kernel] = tuple(dict.fromkeys(metal_dtype(r.input) for r in left))
        for r in chosen:
            if t.reference is not None and not _struct_alpha(r):
                alpha = metal_dtype(r.alpha) if r.alpha_size else None
                cases.append(
                    Case(
                        _case_id(t.kernel, metal_dtype(r.input)),
                        metal_dtype(r.input),
                        r.arity,
                        t.opinfo,
                        t.fn,
                        alpha,
                        guide_math.aten_names(t, alpha is not None),
                        t.bound,
                        t.alpha_argument,
                        t.avoid,
                        t.operands,
                    )
                )
    answers = runners.references(cases) if cases else {}

    def one(pair: tuple[Target, cxx.FunctorBuild]) -> FunctorCheck:
        t, b = pair
        if not b.built:
            return FunctorCheck(
                t.kernel,
                t.file,
                t.reference,
                compile_error=str(b.error) if b.error is not None else None,
                not_modelled=b.not_modelled,
                set_aside=b.set_aside,
                built_with=b.built_with,
                seconds=b.seconds,
            )
        assert driver is not None
        return _run_one(
            t, b, driver, plans[t.kernel], answers, runners, known, scratch, skipped[t.kernel]
        )

    pairs = list(zip(targets, builds, strict=False))
    if len(pairs) > 1 and builder.jobs > 1:
        with ThreadPoolExecutor(max_workers=builder.jobs) as pool:
            functors = list(pool.map(one, pairs))
    else:
        functors = [one(p) for p in pairs]
    return MathReport(
        tuple(functors),
        compiler=compiler_text(builder),
        headers=builder.headers.origin,
    )


def _run_one(
    t: Target,
    b: cxx.FunctorBuild,
    driver: Path,
    regs: list[cxx.Registered],
    answers: Mapping[str, TorchAnswer],
    runners: Runners,
    known: Sequence[Known],
    scratch: Path,
    skipped: tuple[str, ...],
) -> FunctorCheck:
    names = [t.kernel, *([t.op] if t.op else [])]
    jobs, planned, checks = [], [], []
    for r in regs:
        dtype = metal_dtype(r.input)
        answer = answers.get(_case_id(t.kernel, dtype))
        if _struct_alpha(r):
            why = f"{ALPHA_NOTE}: the host fills its fields ({STRUCT_LAUNCH})"
            checks.append(_no_reference(t, r, why, names, known))
            continue
        if answer is None or not answer.inputs:
            why = (answer and answer.no_reference) or "no torch reference"
            if t.host is not None and t.host.unknown is not None:
                # the name found nothing either: what the host code leaves unread is why
                why = f"unknown: {t.host.unknown}"
            checks.append(_no_reference(t, r, why, names, known))
            continue
        mine = _jobs(r, answer)
        jobs += mine
        planned.append((r, answer, len(mine)))
    outcome = (
        runners.run_jobs(driver, b.library, regs_by_index(regs), jobs, scratch)
        if jobs
        else cxx.RunOutcome([])
    )
    # the reference a fallback found (aten.silu.default) names it better than torch.silu
    shown = next((a.via for _, a, _ in planned if a.via), t.reference)
    if outcome.failure is not None:
        return FunctorCheck(
            t.kernel,
            t.file,
            shown,
            tuple(checks),
            failure=outcome.failure,
            skipped=skipped,
            set_aside=b.set_aside,
            built_with=b.built_with,
            cached=b.cached,
            seconds=b.seconds,
        )
    results = iter(outcome.results)
    for r, answer, count in planned:
        # an ALPHA case ran once per alpha value: its blocks, one after the other
        blocks = [next(results) for _ in range(count)]
        checks.append(_checked(t, r, answer, count, blocks, names, known))
    order = {metal_dtype(r.input): i for i, r in enumerate(regs)}
    checks.sort(key=lambda d: order.get(d.dtype, 0))
    return FunctorCheck(
        t.kernel,
        t.file,
        shown,
        tuple(checks),
        skipped=skipped,
        set_aside=b.set_aside,
        built_with=b.built_with,
        cached=b.cached,
        seconds=b.seconds,
    )


def _checked(
    t: Target,
    r: cxx.Registered,
    answer: TorchAnswer,
    count: int,
    blocks: Sequence[cxx.JobResult],
    names: Sequence[str],
    known: Sequence[Known],
) -> DtypeCheck:
    """One dtype's outputs (``blocks``: ``count`` runs, one per alpha value) against torch's
    ``answer``."""
    return check_dtype(
        kernel=t.kernel,
        names=names,
        input_type=r.input,
        output_type=r.output,
        result_type=r.result,
        inputs=tuple(x * count for x in answer.inputs),
        reference=answer.reference or None,
        torch_dtype=answer.result_dtype,
        torch_errors=answer.errors,
        output=b"".join(m.output for m in blocks),
        status=b"".join(m.status for m in blocks),
        known=known,
        no_reference=_host_why(t, answer.no_reference),
        edge=answer.edge,
        samples=answer.samples,
        upcast=answer.upcast,
        alphas=answer.alpha_shown,
    )


def _host_why(t: Target, why: str | None) -> str | None:
    """Why a kernel has no reference: what the host code leaves unread says it better than
    the search by its name (inputs are still made, to run the kernel, so this path too)."""
    if why is not None and t.host is not None and t.host.unknown is not None:
        return f"unknown: {t.host.unknown}"
    return why


def _jobs(r: cxx.Registered, answer: TorchAnswer) -> list[cxx.Job]:
    """The driver jobs of one registration: its inputs, once per alpha value if it has one."""
    if not answer.alphas:
        return [cxx.Job(r.index, answer.n, answer.inputs)]
    return [cxx.Job(r.index, answer.block, answer.inputs, a) for a in answer.alphas]


def regs_by_index(regs: Sequence[cxx.Registered]) -> list[cxx.Registered]:
    """Registrations addressable by their index in the object (run_jobs reads sizes so)."""
    if not regs:
        return []
    table: list[cxx.Registered] = [regs[0]] * (max(r.index for r in regs) + 1)
    for r in regs:
        table[r.index] = r
    return table


def _no_reference(
    t: Target, r: cxx.Registered, why: str, names: Sequence[str], known: Sequence[Known]
) -> DtypeCheck:
    return check_dtype(
        kernel=t.kernel,
        names=names,
        input_type=r.input,
        output_type=r.output,
        result_type=r.result,
        inputs=(),
        reference=None,
        torch_dtype=None,
        torch_errors={},
        output=b"",
        status=b"",
        known=known,
        no_reference=why,
    )


# ---- the entry point the command, the doit task and the migrate stage share --------------


def select_targets(
    index: TreeIndex,
    references: Mapping[str, str],
    *,
    op: str | None = None,
    ops: Sequence[str] = (),
    file: str | None = None,
    every: bool = False,
) -> list[Target]:
    """The functors to check: every one, a file's, one operator's, or those of ``ops`` (a
    PR's affected operators: the ones without a functor are left out)."""
    if every:
        return guide_math.all_targets(index, references)
    if file is not None:
        found = guide_math.targets_for_file(index, file, references)
        if found is None:
            names = ", ".join(f.path for f in index.kernels.files) or "none"
            raise NothingToCheckError(f"{file}: no such .metal kernel file (the tree has: {names})")
        return found
    if ops:
        found = []
        for name in ops:
            try:
                found += guide_math.targets_for_op(index, name, references)
            except UnknownOperatorError:
                continue  # an operator the change removed: nothing of it left to check
        if not found:
            raise NothingToCheckError(f"none of {', '.join(ops)} has a registered Metal functor")
        return list({(t.file, t.kernel): t for t in found}.values())
    assert op is not None
    targets = guide_math.targets_for_op(index, op, references)
    if not targets:
        record = index.record(op, find_references=False)
        raise NothingToCheckError(
            f"{record.op} has no registered Metal functor (looked up as "
            f"{', '.join(record.kernel_names)}); nothing to check"
        )
    return targets


def compiler_text(builder: cxx.Builder) -> str:
    """The compiler, and the one for what the shim's bfloat class does not compile."""
    if builder.bfloat is None:
        return f"{builder.compiler.label}; no compiler with a built-in bfloat"
    return f"{builder.compiler.label}; where that does not compile: {builder.bfloat.label}"


def runners_for(settings: Settings) -> Runners:
    """The real runners: the host compiler, the checkout's (or wheel's) c10/metal headers,
    and the configured interpreter for the references."""
    compiler = cxx.find_compiler(settings.math.cxx)
    package = reference.torch_package(settings.tree)  # NoTorchError without torch
    headers = cxx.find_c10_headers(settings.root, package)
    bfloat = cxx_bfloat.find_bfloat_compiler(settings.math.cxx, settings.math_cache)
    builder = cxx.Builder(compiler, headers, settings.root, settings.math_cache, bfloat=bfloat)
    max_samples, cache = settings.math.max_samples, settings.math_cache

    def references(cases: list[Case]) -> dict[str, TorchAnswer]:
        return reference.references(settings.tree, cases, cache, max_samples=max_samples)

    return Runners(builder, references)


def known_of(settings: Settings) -> tuple[Known, ...]:
    return tuple(Known(k.op, k.dtype, k.reason) for k in settings.math.known)


def run_check(
    settings: Settings,
    *,
    op: str | None = None,
    ops: Sequence[str] = (),
    file: str | None = None,
    every: bool = False,
    kernels: Collection[str] | None = None,
    runners: Runners | None = None,
) -> MathReport:
    """check-math on the tree of ``settings``: one operator's functors, several operators',
    a file's, or all (see :func:`select_targets`); of those, only ``kernels`` when given."""
    index = load_index(settings.tree)
    targets = select_targets(
        index, settings.math.references, op=op, ops=ops, file=file, every=every
    )
    if kernels is not None:
        targets = [t for t in targets if t.kernel in kernels]
    runners = runners or runners_for(settings)
    report = check(
        targets, runners, known=known_of(settings), scratch=settings.cache_dir / "math" / "run"
    )
    return MathReport(report.functors, report.compiler, report.headers, tuple(index.warnings))


# ---- the migrate chain's check_math stage ----------------------------------------------


def stage(request: Request, console: Console) -> None:
    """Check op's functors as the chain left them; a mismatch stops it before the build.
    An operator without a functor (not element-wise) has its whole kernels checked instead
    (:func:`pipeline.flows.kernel_checks.stage`).

    Skipped, saying so, when the operator has no functor yet or the interpreter has no torch
    (no reference, no wheel headers): the bundled sandbox runs without torch.
    """
    settings = request.settings
    files = state.op_files(settings, request.op)
    try:
        report = run_check(settings, op=request.op)
    except NothingToCheckError as exc:
        from pipeline.flows import kernel_checks  # not element-wise: its whole kernels

        kernel_checks.stage(request, console, str(exc))
        return
    except NoTorchError as exc:
        note = f"check-math skipped: {exc}"
        console.print(note, markup=False, highlight=False)
        state.write_text(files.math_json, json.dumps({"schema": 1, "skipped": str(exc)}))
        state.write_text(files.math_md, f"_{note}_\n")
        return
    render_terminal(report, console)
    state.write_text(files.math_json, json.dumps(to_json(report), indent=2))
    state.write_text(files.math_md, render_markdown(report))
    if report.failed:
        bad = [f.kernel for f in report.functors if f.failed]
        raise WorkLeftError(
            f"check-math: {', '.join(bad)} disagree(s) with torch on CPU (table above); fix "
            "the functor, or list a reviewed deviation under math.known, before building"
        )
