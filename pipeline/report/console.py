"""The console every command prints to (kept apart from the renderers: cheap to import)."""

from __future__ import annotations

import sys

from rich.console import Console


def terminal(*, stderr: bool = False) -> Console:
    """On a pipe or CI log, wide enough that tables and file:line locations don't wrap
    (rich would assume 80 columns there)."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, highlight=False, width=None if stream.isatty() else 160)
