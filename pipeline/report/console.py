"""The console every command prints to (kept apart from the renderers: cheap to import)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


def terminal(*, stderr: bool = False) -> Console:
    """On a pipe or CI log, wide enough that tables and file:line locations don't wrap
    (rich would assume 80 columns there)."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, highlight=False, width=None if stream.isatty() else 160)


class LazyTerminal:
    """:func:`terminal`, made (and rich imported) when first used: an action that may
    print nothing through it does not pay for rich."""

    def __init__(self, *, stderr: bool = False) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            self._console = terminal(stderr=self._stderr)
        return getattr(self._console, name)
