"""From changed files to the operators they affect, each with its reasons.

``analyze`` is a pure function of the changed files' texts, the tree's MPS sources (a
:class:`~pipeline.impact.view.TreeView`) and the OpInfo records. ``classify`` names each
file's kind, and the kind's rule (:data:`pipeline.impact.rules.RULES`, one module per kind)
either names operators, asks for the full sweep (saying why), or finds nothing to do. When
in doubt a rule errs towards testing more: a missed operator costs a broken nightly, an
extra test costs seconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from pipeline.config import Settings
from pipeline.errors import PipelineError
from pipeline.impact.changes import (
    ChangedFile,
    Range,
    changed_files,
    changes_from_list,
    parse_changed,
    tree_path,
)
from pipeline.impact.model import (
    COMMON_MPS,
    MPS_RUNTIME_DIR,
    OPINFO_DEFINITIONS,
    OWN,
    SCHEMA,
    SHARED,
    SHARED_NATIVE_DIR,
    TESTING_DIR,
    AffectedOp,
    Context,
    Findings,
    Impact,
)
from pipeline.impact.rules import RULES
from pipeline.impact.view import (
    C10_METAL_DIR,
    KERNELS_DIR,
    MPS_DIR,
    NATIVE_YAML,
    OPERATIONS_DIR,
    Resolver,
    TreeView,
    is_kernel_header,
    load_view,
    view_from_texts,
)
from pipeline.tree import opinfo, paths
from pipeline.tree.opinfo import OpInfoRecord

# the names callers import from here, though their home is model.py
__all__ = [
    "COMMON_MPS",
    "OPINFO_DEFINITIONS",
    "OWN",
    "SCHEMA",
    "SHARED",
    "AffectedOp",
    "Impact",
    "affected",
    "analyze",
    "classify",
    "diff_impact",
    "listed_impact",
    "selected_opinfos",
]


def classify(path: str, test_file: str = paths.TEST_MPS) -> str:
    """Which rule handles ``path`` (``test_file`` is the ``test.file`` setting, the file whose
    change may affect every consistency test): yaml, metal, c10_metal, header,
    inductor_codegen, host, mps_other,
    shared_cpp, shared_header, common_mps, opinfo, test_mps, testing or ignored."""
    if path == NATIVE_YAML:
        return "yaml"
    if path.startswith(KERNELS_DIR) and path.endswith(".metal"):
        return "metal"
    if path.startswith(C10_METAL_DIR) and path.endswith(".h"):
        return "c10_metal"
    if is_kernel_header(path):
        return "header"
    if path == paths.INDUCTOR_MPS_CODEGEN:
        return "inductor_codegen"
    if path.startswith(OPERATIONS_DIR) and path.endswith(".mm"):
        return "host"
    if path.startswith((MPS_DIR, C10_METAL_DIR, MPS_RUNTIME_DIR)):
        return "mps_other"
    rest = path.removeprefix(SHARED_NATIVE_DIR)
    if rest != path and rest.endswith(".cpp") and "/" not in rest:
        return "shared_cpp"
    if rest != path and rest.endswith(".h") and "/" not in rest:
        return "shared_header"
    if path == COMMON_MPS:
        return "common_mps"
    if path.endswith(".py") and (
        path == OPINFO_DEFINITIONS[0] or path.startswith(OPINFO_DEFINITIONS[1])
    ):
        return "opinfo"
    if path == test_file:
        return "test_mps"
    if path.startswith(TESTING_DIR) and path.endswith(".py"):
        return "testing"
    return "ignored"


def _tests_for(
    ops: dict[str, set[str] | None], opinfos: Sequence[OpInfoRecord], kinds: Sequence[str]
) -> tuple[str, ...]:
    wanted = []
    for info in opinfos:
        for op, keys in ops.items():
            if keys is None:
                if op in (info.name, info.aten_name) or op in info.aliases:
                    break
            elif info.key in keys:
                break
        else:
            continue
        wanted.append(info)
    return tuple(t for info in wanted for kind in kinds for t in info.test_ids(kind))


def _frozen(keys: set[str] | None) -> frozenset[str] | None:
    return None if keys is None else frozenset(keys)


def analyze(
    changes: Iterable[ChangedFile],
    *,
    opinfos: Iterable[OpInfoRecord],
    view: TreeView | None = None,
    kinds: Sequence[str] = ("output_match",),
    test_file: str = paths.TEST_MPS,
) -> Impact:
    """The operators ``changes`` affect, why, and which consistency tests cover them.

    ``view`` holds the tree's MPS sources at the new version (``load_view``); without it
    only the changed files themselves are known, so kernel-to-stub lookups fall back to
    names. ``kinds`` are the test kinds configured (``output_match``, ...): the suite total
    counts every OpInfo x dtype x kind.
    """
    changes = tuple(changes)
    opinfos = tuple(opinfos)
    if view is None:
        view = view_from_texts({c.path: c.new_text for c in changes if c.new_text is not None})
    new = view.with_texts({c.path: c.new_text for c in changes})
    old = new.with_texts({c.path: c.old_text for c in changes if c.old_text is not None})
    found = Findings(warnings=list(dict.fromkeys([*new.warnings, *old.warnings])))
    ctx = Context(old, new, Resolver([new, old], opinfos), opinfos, found)
    for change in changes:
        kind = classify(change.path, test_file)
        RULES[kind](change, ctx)

    everything = tuple(t for info in opinfos for kind in kinds for t in info.test_ids(kind))
    full = bool(found.sweep)
    test_ids = everything if full else _tests_for(found.keys, opinfos, kinds)
    return Impact(
        operators=tuple(
            AffectedOp(op, tuple(reasons), tuple(reasons.values()), _frozen(found.keys.get(op)))
            for op, reasons in sorted(found.reasons.items())
        ),
        full_sweep=full,
        full_sweep_reasons=tuple(found.sweep),
        build_needed=found.build,
        ignored=tuple(sorted(found.ignored)),
        test_ids=test_ids,
        selected=len(test_ids),
        total=len(everything),
        warnings=tuple(found.warnings),
        inductor_tests=paths.INDUCTOR_MPS_TESTS if found.inductor else (),
        inductor_reasons=tuple(found.inductor),
    )


def affected(
    root: Path,
    base: str,
    head: str | None = None,
    *,
    opinfos: Sequence[OpInfoRecord],
    kinds: Sequence[str] = ("output_match",),
    test_file: str = paths.TEST_MPS,
) -> Impact:
    """Analyse ``git diff base..head`` (the work tree when ``head`` is None) under ``root``."""
    changes = changed_files(root, base, head)
    view = load_view(root, head)
    return analyze(changes, opinfos=opinfos, view=view, kinds=kinds, test_file=test_file)


# -- with the settings: the tree, its OpInfos and the test kinds ------------------------


def diff_impact(settings: Settings, base: str, head: str | None = None) -> Impact:
    """The impact of ``git diff base..head`` (the work tree when ``head`` is None)."""
    return affected(
        settings.root,
        base,
        head,
        opinfos=opinfo.load_opinfos(settings.tree),
        kinds=settings.test_kinds,
        test_file=settings.test_file,
    )


def listed_impact(settings: Settings, specs: Sequence[str], *, cwd: Path | None = None) -> Impact:
    """The impact of changed lines given as ``PATH[:A-B,...]`` specs, against the tree on disk.

    A path may be relative to the tree root, relative to ``cwd`` (default: the current
    directory) or absolute (:func:`~pipeline.impact.changes.tree_path`). A path outside the
    tree or naming no file in it contributes nothing but a warning (first in
    ``warnings``); when no spec names a file in the tree, PipelineError (exit 2) says why.
    """
    root = settings.root
    files: list[tuple[str, list[Range]]] = []
    rejected: list[tuple[str, str]] = []
    for spec in specs:
        path, ranges = parse_changed(spec)
        rel, why = tree_path(root, path, cwd)
        if rel is None:
            rejected.append((path, why or ""))
        else:
            files.append((rel, ranges))
    if not files:
        raise PipelineError(
            "affected: no --changed path is a file in the tree; "
            + "; ".join(f"{path}: {why}" for path, why in rejected)
            + ". Give a path relative to the tree root or to the current directory, or an "
            "absolute path inside the tree"
        )
    warnings = [f"--changed {path} ignored: {why}" for path, why in rejected]
    changes = changes_from_list(root, files)
    for change in changes:
        count = len((change.new_text or "").splitlines())
        past = [f"{a}-{b}" if a != b else str(a) for a, b in change.new_ranges if a > count]
        if past:
            warnings.append(
                f"--changed {change.path}: line(s) {','.join(past)} past its end "
                f"({count} lines); those lines contribute nothing"
            )
    impact = analyze(
        changes,
        opinfos=opinfo.load_opinfos(settings.tree),
        view=load_view(root),
        kinds=settings.test_kinds,
        test_file=settings.test_file,
    )
    return replace(impact, warnings=(*warnings, *impact.warnings))


def selected_opinfos(
    impact: Impact, opinfos: Sequence[OpInfoRecord], kinds: Sequence[str]
) -> tuple[OpInfoRecord, ...]:
    """The OpInfos whose tests ``impact`` selected (whole OpInfos: every dtype and kind)."""
    if impact.full_sweep:
        return tuple(opinfos)
    wanted = set(impact.test_ids)
    return tuple(
        info for info in opinfos if any(t in wanted for k in kinds for t in info.test_ids(k))
    )
