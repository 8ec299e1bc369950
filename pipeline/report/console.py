"""The console every command prints to (kept apart from the renderers: cheap to import)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


# The width tables get on a pipe or CI log, where rich would assume 80 columns.
PIPE_WIDTH = 160


def terminal(*, stderr: bool = False) -> Console:
    """The console every command prints to. On a pipe or CI log, lines are never wrapped
    (soft wrap: an error line stays one line, whole, for grep and the log's own wrapping)
    and tables are laid out :data:`PIPE_WIDTH` columns wide, so file:line locations fit."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    tty = stream.isatty()
    return Console(
        stderr=stderr, highlight=False, width=None if tty else PIPE_WIDTH, soft_wrap=not tty
    )


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
