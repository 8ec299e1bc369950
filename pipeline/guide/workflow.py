"""Which of the metal-kernel guide's two workflows an operator still needs.

One rule, used by the checklist (audit), the backlog and the nightly dashboard.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import TYPE_CHECKING

from pipeline.tree.native_yaml import MpsKind

if TYPE_CHECKING:
    from pipeline.tree.index import OperatorRecord


class Workflow(str, Enum):
    """The guide's workflows, and ``done`` when neither is left."""

    MIGRATE = "migrate"  # MPSGraph code or an MPS-only dispatch row is still there
    ADD = "add"  # some overload has no MPS support at all
    DONE = "done"

    def __str__(self) -> str:
        return self.value


def workflow(kinds: Iterable[MpsKind], *, mpsgraph_left: bool) -> Workflow:
    """The workflow from the overloads' MPS kinds and whether MPSGraph code serves the op.

    ``mpsgraph_left`` covers what no yaml row shows: an MPSGraph implementation, a stub
    registered with an MPSGraph body (``REGISTER_MPS_UNARY_STUB``), or the op's
    ``_native.h`` include left beside MPSGraph code (a half-done migration).
    """
    kinds = set(kinds)
    if MpsKind.MPS_SPECIFIC in kinds or mpsgraph_left:
        return Workflow.MIGRATE
    if MpsKind.NONE in kinds:
        return Workflow.ADD
    return Workflow.DONE


def of_record(record: OperatorRecord) -> Workflow:
    """The workflow of one operator's joined record."""
    return workflow(
        (o.kind for o in record.overloads),
        mpsgraph_left=bool(record.mpsgraph or record.leftover_includes)
        or any(not s.native for s in record.stubs),
    )
