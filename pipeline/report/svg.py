"""What the dashboard's inline SVG charts share: escaping, clipped titles, the <svg> element."""

from __future__ import annotations

import html
from collections.abc import Sequence

FONT = "font-family:ui-sans-serif,system-ui,sans-serif;font-size:11px"
MAX_TITLE = 200


def escape(value: object) -> str:
    """``value`` as HTML/SVG text or an attribute's value: every piece of text goes through
    here (a test message may hold markup)."""
    return html.escape(str(value), quote=True)


def clip(text: str, limit: int = MAX_TITLE) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def svg(width: float, height: float, label: str, body: Sequence[str]) -> str:
    """An inline <svg> of ``body`` (markup), ``label`` read out by screen readers."""
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="{escape(label)}" '
        f'style="{FONT}">' + "".join(body) + "</svg>"
    )


def empty(message: str) -> str:
    """A chart with nothing to draw: ``message`` in its place."""
    return svg(420, 40, message, [f'<text x="8" y="24" fill="#57606a">{escape(message)}</text>'])
