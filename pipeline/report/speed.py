"""Kernel speed for the PR comment and the terminal: ratios per shape and dtype against main's
figure on the same runner class; only what lies outside main's night-to-night spread is
flagged."""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.results.speed import Judgement, Verdict

MARK = {Judgement.SLOWER: "🐢 slower", Judgement.NOISE: "within noise", Judgement.OK: "ok",
        Judgement.NO_BASELINE: "no baseline", Judgement.TOO_FEW: "too few runs"}  # fmt: skip
MAX_ROWS = 60


def _ms(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds * 1e6:,.1f} µs"


def _ratio(v: Verdict) -> str:
    if v.ratio is None:
        return "–"
    text = f"{v.ratio:.2f}×"
    return f"**{text}**" if v.judgement is Judgement.SLOWER else text


def rows(verdicts: Sequence[Verdict]) -> list[tuple[str, ...]]:
    """The table's rows, flagged ones first, then by operator."""
    ordered = sorted(verdicts, key=lambda v: (v.judgement is not Judgement.SLOWER, v.key))
    return [
        (v.key[0], v.key[1], v.key[2], v.key[3], _ms(v.pr_median), _ms(v.main_median),
         _ratio(v), "–" if v.spread is None else f"{v.spread:.2f}×", MARK[v.judgement])
        for v in ordered
    ]  # fmt: skip


HEADER = ("operator", "dtype", "shape", "layout", "PR", "main", "ratio", "main spread", "")


def render_markdown(
    verdicts: Sequence[Verdict], runner: str, threshold: float, nights: int
) -> str:
    """The PR comment's speed section."""
    slower = sum(v.judgement is Judgement.SLOWER for v in verdicts)
    lines = [
        "### Kernel speed against main",
        "",
        f"On `{runner}`, against main's median over its last {nights} nights on the same "
        f"runner class: {slower} of {len(verdicts)} benchmarks slower than {threshold:.2f}× "
        "and outside main's night-to-night spread.",
        "",
        "| " + " | ".join(HEADER) + " |",
        "|" + "---|" * len(HEADER),
    ]
    table = rows(verdicts)
    lines += ["| " + " | ".join(f"`{c}`" if i == 0 else c for i, c in enumerate(r)) + " |"
              for r in table[:MAX_ROWS]]  # fmt: skip
    if len(table) > MAX_ROWS:
        lines.append(f"\n_…{len(table) - MAX_ROWS} more rows in speed.json_")
    return "\n".join(lines) + "\n"
