"""`audit OP`: the metal-kernel guide's checklist for one operator, each item with file:line.

The ``--json`` schema (``SCHEMA_VERSION``) is documented in the README and kept stable.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape

from pipeline import state
from pipeline.config import Settings
from pipeline.dtypes import sort_key
from pipeline.report.console import terminal
from pipeline.tree.index import OperatorRecord, load_index
from pipeline.tree.span import Span

SCHEMA_VERSION = 1
# MPS has no 64-bit floating point: never required of a kernel.
UNSUPPORTED_ON_MPS = frozenset({"float64", "complex128"})
COMPLEX = frozenset({"complex64", "complex32"})


@dataclass(frozen=True)
class Detail:
    """One piece of evidence under a checklist item, with where it is when known."""

    text: str
    span: Span | None = None


@dataclass(frozen=True)
class CheckItem:
    """One line of the checklist: ✓ or ✗, what it checks, and the evidence."""

    id: str
    ok: bool
    title: str
    details: tuple[Detail, ...] = ()


def required_dtypes(record: OperatorRecord) -> tuple[str, ...]:
    """Dtypes the OpInfos say MPS must support (complex only for SUPPORTED_COMPLEX_OPS)."""
    dtypes = {d for d in record.opinfo_dtypes if d not in UNSUPPORTED_ON_MPS}
    if not record.complex_supported:
        dtypes -= COMPLEX
    return tuple(sorted(dtypes, key=sort_key))


def _dtype_list(dtypes) -> str:
    return ", ".join(sorted(dtypes, key=sort_key)) or "none"


def checklist(record: OperatorRecord) -> tuple[CheckItem, ...]:
    """Evaluate the guide's checklist against the joined record."""
    items: list[CheckItem] = []

    pending = record.pending_overloads
    dispatch = tuple(
        Detail(
            f"{o.func}: "
            + (f"MPS -> {o.kernel} (separate MPS row)" if o.kind == "mps_specific" else "no MPS"),
            o.span,
        )
        for o in pending
    )
    if not record.overloads:
        dispatch = (Detail("no native_functions.yaml entry"),)
    items.append(
        CheckItem(
            "dispatch",
            not pending and bool(record.overloads),
            "MPS dispatch on every overload (shared kernel, not a separate *_mps row)",
            dispatch,
        )
    )

    items.append(
        CheckItem(
            "functor",
            bool(record.functors),
            "Metal functor in kernels/*.metal",
            tuple(
                Detail(f"{f.name}_functor" + (f" (via {f.macro})" if f.macro else ""), f.span)
                for f in record.functors
            )
            or (Detail(f"no {record.op}_functor in aten/src/ATen/native/mps/kernels/"),),
        )
    )

    required = required_dtypes(record)
    registered = set(record.registered_dtypes)
    missing = [d for d in required if d not in registered]
    extra = registered - set(required)
    first_reg = record.registrations[0].span if record.registrations else None
    items.append(
        CheckItem(
            "dtypes",
            bool(record.registrations) and not missing,
            "registered dtypes cover what the OpInfo says MPS supports",
            (
                Detail(f"registered: {_dtype_list(registered)}", first_reg),
                Detail(f"required: {_dtype_list(required)}"),
            )
            + ((Detail(f"missing: {_dtype_list(missing)}"),) if missing else ())
            + ((Detail(f"registered beyond the OpInfo: {_dtype_list(extra)}"),) if extra else ()),
        )
    )

    native = [s for s in record.stubs if s.native]
    graph_stubs = [s for s in record.stubs if not s.native]
    items.append(
        CheckItem(
            "stub",
            bool(native) and not graph_stubs,
            "host stub registered (REGISTER_DISPATCH to a native Metal kernel)",
            tuple(
                Detail(f"{s.stub} -> {s.function or s.macro} ({s.kernel_name or '?'})", s.span)
                for s in native
            )
            + tuple(
                Detail(f"{s.stub} is registered but its body is MPSGraph ({s.macro})", s.span)
                for s in graph_stubs
            )
            or (Detail(f"no REGISTER_DISPATCH({record.op}_stub, ...) in operations/*.mm"),),
        )
    )

    items.append(
        CheckItem(
            "mpsgraph",
            not record.mpsgraph,
            "no MPSGraph implementation left",
            tuple(Detail(f"{i.kind} {i.name}", i.span) for i in record.mpsgraph),
        )
    )

    items.append(
        CheckItem(
            "old_names",
            not record.old_name_refs,
            "no remaining reference to an old *_mps name",
            tuple(Detail(name, span) for name, span in record.old_name_refs),
        )
    )

    items.append(
        CheckItem(
            "xfails",
            not record.xfails,
            "no xfail/skip entries in common_mps.py",
            tuple(
                Detail(
                    f"{e.list}[{e.key!r}]: "
                    + ("all dtypes" if e.dtypes is None else _dtype_list(e.dtypes)),
                    e.span,
                )
                for e in record.xfails
            ),
        )
    )

    items.append(
        CheckItem(
            "decorators",
            not any(i.decorators for i in record.opinfos),
            "no MPS skip/xfail decorators on the OpInfo",
            tuple(
                Detail(
                    f"{info.key}: {d.kind}"
                    + (f" {d.test}" if d.test else "")
                    + (f" [{', '.join(d.dtypes)}]" if d.dtypes else "")
                    + (f" ({d.where})" if d.where else "")
                )
                for info in record.opinfos
                for d in info.decorators
            ),
        )
    )

    if record.unrecognised:
        items.append(
            CheckItem(
                "unrecognised",
                False,
                "lines the readers could not interpret near this operator",
                tuple(Detail(f"{u.reason}: {u.text.strip()}", u.span) for u in record.unrecognised),
            )
        )
    return tuple(items)


def _loc(span: Span) -> dict:
    return {"file": span.path, "line": span.start, "end_line": span.end}


def to_json(record: OperatorRecord, items: tuple[CheckItem, ...]) -> dict:
    """The documented ``--json`` document (see README, "audit --json")."""
    return {
        "schema": SCHEMA_VERSION,
        "op": record.op,
        "workflow": record.workflow,
        "overloads": [
            {"func": o.func, "kind": o.kind, "kernel": o.kernel, **_loc(o.span)}
            for o in record.overloads
        ],
        "functors": [
            {
                "name": f.name,
                **_loc(f.span),
                "dtypes": [[r.input, r.output] for r in record.registrations if r.kernel == f.name],
            }
            for f in record.functors
        ],
        "stubs": [
            {
                "stub": s.stub,
                "function": s.function,
                "native": s.native,
                "kernel_name": s.kernel_name,
                **_loc(s.span),
            }
            for s in record.stubs
        ],
        "mpsgraph": [{"name": i.name, "kind": i.kind, **_loc(i.span)} for i in record.mpsgraph],
        "old_name_refs": [{"name": n, **_loc(s)} for n, s in record.old_name_refs],
        "xfails": [
            {
                "list": e.list,
                "function": e.function,
                "key": e.key,
                "dtypes": list(e.dtypes) if e.dtypes is not None else None,
                **_loc(e.span),
            }
            for e in record.xfails
        ],
        "opinfos": [
            {
                "name": i.name,
                "variant_test_name": i.variant_test_name,
                "aliases": list(i.aliases),
                "dtypes": list(i.dtypes),
            }
            for i in record.opinfos
        ],
        "required_dtypes": list(required_dtypes(record)),
        "tests": list(record.tests),
        "checklist": [
            {
                "id": c.id,
                "ok": c.ok,
                "title": c.title,
                "details": [
                    {"text": d.text, **(_loc(d.span) if d.span else {})} for d in c.details
                ],
            }
            for c in items
        ],
    }


def render(record: OperatorRecord, items: tuple[CheckItem, ...], console: Console) -> None:
    """The checklist for humans: ✓/✗ per item, evidence and file:line underneath."""
    console.print(
        f"[bold]{record.op}[/bold]  workflow: [cyan]{record.workflow}[/cyan]  "
        f"overloads: {len(record.overloads)}  consistency tests: {len(record.tests)}",
        highlight=False,
    )
    for item in items:
        mark = "[green]✓[/green]" if item.ok else "[red]✗[/red]"
        console.print(f" {mark} {item.title}", highlight=False)
        for d in item.details:
            where = f"  [dim]{d.span}[/dim]" if d.span else ""
            console.print(f"     {escape(d.text)}{where}", highlight=False, soft_wrap=True)
    done = sum(i.ok for i in items)
    console.print(f"{done}/{len(items)} checks pass", highlight=False)


def record_audit(settings: Settings, op: str, console: Console | None) -> OperatorRecord:
    """Print the checklist (unless ``console`` is None) and record it with its inputs' digest.

    The migrate chain's first stage: the edit stage re-records it after editing.
    """
    record = load_index(settings).record(op)
    items = checklist(record)
    if console is not None:
        render(record, items, console)
    d = state.op_dir(settings, op)
    state.write_json(d / "audit.json", to_json(record, items))
    (d / "audit.digest").write_text(state.inputs_digest(settings))
    return record


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("op", help="operator name or OpInfo alias, e.g. atan2 or arctan2")
    parser.add_argument("--json", action="store_true", help="print the documented JSON schema")


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Print the checklist; exit 0 when every item passes, 1 otherwise."""
    index = load_index(settings)
    record = index.record(args.op)
    items = checklist(record)
    if args.json:
        print(json.dumps(to_json(record, items), indent=2))
    else:
        render(record, items, terminal())
    return 0 if all(i.ok for i in items) else 1
