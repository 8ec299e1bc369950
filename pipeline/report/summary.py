"""An operator's summary.md for a person: rendered, and its closing paragraph said once.

The summary stage writes summary.md in GitHub Markdown. A terminal gets it rendered by
rich (a table, a list, emphasis), never its raw marks. Its closing paragraph, the verdict
and the next step, is what the run's last line says (``verdict: OP: ...``, from
:mod:`pipeline.report.doit_reporter`, which also says it on a no-op run) or, when work is
left, the failure line with what to do next: printed with the rest it would be said twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console


def closing(text: str) -> tuple[str, str | None]:
    """``text`` without its closing paragraph, and that paragraph as one line (None when
    ``text`` has no paragraph). Cheap to import: the doit reporter reads every run's verdict
    with it."""
    paragraphs = [p for p in text.strip().split("\n\n") if p.strip()]
    if not paragraphs:
        return "", None
    return "\n\n".join(paragraphs[:-1]), " ".join(paragraphs[-1].split())


def show(text: str, console: Console) -> None:
    """summary.md's ``text`` on ``console``, rendered, without its closing paragraph."""
    from markdown_it import MarkdownIt  # rich's own Markdown parser (rich depends on it)
    from rich.markdown import Markdown

    body, _ = closing(text)
    if not body:
        return
    rendered = Markdown(body)
    # raw HTML read as text: summary.md quotes test messages, and rich drops the HTML it
    # finds (a message's `<lambda>` or `<class 'float'>` would vanish)
    parser = MarkdownIt().enable("strikethrough").enable("table")
    rendered.parsed = parser.disable(["html_inline", "html_block"]).parse(body)
    console.print(rendered)
