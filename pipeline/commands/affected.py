"""`affected --base REV [--head REV] [--json]`: the operators a diff affects, and why."""

from __future__ import annotations

import argparse
import json

from pipeline.config import Settings
from pipeline.errors import PipelineError
from pipeline.impact import Impact, affected, analyze, load_view
from pipeline.impact.changes import ChangedFile, changes_from_list, parse_changed
from pipeline.tree import opinfo


def render_text(impact: Impact, *, show_tests: bool = False) -> str:
    """A terminal report: operators with reasons, the sweep, build and selection figures."""
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
    if impact.ignored:
        out.append("ignored (no effect on MPS): " + ", ".join(impact.ignored))
    out.extend(f"warning: {w}" for w in impact.warnings)
    if show_tests:
        out.extend(impact.test_ids)
    return "\n".join(out)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base", help="base revision of the diff (merge base of the PR)")
    parser.add_argument("--head", help="head revision (default: the work tree)")
    parser.add_argument(
        "--changed",
        action="append",
        default=[],
        metavar="PATH[:A-B,...]",
        help="a changed file and its changed lines, instead of --base (repeatable)",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--tests", action="store_true", help="also list the selected test ids")


def diff_impact(settings: Settings, base: str, head: str | None = None) -> Impact:
    """The impact of ``git diff base..head`` (the work tree when ``head`` is None)."""
    return affected(
        settings.root,
        base,
        head,
        opinfos=opinfo.load_opinfos(settings.tree),
        kinds=settings.test_kinds,
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Print the impact of a diff (``--base``) or of a list of changed lines (``--changed``)."""
    if not args.base and not args.changed:
        raise PipelineError("affected: give --base REV (a git diff) or --changed PATH[:LINES]")
    if args.changed:
        root = settings.root
        changes: tuple[ChangedFile, ...] = changes_from_list(
            root, [parse_changed(spec) for spec in args.changed]
        )
        impact = analyze(
            changes,
            opinfos=opinfo.load_opinfos(settings.tree),
            view=load_view(root),
            kinds=settings.test_kinds,
        )
    else:
        impact = diff_impact(settings, args.base, args.head)
    if args.json:
        print(json.dumps(impact.to_dict(), indent=2))
    else:
        print(render_text(impact, show_tests=args.tests))
    return 0
