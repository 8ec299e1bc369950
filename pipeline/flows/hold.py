"""The migrate chain's hold on its tree: the lock taken at the chain's first stage and kept to
its last, and the recovery of an edit a killed run left.

Light on purpose: every stage's task takes the hold before its action, the warm audit
included, which must not import the stages, the readers or rich (see ``flows.audit_replay``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pipeline.config import Settings
from pipeline.edit import transaction

if TYPE_CHECKING:
    from rich.console import Console


def waiting_line(console: Console) -> Callable[[int | None], None]:
    def waiting(pid: int | None) -> None:
        who = f" (pid {pid})" if pid else ""
        console.print(f"waiting for another mps-pipeline run on this tree{who}…", highlight=False)

    return waiting


def recover_edit(settings: Settings, console: Console) -> transaction.Recovery | None:
    recovered = transaction.recover(settings.root)
    if recovered:
        from rich.markup import escape  # only when there is something to say

        console.print(f"[yellow]recovered:[/yellow] {escape(recovered.message)}", highlight=False)
    return recovered


# What hold_tree recovered, for the first stage of the chain that edits (it reports it).
pending: list[transaction.Recovery] = []


def hold_tree(settings: Settings, console: Console, *, recover: bool = True) -> None:
    """Take the tree's lock for the rest of this chain (released when the doit run ends):
    a concurrent run of the same tree waits for the whole chain, never tests between an
    edit and its drop of xfails. ``recover`` False (a dry run, which writes nothing):
    an interrupted edit is left for the next real run."""
    held = transaction.hold(settings.root, wait=settings.lock_wait, on_wait=waiting_line(console))
    if held and recover:
        recovered = recover_edit(settings, console)
        if recovered:
            pending.append(recovered)


def release_tree() -> None:
    """End the chain's hold (:func:`hold_tree`): the lock, and a recovery nobody reported."""
    transaction.release_held()
    pending.clear()
