"""An impact analysis for the terminal: operators and why, the sweep, the selection figures."""

from __future__ import annotations

from pipeline.impact import Impact


def render_text(impact: Impact, *, show_tests: bool = False, warnings: bool = True) -> str:
    """A terminal report: operators with reasons, the sweep, build and selection figures;
    the warnings too unless ``warnings`` is False (the caller prints them on stderr)."""
    out = []
    pct = f"{impact.fraction:.1%}"
    scope = "full sweep" if impact.full_sweep else f"{len(impact.operators)} operator(s)"
    build = "build needed" if impact.build_needed else "no build needed"
    out.append(
        f"{scope}; {build}; {impact.selected:,} of {impact.total:,} consistency tests ({pct})"
    )
    for op in impact.operators:
        out.append(f"  {op.operator}")
        out.extend(f"    - {reason}" for reason in op.reasons)
    if impact.full_sweep_reasons:
        out.append("full sweep because:")
        out.extend(f"  - {reason}" for reason in impact.full_sweep_reasons)
    if impact.inductor_tests:
        out.append("Inductor MPS tests: " + ", ".join(impact.inductor_tests))
        out.extend(f"  - {reason}" for reason in impact.inductor_reasons)
    if impact.ignored:
        out.append("ignored (no effect on MPS): " + ", ".join(impact.ignored))
    if warnings:
        out.extend(f"warning: {w}" for w in impact.warnings)
    if show_tests:
        out.extend(impact.test_ids)
    return "\n".join(out)
