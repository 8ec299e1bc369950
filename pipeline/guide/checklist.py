"""The metal-kernel guide's checklist for one operator, each item with its evidence.

``to_json`` is the ``audit --json`` document; its schema (``SCHEMA_VERSION``) is documented
in docs/machine-output.md and kept stable.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from enum import Enum

from pipeline.dtypes import COMPLEX, sort_key
from pipeline.guide.workflow import of_record
from pipeline.tree.decorations import Place
from pipeline.tree.index import OperatorRecord, TreePart
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


class Status(str, Enum):
    """An item's verdict. ``unknown``: what it is judged on could not be read (a missing
    common_mps.py or kernels/ folder, an unreadable .mm), so it may not pass."""

    PASS = "pass"
    FAIL = "fail"
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class CheckItem:
    """One line of the checklist: ✓, ✗ or ?, what it checks, and the evidence."""

    id: str
    status: Status
    title: str
    details: tuple[Detail, ...] = ()

    @property
    def ok(self) -> bool:
        """Passed; an unknown item is not."""
        return self.status is Status.PASS


def _item(
    record: OperatorRecord,
    id: str,
    ok: bool,
    title: str,
    details: tuple[Detail, ...] = (),
    *,
    pass_needs: Collection[TreePart] = (),
    fail_needs: Collection[TreePart] = (),
) -> CheckItem:
    """The item, unknown when a source its verdict rests on has a gap.

    ``pass_needs``: the sources a pass rests on, because it means nothing was found there
    (no MPSGraph code in the host files). ``fail_needs``: those a failure rests on, because
    it means what was looked for was not found (no functor in the kernels); a failure with
    evidence (an xfail entry that is there) stands whatever else is missing.
    """
    needs = pass_needs if ok else fail_needs
    gaps = [gap for source, gap in record.gaps if source in needs]
    if not gaps:
        return CheckItem(id, Status.PASS if ok else Status.FAIL, title, details)
    return CheckItem(
        id, Status.UNKNOWN, title, details + tuple(Detail(f"unknown: {g}") for g in gaps)
    )


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
    composite = _composite_detail(record)
    items = [
        _dispatch(record),
        *(_kernel_items(record) if composite is None else _composite_items(record, composite)),
        _mpsgraph(record),
        _old_names(record),
        _xfails(record),
        _decorators(record),
    ]
    if record.unrecognised:
        items.append(
            CheckItem(
                "unrecognised",
                Status.FAIL,
                "lines the readers could not interpret near this operator",
                tuple(Detail(f"{u.reason}: {u.text.strip()}", u.span) for u in record.unrecognised),
            )
        )
    return tuple(items)


def _dispatch(record: OperatorRecord) -> CheckItem:
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
    return _item(
        record,
        "dispatch",
        not pending and bool(record.overloads),
        "MPS dispatch on every overload (shared kernel, not a separate *_mps row)",
        dispatch,
    )


def _composite_items(record: OperatorRecord, composite: Detail) -> list[CheckItem]:
    """A composite's implementation runs other operators: no kernel of its own to check."""
    return [
        _item(record, "functor", True, "Metal functor in kernels/*.metal", (composite,)),
        _item(record, "dtypes", True, "dtypes: those of the operators it runs", (composite,)),
        _item(record, "stub", True, "host stub: none, it calls no stub", (composite,)),
    ]


def _mpsgraph(record: OperatorRecord) -> CheckItem:
    graph_stubs = [s for s in record.stubs if not s.native]
    implemented_in = {i.span.path for i in record.mpsgraph}
    return _item(
        record,
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
        pass_needs={TreePart.HOST},
    )


def _old_names(record: OperatorRecord) -> CheckItem:
    return _item(
        record,
        "old_names",
        not record.old_name_refs,
        "no remaining reference to an old *_mps name",
        tuple(Detail(name, span) for name, span in record.old_name_refs),
        # the old names are those of the MPSGraph code found in the host files
        pass_needs={TreePart.HOST},
    )


def _xfails(record: OperatorRecord) -> CheckItem:
    return _item(
        record,
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
        # entries are keyed by the OpInfos' names: with none found, unknown
        pass_needs={TreePart.XFAILS, TreePart.OPINFOS},
    )


def _decorators(record: OperatorRecord) -> CheckItem:
    """MPS decorators on the OpInfos (op_db's, with tolerances) and, read from the files, the
    xfails and skips outside common_mps.py: the OpInfos' DecorateInfos and the test files'
    decorators (``@skipMPS`` on an ``@ops`` test is listed, not failed: it is no OpInfo's)."""
    dumped = tuple(
        Detail(
            f"{info.key}: {d.kind}"
            + (f" {d.test}" if d.test else "")
            + (f" [{', '.join(d.dtypes)}]" if d.dtypes else "")
            + (f" ({d.where})" if d.where else "")
        )
        for info in record.opinfos
        for d in info.decorators
    )
    seen = {d.where for info in record.opinfos for d in info.decorators}
    static = tuple(
        d for d in record.decorations if d.kind.expects_failure and str(d.span) not in seen
    )
    read = tuple(
        Detail(
            f"{d.key or d.place}: {d.kind} {d.test or 'every test'} "
            + ("[all dtypes]" if d.dtypes is None and d.raw_dtypes is None else "")
            + (f"[{', '.join(d.dtypes)}]" if d.dtypes else "")
            + (f"[{d.raw_dtypes}]" if d.raw_dtypes else "")
            + (f" if {d.active_if}" if d.active_if else "")
            + f" ({d.decorator})",
            d.span,
        )
        for d in static
    )
    on_opinfo = any(d.place is Place.OPINFO for d in static)
    return _item(
        record,
        "decorators",
        not any(i.decorators for i in record.opinfos) and not on_opinfo,
        "no MPS skip/xfail decorators on the OpInfo",
        dumped + read,
        pass_needs={TreePart.OPINFOS},
    )


def _loc(span: Span) -> dict:
    return {"file": span.path, "line": span.start, "end_line": span.end}


def to_json(
    record: OperatorRecord, items: tuple[CheckItem, ...], warnings: tuple[str, ...] = ()
) -> dict:
    """The documented ``--json`` document (docs/machine-output.md, "audit --json");
    ``warnings`` are the tree index's."""
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
                "status": c.status.value,
                "title": c.title,
                "details": [
                    {"text": d.text, **(_loc(d.span) if d.span else {})} for d in c.details
                ],
            }
            for c in items
        ],
        "warnings": list(warnings),
    }


def _composite_detail(record: OperatorRecord) -> Detail | None:
    """What a composite's shared implementation runs (None: not a composite)."""
    calls = record.composite_calls
    if calls is None:
        return None
    first = record.implementations[0]
    return Detail(
        f"composite: {first.name} runs other operators ({', '.join(calls) or 'none named'}), "
        "no kernel of its own",
        first.span,
    )


def _kernel_items(record: OperatorRecord) -> list[CheckItem]:
    """The functor, dtypes and stub items of an operator with a kernel of its own."""
    items: list[CheckItem] = []
    items.append(
        _item(
            record,
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
            fail_needs={TreePart.KERNELS},
        )
    )

    required = required_dtypes(record)
    registered = set(record.registered_dtypes)
    missing = [d for d in required if d not in registered]
    extra = registered - set(required)
    first_reg = record.registrations[0].span if record.registrations else None
    # without common_mps.py, SUPPORTED_COMPLEX_OPS is unknown: so is whether complex is required
    complex_unknown = any(d in COMPLEX for d in record.opinfo_dtypes if d not in UNSUPPORTED_ON_MPS)
    items.append(
        _item(
            record,
            "dtypes",
            bool(record.registrations) and not missing,
            "registered dtypes cover what the OpInfo says MPS supports",
            (
                Detail(f"registered: {_dtype_list(registered)}", first_reg),
                # with no OpInfo, what is required is unknown (never "none")
                Detail(f"required: {_dtype_list(required) if record.opinfos else 'unknown'}"),
            )
            + ((Detail(f"missing: {_dtype_list(missing)}"),) if missing else ())
            + (
                (Detail(f"registered beyond the OpInfo: {_dtype_list(extra)}"),)
                if extra and record.opinfos
                else ()
            ),
            pass_needs={TreePart.OPINFOS} | ({TreePart.XFAILS} if complex_unknown else set()),
            fail_needs={TreePart.KERNELS},
        )
    )

    native = [s for s in record.stubs if s.native]
    graph_stubs = [s for s in record.stubs if not s.native]
    items.append(
        _item(
            record,
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
            or (Detail(f"no REGISTER_DISPATCH({record.stub}, ...) in operations/*.mm"),),
            fail_needs=() if graph_stubs else {TreePart.HOST},
        )
    )
    return items
