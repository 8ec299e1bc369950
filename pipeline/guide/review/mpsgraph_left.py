"""The MPSGraph path of a migrated operator is really gone (pytorch#187827): once the
change gives an operator a Metal kernel, no MPSGraph implementation (``TORCH_IMPL_FUNC``
with its ``LookUpOrCreateCachedGraph``), no MPS-only dispatch row and no MPSGraph stub may
be left for it; otherwise the kernel was added beside the old graph, which still runs."""

from __future__ import annotations

from collections.abc import Iterator

from pipeline.errors import UnreadableFileError
from pipeline.guide.review.base import Finding, Review, Severity
from pipeline.tree.native_yaml import MpsKind
from pipeline.tree.text import read_text

ID = "mpsgraph-left"
SEVERITY = Severity.ERROR
TITLE = "the MPSGraph path of a migrated operator is gone"
CACHED_GRAPH = "LookUpOrCreateCachedGraph"


def _text(review: Review, path: str) -> str:
    for change in review.changes:
        if change.path == path and change.new_text is not None:
            return change.new_text
    try:
        return read_text(review.index.root / path, path)
    except UnreadableFileError:  # the tree index warns of it already
        return ""


def check(review: Review) -> Iterator[Finding]:
    for op, (record, _, _) in sorted(review.changed_operators().items()):
        has_kernel = bool(record.functors) or any(s.native for s in record.stubs)
        if not has_kernel:
            continue
        for impl in record.mpsgraph:
            lines = _text(review, impl.span.path).split("\n")[impl.span.start - 1 : impl.span.end]
            cached = f", {CACHED_GRAPH} and all," if any(CACHED_GRAPH in x for x in lines) else ""
            yield Finding(
                impl.span.path, impl.span.start, ID, SEVERITY,
                f"{op} has a Metal kernel, but its MPSGraph implementation {impl.name}{cached} "
                "is still here: remove it (a kernel beside the old graph)",
            )  # fmt: skip
        for overload in record.overloads:
            if overload.kind is MpsKind.MPS_SPECIFIC and overload.kernel:
                yield Finding(
                    overload.span.path, overload.span.start, ID, SEVERITY,
                    f"{overload.func} still dispatches MPS to {overload.kernel}, not to the "
                    "shared kernel: fold MPS into the CPU/CUDA dispatch row",
                )  # fmt: skip
        for stub in record.stubs:
            if not stub.native:
                yield Finding(
                    stub.span.path, stub.span.start, ID, SEVERITY,
                    f"{stub.stub} is still registered with an MPSGraph body ({stub.macro})",
                )  # fmt: skip
