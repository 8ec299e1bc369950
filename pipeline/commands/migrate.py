"""`migrate OP`: audit → edit → build → test → table → drop xfails → summary.

Each stage is a plain function of (settings, op, ...) that reads and writes files under
``<state_dir>/ops/<op>/``; ``pipeline.tasks`` wires them into doit tasks with real file
dependencies, and this command runs that same task graph through doit's API.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from pipeline.commands import audit
from pipeline.config import OVERRIDABLE, Settings
from pipeline.edit import metal as metal_edit
from pipeline.edit import native_yaml as yaml_edit
from pipeline.edit import objc as objc_edit
from pipeline.edit.atomic import FileEdit, Journal, apply_edits
from pipeline.errors import EditVerificationError, MissingFunctorError, PipelineError
from pipeline.report import render
from pipeline.results import junit
from pipeline.results import table as tables
from pipeline.run import build as build_runner
from pipeline.run import tests as test_runner
from pipeline.state import (
    build_log,
    build_stamp,
    op_dir,
    record_expectations,
    write_json,
)
from pipeline.tree import paths
from pipeline.tree.common_mps import XfailEntry
from pipeline.tree.index import OperatorRecord, find_references, load_index
from pipeline.tree.opinfo import OpInfoRecord

if TYPE_CHECKING:
    from pipeline.results.decide import XfailDecision

KERNELS = paths.KERNELS_DIR
OPERATIONS = paths.OPERATIONS_DIR
# What structured kernels hand their stubs: the kernel type when no declaration says otherwise
DEFAULT_ITERATOR = "TensorIteratorBase&"
# exec kind -> (host file receiving the stub, Metal file receiving a new functor)
TARGET_FILES = {
    "unary": (f"{OPERATIONS}/UnaryKernel.mm", f"{KERNELS}/UnaryKernel.metal"),
    "binary": (f"{OPERATIONS}/BinaryKernel.mm", f"{KERNELS}/BinaryKernel.metal"),
}


def exec_kind(record: OperatorRecord) -> str:
    """``unary`` or ``binary``, from the Tensor inputs of the operator's schemas."""
    counts = []
    for o in record.overloads:
        args = o.schema.split("(", 1)[1].rsplit(") ->", 1)[0].split("*", 1)[0]
        counts.append(len(re.findall(r"(?:^|,)\s*Tensor\b(?!\()", args)))
    return "binary" if max(counts, default=1) >= 2 else "unary"


# ----------------------------------------------------------------------------- edit


@dataclass(frozen=True)
class EditPlan:
    edits: tuple[FileEdit, ...]
    notes: tuple[str, ...]  # what a human still has to do
    old_names: tuple[str, ...]  # the *_mps kernels the yaml dispatched to before


def stub_param_type(record: OperatorRecord) -> tuple[str | None, list[str]]:
    """The parameter type of the operator's new kernel function, and notes for a human.

    It is the iterator the stub's ``DECLARE_DISPATCH`` type takes (``TensorIterator&`` or
    ``TensorIteratorBase&``). None when that type takes more (``const Scalar& alpha``) or
    something else: the function is then the contributor's to write. Without a readable
    declaration, ``TensorIteratorBase&`` (what structured kernels pass), with a note.
    """
    stub, function = f"{record.op}_stub", f"{record.op}_mps_kernel"
    decl = record.stub_decl
    if decl is None:
        unread = [
            u
            for u in record.unrecognised
            if PurePosixPath(u.span.path).match(paths.NATIVE_HEADERS) and stub in u.text
        ]
        why = (
            f"{unread[0].span}: the type {stub} is declared with is not understood "
            f"({unread[0].reason})"
            if unread
            else f"no DECLARE_DISPATCH for {stub} found under {paths.NATIVE_HEADERS}"
        )
        return DEFAULT_ITERATOR, [
            f"{why}; {function} takes {DEFAULT_ITERATOR}: check it against the stub's type"
        ]
    if decl.iterator_param is None:
        return None, [
            f"{decl.span}: {stub} is declared as {decl.fn_type}, taking "
            f"({', '.join(decl.params)}): write {function} and REGISTER_DISPATCH({stub}, "
            f"&{function}) in the host file by hand"
        ]
    return decl.iterator_param, []


def _chain(edits: dict[str, FileEdit], new: FileEdit) -> None:
    """Fold successive edits of one file into a single before→after edit."""
    prev = edits.get(new.rel)
    if prev is None:
        edits[new.rel] = new
    else:
        edits[new.rel] = FileEdit(new.rel, prev.before, new.after, f"{prev.summary}; {new.summary}")


def plan_edits(settings: Settings, op: str, body: str | None = None) -> EditPlan:
    """Compute (and verify) every mechanical edit of the guide for ``op``; writes nothing.

    Raises MissingFunctorError, before any edit, when the Metal functor does not exist and
    no ``body`` was given: the math is the contributor's.
    """
    root = settings.root
    record = load_index(settings).record(op)
    op = record.op
    edits: dict[str, FileEdit] = {}
    notes: list[str] = []
    read = lambda rel: edits[rel].after if rel in edits else (root / rel).read_text()  # noqa: E731

    kind = exec_kind(record)
    stub_file, metal_file = TARGET_FILES[kind]
    needs_stub = not any(s.native for s in record.stubs)
    if needs_stub and not record.functors:
        dtypes = audit.required_dtypes(record) or ("float32", "float16", "bfloat16")
        arity = 2 if kind == "binary" else 1
        if body is None:
            skeleton = metal_edit.functor_skeleton(op, arity, dtypes)
            raise MissingFunctorError(
                f"{op}: no Metal functor yet. Write it in {metal_file} (the math is yours), "
                f'then re-run; or pass body="..." to have it inserted:\n\n{skeleton}'
            )
        try:
            functor = metal_edit.add_functor(read(metal_file), metal_file, op, arity, body, dtypes)
        except ValueError as exc:  # the contributor's body: say what is wrong with it
            raise EditVerificationError(f"body=...: {exc}; nothing was written") from exc
        _chain(edits, functor)

    yaml_rel = paths.NATIVE_YAML
    fold = yaml_edit.fold_mps_dispatch(read(yaml_rel), yaml_rel, op)
    _chain(edits, fold.edit)
    notes += [f"{name}: {reason}" for name, reason in fold.manual]

    for impl in record.mpsgraph:
        rel = impl.span.path
        others = [i.name for i in record.mpsgraph if i.span.path == rel]
        _chain(
            edits, objc_edit.remove_implementation(read(rel), rel, impl.name, also_removing=others)
        )
        after = read(rel)
        if any(i.op == op and i.span.path == rel for i in record.includes) and (
            not objc_edit.include_still_needed(after, op)
        ):
            _chain(edits, objc_edit.remove_include(after, rel, op))
    for stub in record.stubs:
        if not stub.native:
            notes.append(
                f"{stub.span}: {stub.stub} is registered by {stub.macro} with an MPSGraph body; "
                "remove that registration by hand (macro-generated)"
            )
    if needs_stub:
        param_type, stub_notes = stub_param_type(record)
        notes += stub_notes
        if param_type is not None:
            _chain(
                edits,
                objc_edit.add_stub(
                    read(stub_file),
                    stub_file,
                    f"{op}_stub",
                    f"{op}_mps_kernel",
                    kind,
                    op,
                    param_type=param_type,
                ),
            )
    for info in record.opinfos:
        for d in info.decorators:
            notes.append(
                f"OpInfo {info.key}: MPS decorator {d.kind} {d.test or ''} ({d.where}) "
                "should go once the tests pass"
            )
    return EditPlan(tuple(e for e in edits.values() if e.changed), tuple(notes), record.old_names)


def stage_edit(
    settings: Settings,
    op: str,
    console: Console,
    *,
    force: bool = False,
    dry_run: bool = False,
    body: str | None = None,
) -> EditPlan:
    """Apply (or with ``dry_run`` only show) the mechanical edits; record them."""
    plan = plan_edits(settings, op, body)
    for edit in plan.edits:
        console.print(
            f"[bold]{'would edit' if dry_run else 'edit'}[/bold] {edit.rel}: "
            + escape(edit.summary),
            highlight=False,
        )
        if dry_run:
            console.print(edit.diff(), markup=False, highlight=False)
    if not plan.edits:
        console.print("nothing to edit: the mechanical steps are done", highlight=False)
    for note in plan.notes:
        console.print(f"[yellow]manual:[/yellow] {escape(note)}", highlight=False)
    if dry_run:
        return plan
    journal = Journal(settings.state_dir / "journal.json")
    apply_edits(settings.root, plan.edits, journal, force=force)
    if plan.edits:  # re-record the audit: it now describes the edited tree, so stays current
        audit.record_audit(settings, op, None)
    leftovers = find_references(settings.root, plan.old_names)
    for name, span in leftovers:
        console.print(f"[yellow]reference to old name[/yellow] {name} at {span}", highlight=False)
    write_json(
        op_dir(settings, op) / "edit.json",
        {
            "edited": [{"file": e.rel, "summary": e.summary} for e in plan.edits],
            "manual": list(plan.notes),
            "old_name_refs": [{"name": n, "file": s.path, "line": s.start} for n, s in leftovers],
        },
    )
    return plan


# ---------------------------------------------------------------------------- build


def stage_build(settings: Settings, console: Console) -> build_runner.BuildResult:
    """`ninja -C build torch_cpu` with a progress bar; stamp on success, BuildError otherwise."""
    log = build_log(settings)
    result = build_runner.run(build_runner.BuildRequest(settings.build_command, settings.root, log))
    result.check()
    data = {
        "ok": result.ok,
        "seconds": round(result.seconds, 2),
        "no_work": result.no_work,
        "steps": result.steps_total,
        "log": str(result.log_path),
    }
    write_json(build_stamp(settings), data)
    console.print(
        "build: up to date" if result.no_work else f"build: ok in {result.seconds:.1f}s",
        highlight=False,
    )
    return result


# ----------------------------------------------------------------------------- test


def selectors(opinfos: Iterable[OpInfoRecord], kinds: Sequence[str]) -> tuple[str, ...]:
    """pytest -k substrings selecting exactly these OpInfos' consistency tests."""
    return tuple(f"test_{k}_{info.stem}_mps_" for info in opinfos for k in kinds)


def _run_tests(settings: Settings, record: OperatorRecord) -> tuple[Path, str]:
    """Run the operator's consistency tests into a fresh results folder; (junit, summary)."""
    if not record.opinfos:
        raise PipelineError(f"{record.op}: no OpInfo, so no consistency tests to run")
    return run_consistency_tests(
        settings, selectors(record.opinfos, settings.test_kinds), record.op
    )


def run_consistency_tests(
    settings: Settings, test_selectors: Sequence[str], label: str
) -> tuple[Path, str]:
    """One pytest run of ``test_selectors`` into a new ``<results>/<time>-<label>/`` folder.

    Returns (the JUnit report, one line of counts); raises PipelineError when pytest wrote
    no report (nothing matched, a crash, a timeout).
    """
    run_dir = test_runner.new_run_dir(settings.results_dir, label)
    result = test_runner.run(
        test_runner.TestRequest(
            python=settings.python,
            test_file=settings.test_file,
            cwd=settings.root,
            selectors=tuple(test_selectors),
            junit_path=run_dir / "junit.xml",
            log_path=run_dir / "pytest.log",
            timeout=settings.test_timeout,
            extra_args=settings.pytest_args,
        )
    )
    if not result.ran or not result.junit_path.is_file():
        raise PipelineError(
            f"pytest produced no JUnit report: {result.message or 'see the log'}\n"
            f"  full log: {result.log_path}"
        )
    junit_path = run_dir / "junit.xml"
    if len(result.junit_paths) > 1:  # batched selections: one report for the stages below
        junit.merge_reports(result.junit_paths, junit_path)
    counts = ", ".join(f"{k} {v}" for k, v in sorted(result.counts.items()) if v)
    return junit_path, f"{sum(result.counts.values())} run in {result.seconds:.1f}s ({counts})"


def stage_test(settings: Settings, op: str, console: Console) -> Path:
    """Run the operator's consistency tests; the JUnit file lands in the op's folder."""
    record = load_index(settings).record(op, find_references=False)
    junit_path, summary = _run_tests(settings, record)
    target = op_dir(settings, op) / "junit.xml"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(junit_path, target)
    record_expectations(settings, op)
    console.print(
        f"tests: {summary}; results in {junit_path.parent}", markup=False, highlight=False
    )
    return target


# ---------------------------------------------------------------------------- table


def display_names(opinfos: Iterable[OpInfoRecord]) -> dict[str, str]:
    """Test stem -> "name (variant)": the row labels of a per-dtype table."""
    return {
        info.stem: info.name + (f" ({info.variant_test_name})" if info.variant_test_name else "")
        for info in opinfos
    }


def load_table(
    settings: Settings, op: str
) -> tuple[OperatorRecord, tables.DtypeTable, tuple[str, ...]]:
    """The operator's record and per-dtype table from its last JUnit report (+ warnings)."""
    record = load_index(settings).record(op, find_references=False)
    report = junit.parse_report(op_dir(settings, op) / "junit.xml")
    table = tables.build_table(report.cases, names=display_names(record.opinfos))
    return record, table, report.warnings


def stage_table(settings: Settings, op: str, console: Console) -> tables.DtypeTable:
    """Print the per-dtype table; write table.md and table.json beside the JUnit report."""
    record, table, warnings = load_table(settings, op)
    for w in warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(w)}", highlight=False)
    render.render_terminal(table, console)
    d = op_dir(settings, op)
    (d / "table.md").write_text(render.render_markdown(table))
    (d / "table.json").write_text(render.render_json(table))
    return table


# ------------------------------------------------------------------------ drop xfails


def plan_xfail_changes(
    settings: Settings,
    entries: Iterable[XfailEntry],
    opinfos: Iterable[OpInfoRecord],
    table: tables.DtypeTable,
) -> tuple[tuple[XfailDecision, ...], FileEdit | None]:
    """Decide which ``entries`` of ``opinfos``' keys go given ``table``; the (unapplied) edit."""
    # Imported here: libcst (behind the xfail editor) is 0.2 s of start-up that every
    # up-to-date `doit` run would otherwise pay.
    from pipeline.edit import xfails as xfail_edit
    from pipeline.results import decide

    decisions = decide.decide_xfails(entries, table, opinfos=opinfos)
    changes = decide.to_changes([d for d in decisions if d.action != "keep"])
    if not changes:
        return decisions, None
    rel = paths.COMMON_MPS
    text = (settings.root / rel).read_text()
    return decisions, xfail_edit.apply_xfail_changes(text, rel, changes)


def stage_drop(settings: Settings, op: str, console: Console, *, force: bool = False) -> None:
    """Remove xfails that xpassed, then re-run the tests; revert if they do not all pass."""
    record, table, _ = load_table(settings, op)
    decisions, edit = plan_xfail_changes(settings, record.xfails, record.opinfos, table)
    for d in decisions:
        console.print(
            f"xfail {d.list}[{d.key!r}]: {d.action} — {d.reason}", markup=False, highlight=False
        )
    journal = Journal(settings.state_dir / "journal.json")
    d = op_dir(settings, op)
    verified = None
    if edit is not None:
        apply_edits(settings.root, [edit], journal, force=force)
        console.print(edit.diff(), markup=False, highlight=False)
        junit_path, summary = _run_tests(settings, record)
        bad = [c for c in junit.parse_report(junit_path).cases if c.outcome in junit.FAILING]
        if bad:
            revert = FileEdit(edit.rel, edit.after, edit.before, "revert xfail removal")
            apply_edits(settings.root, [revert], journal, force=True)
            raise PipelineError(
                f"after removing the xfails, {len(bad)} test(s) did not pass "
                f"(first: {bad[0].name}); common_mps.py was restored. See {junit_path}"
            )
        verified = summary
        console.print(f"verified: {summary}", markup=False, highlight=False)
        # The tests have now run against the edited common_mps.py: results stay valid, and
        # the audit record is re-made so it shows the entries that are left.
        record_expectations(settings, op)
        audit.record_audit(settings, op, None)
    write_json(
        d / "xfails.json",
        {
            "decisions": [x.to_dict() for x in decisions],
            "diff": edit.diff() if edit else "",
            "verified": verified,
        },
    )


# -------------------------------------------------------------------------- summary


def stage_summary(settings: Settings, op: str, console: Console) -> str:
    """What changed, what the checklist still lacks, and the next command; summary.md."""
    record = load_index(settings).record(op)
    d = op_dir(settings, op)
    edits = json.loads((d / "edit.json").read_text())
    drops = json.loads((d / "xfails.json").read_text())
    table = json.loads((d / "table.json").read_text())
    items = audit.checklist(record)
    missing = [i for i in items if not i.ok]
    lines = [f"# {record.op}: migrate_op summary", ""]
    lines += [f"- edited {e['file']}: {e['summary']}" for e in edits["edited"]] or [
        "- no source edits were needed"
    ]
    lines += [f"- manual: {m}" for m in edits["manual"]]
    counts = table.get("counts", {})
    lines.append("- tests: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if v))
    for x in drops["decisions"]:
        if x["action"] != "keep":
            lines.append(f"- xfail {x['list']}[{x['key']!r}]: {x['action']} ({x['reason']})")
    if drops.get("verified"):
        lines.append(f"- re-run after dropping xfails: {drops['verified']}")
    lines.append("")
    if missing:
        lines.append("Still to do:")
        for item in missing:
            lines.append(f"- ✗ {item.title}")
            lines += [f"    - {x.text}" + (f" ({x.span})" if x.span else "") for x in item.details]
        lines.append("")
        lines.append(f"Next: fix the items above, then `doit migrate_op op={record.op}` again.")
    else:
        lines.append("Every checklist item passes.")
        lines.append(
            "Next: review `git diff`, run `python test/test_mps.py -k "
            f"test_output_match_{record.op}` on a Mac, and open the PR with the `ciflow/mps` label."
        )
    text = "\n".join(lines) + "\n"
    (d / "summary.md").write_text(text)
    console.print(text, markup=False, highlight=False)
    return text


# ------------------------------------------------------------------------------ CLI


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("op", help="operator name or OpInfo alias")
    parser.add_argument("--force", action="store_true", help="edit files with uncommitted changes")
    parser.add_argument("--dry-run", action="store_true", help="show the diffs, write nothing")
    parser.add_argument("--body", help="operator() body of a missing Metal functor")
    parser.add_argument(
        "--stage",
        default="migrate_op",
        choices=(
            "migrate_op",
            "audit",
            "edit",
            "build",
            "test_op",
            "table",
            "drop_xfails",
            "summary",
        ),
        help="run only up to this stage (doit runs what it depends on)",
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    """Run the doit task graph in-process: the same tasks and database as `doit migrate_op`."""
    from doit.cmd_base import ModuleTaskLoader
    from doit.doit_cmd import DoitMain

    from pipeline import tasks

    # Pass on what the user gave, not the resolved settings: root=sandbox must stay "sandbox"
    # (it selects the bundled OpInfo table), and unset keys keep their env/config values.
    doit_vars = [f"op={args.op}"] + [
        f"{key}={value}" for key in OVERRIDABLE if (value := getattr(args, key, None))
    ]
    doit_vars += ["force=1"] * args.force + ["dry_run=1"] * args.dry_run
    if args.body:
        doit_vars.append(f"body={args.body}")
    loader = ModuleTaskLoader(
        {k: getattr(tasks, k) for k in dir(tasks) if k.startswith("task_")}
        | {"DOIT_CONFIG": tasks.doit_config(settings.state_dir)}
    )
    return DoitMain(loader).run([args.stage, *doit_vars])
