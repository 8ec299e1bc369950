"""What one run of the migrate chain was asked to do: shared by the stage table
(:mod:`pipeline.flows.migrate`), the stages and the audit, and importing none of them."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.config import Settings


@dataclass(frozen=True)
class Request:
    """What one run of the chain was asked to do."""

    settings: Settings
    op: str
    force: bool = False
    dry_run: bool = False
    body: str | None = None
    host_body: str | None = None
    # the stages after the edit (build, tests) run too: what they need is checked before it
    past_edit: bool = True
