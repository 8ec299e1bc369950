"""The PR comment's Inductor MPS tests section, rendered from data (also in --post-from)."""

from __future__ import annotations

from pipeline.report import render
from pipeline.results.inductor import InductorRun

MAX_FAILED = 20  # failing tests listed; the rest are counted


def summary(run: InductorRun) -> str:
    """One line: the counts, or why nothing ran, and any file the tree lacks."""
    if run.error is not None:
        text = f"could not run: {run.error}"
    else:
        text = ", ".join(f"{k} {n}" for k, n in run.counts.items()) or "no test collected"
    return text + (f"; not in the tree, not run: {', '.join(run.missing)}" if run.missing else "")


def render_markdown(reasons: tuple[str, ...], run: InductorRun | None, why_not: str) -> str:
    """The section: why the tests were selected, then what they did (``why_not`` when
    ``run`` is None: they were selected but did not run)."""
    esc = render.escape_markdown
    out = ["#### Inductor MPS tests", "", "Selected because:"]
    out.extend(f"- {esc(reason)}" for reason in reasons)
    out.append("")
    if run is None:
        out.append(f"_Not run: {esc(why_not)}_")
        return "\n".join(out) + "\n"
    if run.files:
        out.append("Ran " + ", ".join(f"`{f}`" for f in run.files) + f": {esc(summary(run))}")
    else:
        out.append(f"_{esc(summary(run))}_")
    if run.failed:
        out.extend(["", "Failing:"])
        out.extend(f"- `{test}`" for test in run.failed[:MAX_FAILED])
        if len(run.failed) > MAX_FAILED:
            out.append(f"- and {len(run.failed) - MAX_FAILED} more (junit.xml in `{run.run}`)")
    return "\n".join(out) + "\n"
