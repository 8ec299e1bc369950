"""The metal-kernel guide's checklist for one operator, each item with its evidence.

``to_json`` is the ``audit --json`` document; its schema (``SCHEMA_VERSION``) is documented
in docs/machine-output.md and kept stable.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.dtypes import COMPLEX, sort_key
from pipeline.guide.workflow import of_record
from pipeline.tree.index import OperatorRecord
from pipeline.tree.native_yaml import MpsKind
from pipeline.tree.span import Span

SCHEMA_VERSION = 1
# MPS has no 64-bit floating point: never required of a kernel.
UNSUPPORTED_ON_MPS = frozenset({"float64", "complex128"})


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
            + (
                f"MPS -> {o.kernel} (separate MPS row)"
                if o.kind is MpsKind.MPS_SPECIFIC
                else "no MPS"
            ),
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
            or (
                Detail(
                    "no "
                    + " or ".join(f"{k}_functor" for k in record.kernel_names)
                    + " in aten/src/ATen/native/mps/kernels/"
                ),
            ),
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

    implemented_in = {i.span.path for i in record.mpsgraph}
    items.append(
        CheckItem(
            "mpsgraph",
            not (record.mpsgraph or graph_stubs or record.leftover_includes),
            "no MPSGraph implementation left",
            tuple(Detail(f"{i.kind} {i.name}", i.span) for i in record.mpsgraph)
            + tuple(
                Detail(f"{s.macro}: {s.stub} registered with an MPSGraph body", s.span)
                for s in graph_stubs
            )
            + tuple(
                Detail(
                    f"#include <ATen/ops/{i.op}_native.h>"
                    + ("" if i.span.path in implemented_in else " left without an implementation"),
                    i.span,
                )
                for i in record.leftover_includes
            ),
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
    """The documented ``--json`` document (docs/machine-output.md, "audit --json")."""
    return {
        "schema": SCHEMA_VERSION,
        "op": record.op,
        "workflow": of_record(record).value,
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
