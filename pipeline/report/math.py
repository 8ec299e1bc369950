"""check-math's report: a per-dtype table per functor, on the terminal, in Markdown (the
migrate summary, the PR comment) and as JSON (schema in docs/machine-output.md)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from pipeline.fields import dump
from pipeline.report.pr_comment import code_span
from pipeline.report.render import escape_markdown
from pipeline.results.math import Agreement, DtypeCheck, FunctorCheck, MathReport
from pipeline.results.pr import MathDoc

NOT_COVERED = (
    "Not covered: subnormal flushing on the GPU, fast-math precision, host-side dispatch "
    "in the .mm (this checks the functor's math on the host)."
)
_STYLE = {
    Agreement.OK: "green",
    Agreement.MISMATCH: "bold red",
    Agreement.KNOWN: "yellow",
    Agreement.NO_REFERENCE: "dim",
}


def mismatch_text(d: DtypeCheck) -> str:
    """``3 (2 nan/inf, 1 crash)``: the mismatches and their kinds."""
    kinds = [
        (d.precision, "precision"),
        (d.special, "nan/inf"),
        (d.exact, "value"),
        (d.crashes, "crash"),
    ]
    parts = [f"{n} {name}" for n, name in kinds if n]
    text = str(d.mismatched)
    return f"{text} ({', '.join(parts)})" if parts else text


def not_modelled_text(f: FunctorCheck) -> str:
    return (
        f"not modelled: it reaches {', '.join(f.not_modelled)}, which the host shim declares "
        "but cannot compute (it depends on other GPU threads); not run"
    )


def set_aside_text(f: FunctorCheck) -> str:
    return (
        f"built with {', '.join(f.set_aside)} of its file left out: they do not compile on "
        "the host with these headers (clang also refuses `template [[host_name]]` "
        "instantiations)"
    )


def _verdict(d: DtypeCheck) -> str:
    if d.status is Agreement.KNOWN:
        return f"known: {d.known}"
    if d.status is Agreement.NO_REFERENCE:
        return f"no reference: {d.no_reference}"
    return str(d.status)


def _notes(d: DtypeCheck) -> list[str]:
    notes = list(d.findings)
    notes += [
        f"({', '.join(c.inputs)}): kernel {c.kernel}, torch {c.torch} [{c.kind}]"
        for c in d.counterexamples
    ]
    if d.subnormal:
        notes.append(f"{d.subnormal} disagreement(s) on subnormal values, not counted")
    if d.refused:
        notes.append(f"{d.refused} input(s) torch refuses too (no reference)")
    return notes


def _headline(report: MathReport) -> str:
    counts = report.counts()
    functors = len(report.functors)
    cached = sum(1 for f in report.functors if f.cached)
    bits = [f"{counts[str(s)]} {s}" for s in Agreement if counts[str(s)]]
    if report.compile_errors:
        bits.append(f"{report.compile_errors} not compiling")
    if report.not_modelled:
        bits.append(f"{report.not_modelled} not modelled")
    return (
        f"check-math: {functors} functor(s) ({cached} from the cache), "
        f"{sum(len(f.dtypes) for f in report.functors)} dtype(s): " + ", ".join(bits or ["none"])
    )


def render_terminal(report: MathReport, console: Console) -> None:
    console.print(Text(_headline(report), style="bold"))
    if report.compiler:
        console.print(Text(f"compiler: {report.compiler}; headers: {report.headers}", style="dim"))
    for f in report.functors:
        title = f"{f.kernel} ({f.file}) vs {f.reference or 'no reference'}"
        if f.compile_error:
            console.print(Text(f"{title}: does not compile: {f.compile_error}", style="bold red"))
            continue
        if f.failure:
            console.print(Text(f"{title}: {f.failure}", style="bold red"))
            continue
        if f.not_modelled:
            console.print(Text(f"{title}: {not_modelled_text(f)}", style="yellow"))
            continue
        table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
        for column in ("dtype", "out", "torch", "checked", "matched", "mismatched", "verdict"):
            table.add_column(column)
        for d in f.dtypes:
            table.add_row(
                d.dtype,
                d.output,
                d.torch_dtype or "-",
                str(d.checked),
                str(d.matched),
                mismatch_text(d),
                Text(_verdict(d), style=_STYLE[d.status]),
            )
        console.print(table)
        for d in f.dtypes:
            if d.status is Agreement.OK:
                continue
            for note in _notes(d):
                console.print(f"  {d.dtype}: {note}", markup=False)
        if f.skipped:
            console.print(
                Text(f"  not checked (not an OpInfo MPS dtype): {', '.join(f.skipped)}", "dim")
            )
        if f.set_aside:
            console.print(Text(f"  {set_aside_text(f)}", "dim"))
        if f.built_with:
            note = f"  built with {f.built_with}: the shim's bfloat class does not compile it"
            console.print(Text(note, "dim"))
    console.print(Text(NOT_COVERED, style="dim"))


def _code(text: str) -> str:
    """``text`` as a code span that holds whatever backticks it has and cannot end a table
    cell (GitHub splits cells at a bare ``|`` even in code)."""
    return code_span(text).replace("|", "\\|")


def render_markdown(report: MathReport) -> str:
    """The table for the migrate summary and the PR comment."""
    lines = [f"**{escape_markdown(_headline(report))}**", ""]
    if report.compiler:
        lines += [f"_compiler: {escape_markdown(report.compiler)}; headers: "
                  f"{escape_markdown(report.headers)}_", ""]  # fmt: skip
    rows = []
    for f in report.functors:
        name = _code(f.kernel)
        if f.compile_error:
            lines.append(f"- {name} does not compile: {_code(f.compile_error)}")
            continue
        if f.failure:
            lines.append(f"- {name}: {escape_markdown(f.failure)}")
            continue
        if f.not_modelled:
            lines.append(f"- {name}: {escape_markdown(not_modelled_text(f))}")
            continue
        for d in f.dtypes:
            # "; ", not <br>: the PR comment escapes raw HTML, a <br> would show as text
            examples = "; ".join(
                f"{_code('(' + ', '.join(c.inputs) + ')')}: kernel {_code(c.kernel)}, "
                f"torch {_code(c.torch)}"
                for c in d.counterexamples
            )
            findings = "; ".join(escape_markdown(x) for x in d.findings)
            detail = "; ".join(x for x in (findings, examples) if x)
            rows.append(
                f"| {name} | {d.dtype} | {d.checked} | {d.matched} | {mismatch_text(d)} | "
                f"{escape_markdown(_verdict(d))} | {detail} |"
            )
    if rows:
        lines += [
            "| functor | dtype | checked | matched | mismatched | verdict "
            "| first counterexamples |",
            "| --- | --- | ---: | ---: | --- | --- | --- |",
            *rows,
        ]
    lines += ["", f"_{NOT_COVERED}_"]
    return "\n".join(lines) + "\n"


def to_json(report: MathReport) -> object:
    """The ``check-math --json`` document (and results.json's ``math``), as
    :class:`pipeline.results.pr.MathDoc` declares and reads it back."""
    return dump(MathDoc.of(report, NOT_COVERED))
