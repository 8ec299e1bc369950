"""The console every command prints to (kept apart from the renderers: cheap to import)."""

from __future__ import annotations

import sys

from rich.console import Console


def terminal() -> Console:
    """On a pipe or CI log, wide enough that tables and file:line locations don't wrap
    (rich would assume 80 columns there)."""
    return Console(highlight=False, width=None if sys.stdout.isatty() else 160)
