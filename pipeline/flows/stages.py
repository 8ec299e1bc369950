"""The stages of the guide for one operator: audit → edit → build → test → table → drop
xfails → summary, as plain functions of a :class:`~pipeline.flows.request.Request`.

Which stage runs when, and what it reads and writes, is declared once in
:mod:`pipeline.flows.migrate`; this module is what the stages do. Every stage that touches the
tree or its build holds the tree's lock, and the edit stages commit their files as one
transaction (:mod:`pipeline.edit.transaction`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from pipeline import sandbox, state, testid
from pipeline.config import Settings
from pipeline.edit import transaction
from pipeline.edit.atomic import FileEdit
from pipeline.errors import DocumentError, PipelineError, StaleShaderError, WorkLeftError
from pipeline.fields import dump, read
from pipeline.flows.audit import record_audit
from pipeline.flows.hold import pending, recover_edit, waiting_line
from pipeline.flows.records import DropsRecord, EditedFile, EditRecord, OldNameRef
from pipeline.flows.request import Request
from pipeline.guide import checklist, preflight
from pipeline.guide.plan import EditPlan, plan_edits
from pipeline.guide.xfails import plan_decoration_changes, plan_xfail_changes
from pipeline.report import render
from pipeline.report.summary import show
from pipeline.results import junit
from pipeline.results import table as tables
from pipeline.results.decide import XfailAction
from pipeline.run import build as build_runner
from pipeline.run import shaders
from pipeline.run import tests as test_runner
from pipeline.run.ninja_data import read_log
from pipeline.tree.index import OperatorRecord, find_references, load_index
from pipeline.tree.opinfo import OpInfoRecord

# How many failing tests' messages the summary prints on the terminal (table.md has all).
FIRST_FAILURES = 5


@contextmanager
def tree_locked(settings: Settings, console: Console) -> Iterator[transaction.Recovery | None]:
    """Hold the tree's lock; first finish (or undo) an edit a killed run left half done
    (what was recovered is the block's value)."""
    waiting = waiting_line(console)
    with transaction.tree_lock(settings.root, wait=settings.lock_wait, on_wait=waiting):
        recovered = recover_edit(settings, console)
        yield recovered or (pending.pop() if pending else None)


# ----------------------------------------------------------------------------- edit


def _show_plan(plan: EditPlan, console: Console, *, dry_run: bool) -> None:
    for edit in plan.edits:
        verb = "would edit" if dry_run or plan.blockers else "edit"
        console.print(f"[bold]{verb}[/bold] {edit.rel}: " + escape(edit.summary), highlight=False)
        if dry_run:
            console.print(edit.diff(), markup=False, highlight=False)
    if plan.empty:
        console.print("nothing to edit: the mechanical steps are done", highlight=False)
    for note in plan.notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}", highlight=False)
    for blocker in plan.blockers:
        console.print(f"[red]to write by hand:[/red] {escape(blocker.render())}", highlight=False)
        if dry_run and blocker.edit is not None and blocker.edit.changed:
            console.print(
                f"[bold]TODO[/bold] (a skeleton, never written) {blocker.edit.rel}:",
                highlight=False,
            )
            console.print(blocker.edit.diff(), markup=False, highlight=False)


def _blocked(plan: EditPlan, *, dry_run: bool) -> WorkLeftError:
    pieces = "; ".join(b.what for b in plan.blockers)
    wrote = "a real run would write nothing" if dry_run else "nothing was written"
    return WorkLeftError(
        f"{plan.op}: {len(plan.blockers)} piece(s) must be written by hand first ({wrote}): "
        f"{pieces}"
    )


def preview(request: Request, console: Console) -> None:
    """Every diff the edit would make and what is left to write by hand; writes nothing."""
    settings, op = request.settings, request.op
    index = load_index(settings.tree)
    record_audit(settings, op, console, index=index)
    plan = plan_edits(index, op, request.body, request.host_body)
    _show_plan(plan, console, dry_run=True)
    if plan.blockers:
        raise _blocked(plan, dry_run=True)


def edit(request: Request, console: Console) -> None:
    """Plan the operator's edits from the tree as it is now and commit them, all or none."""
    settings, op = request.settings, request.op
    with tree_locked(settings, console) as recovered:
        before = load_index(settings.tree)
        plan = plan_edits(before, op, request.body, request.host_body)
        _show_plan(plan, console, dry_run=False)
        if plan.blockers:
            raise _blocked(plan, dry_run=False)
        if plan.edits and request.past_edit:  # what the build and tests need, before a write
            preflight.check_chain(settings, before.record(op, find_references=False), plan)
        transaction.commit(
            settings.root, plan.edits, force=request.force, guard_also=plan.later_writes
        )
        if plan.edits:
            index = load_index(settings.tree)  # of the edited tree
            after = plan_edits(index, op, request.body, request.host_body)
            if after.edits:  # the readers disagree with the editors: say so, do not loop
                raise PipelineError(
                    f"{op}: after the edit, the tree still needs: "
                    + "; ".join(e.summary for e in after.edits)
                    + ". Please report this with `git diff`."
                )
            record_audit(settings, op, None, index=index)  # it now describes the edited tree
    leftovers = find_references(settings.root, plan.old_names)
    for name, span in leftovers:
        console.print(f"[yellow]reference to old name[/yellow] {name} at {span}", highlight=False)
    files = state.op_files(settings, op)
    edited = tuple(EditedFile(e.rel, e.summary) for e in plan.edits)
    if not edited and recovered and recovered.rolled_forward:
        # this run finished the edit a stopped run had committed: it is this run's edit
        edited = tuple(EditedFile(rel, what) for rel, what in recovered.rolled_forward)
    if not edited and files.edit.is_file():  # a re-check: keep what the last edit did
        edited = EditRecord.read(files.edit).edited
    record = EditRecord(
        inputs=state.edit_digest(settings, request.body, request.host_body),
        edited=edited,
        manual=tuple(plan.notes),
        old_name_refs=tuple(OldNameRef(n, s.path, s.start) for n, s in leftovers),
    )
    state.write_json(files.edit, dump(record))


# ---------------------------------------------------------------------------- build


def run_build(settings: Settings, console: Console) -> build_runner.BuildResult:
    """`ninja -C build torch_cpu` with a progress bar; BuildError when it fails, and
    StaleShaderError when it finished without remaking a shader from its edited source.

    The stamp holds the build's identity (what ninja's log says it built), so it changes
    exactly when ninja did work and the tests that depend on it re-run then, and only then.
    """
    before = read_log(settings.build_dir)
    result = build_runner.run(
        build_runner.BuildRequest(settings.build_command, settings.root, state.build_log(settings))
    )
    result.check()
    state.write_build_stamp(settings, did_work=not result.no_work)
    console.print(
        "build: up to date" if result.no_work else f"build: ok in {result.seconds:.1f}s",
        highlight=False,
    )
    try:
        check = shaders.check_build(
            settings.root, settings.build_dir, before, build_runner.find_ninja()
        )
    except StaleShaderError as exc:
        stale = _StaleBuild(tuple(str(f) for f in exc.findings))
        state.write_json(state.build_check(settings), dump(stale))
        raise
    state.write_json(state.build_check(settings), check.to_dict())
    console.print(f"build: {check.describe()}; {check.toolchain.describe()}", highlight=False)
    return result


def build(request: Request, console: Console) -> None:
    with tree_locked(request.settings, console):
        run_build(request.settings, console)


# ----------------------------------------------------------------------------- test


def selectors(opinfos: Iterable[OpInfoRecord], kinds: Sequence[str]) -> tuple[str, ...]:
    """pytest -k substrings selecting exactly these OpInfos' consistency tests."""
    return tuple(testid.selector(k, info.stem) for info in opinfos for k in kinds)


def run_consistency_tests(
    settings: Settings, test_selectors: Sequence[str], label: str
) -> tuple[Path, str]:
    """One pytest run of ``test_selectors`` into a new ``<results>/<time>-<label>/`` folder.

    Returns (the JUnit report, one line of counts read from that report, as the table
    counts); raises PipelineError when pytest wrote no report (nothing matched, a crash, a
    timeout).
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
            env=sandbox.TEST_ENV if settings.is_sandbox else None,
        )
    )
    if not result.ran or not result.junit_path.is_file():
        raise PipelineError(
            f"pytest produced no JUnit report: {result.message}\n  full log: {result.log_path}"
        )
    junit_path = run_dir / "junit.xml"
    if len(result.junit_paths) > 1:  # batched selections: one report for the stages below
        junit.merge_reports(result.junit_paths, junit_path)
    cases = junit.parse_report(junit_path).cases
    return junit_path, f"{len(cases)} run in {result.seconds:.1f}s ({junit.count_text(cases)})"


def _run_tests(settings: Settings, record: OperatorRecord) -> tuple[Path, str]:
    if not record.opinfos:
        raise PipelineError(f"{record.op}: no OpInfo, so no consistency tests to run")
    return run_consistency_tests(
        settings, selectors(record.opinfos, settings.test_kinds), record.op
    )


def test(request: Request, console: Console) -> None:
    """Run the operator's consistency tests; the JUnit file lands in the op's folder."""
    settings, op = request.settings, request.op
    with tree_locked(settings, console):
        record = load_index(settings.tree).record(op, find_references=False)
        junit_path, summary = _run_tests(settings, record)
    files = state.op_files(settings, op)
    files.dir.mkdir(parents=True, exist_ok=True)
    state.write_bytes(files.junit, junit_path.read_bytes())
    state.record_expectations(settings, op)
    console.print(
        f"tests: {summary}; results in {junit_path.parent}", markup=False, highlight=False
    )


# ---------------------------------------------------------------------------- table


def load_table(
    settings: Settings, op: str
) -> tuple[OperatorRecord, tables.DtypeTable, tuple[str, ...]]:
    """The operator's record and per-dtype table from its last JUnit report (+ warnings)."""
    record = load_index(settings.tree).record(op, find_references=False)
    report = junit.parse_report(state.op_files(settings, op).junit)
    table = tables.build_table(report.cases, names=tables.display_names(record.opinfos))
    return record, table, report.warnings


def table(request: Request, console: Console) -> None:
    """Print the per-dtype table; write table.md and table.json beside the JUnit report."""
    _, dtype_table, warnings = load_table(request.settings, request.op)
    for w in warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(w)}", highlight=False)
    render.render_terminal(dtype_table, console)
    files = state.op_files(request.settings, request.op)
    state.write_text(files.table_md, render.render_markdown(dtype_table))
    state.write_text(files.table_json, render.render_json(dtype_table))


# ------------------------------------------------------------------------ drop xfails


def drop_xfails(request: Request, console: Console) -> None:
    """Remove xfails that xpassed, then re-run the tests; put them back if any does not pass."""
    settings, op = request.settings, request.op
    with tree_locked(settings, console):
        record, dtype_table, _ = load_table(settings, op)
        decisions, change = plan_xfail_changes(settings, record.xfails, record.opinfos, dtype_table)
        # the DecorateInfos of its OpInfos that the same tests judge (issue 31)
        outside, edits = plan_decoration_changes(
            settings, record.decorations, record.opinfos, dtype_table
        )
        decisions += outside
        changes = [*([change] if change is not None else []), *edits]
        for d in decisions:
            where = f" ({d.at})" if d.at else ""
            console.print(
                f"xfail {d.list}[{d.key!r}]{where}: {d.action} — {d.reason}",
                markup=False,
                highlight=False,
            )
        verified, verified_junit = None, None
        if changes:
            transaction.commit(settings.root, changes, force=request.force)
            for edit in changes:
                console.print(edit.diff(), markup=False, highlight=False)
            junit_path, summary = _run_tests(settings, record)
            bad = [c for c in junit.parse_report(junit_path).cases if c.outcome in junit.FAILING]
            if bad:
                reverts = [
                    FileEdit(c.rel, c.after, c.before, "revert xfail removal") for c in changes
                ]
                transaction.commit(settings.root, reverts, force=True)
                edited = ", ".join(c.rel for c in changes)
                raise WorkLeftError(
                    f"after removing the xfails, {len(bad)} test(s) did not pass "
                    f"(first: {bad[0].name}); {edited} restored. See {junit_path}"
                )
            verified, verified_junit = summary, str(junit_path)
            console.print(f"verified: {summary}", markup=False, highlight=False)
            _final_table(settings, op, record, junit_path, console)
            # The tests have now run against the edited common_mps.py: results stay valid,
            # and the audit record is re-made so it shows the entries that are left.
            state.record_expectations(settings, op)
            record_audit(settings, op, None)
    files = state.op_files(settings, op)
    tested = state.file_sha(files.junit)
    if verified is None and files.xfails.is_file():
        # Nothing to drop now (a comment in common_mps.py re-ran this stage), but the
        # entries dropped over these very results were verified then: that re-run is still
        # what the tests say, not the older report that had them xpass.
        last = DropsRecord.read(files.xfails)
        kept = last.verified_junit
        if last.tested == tested and kept and Path(kept).is_file():
            verified, verified_junit = last.verified, kept
    drops = DropsRecord(
        decisions=tuple(decisions),
        diff="".join(edit.diff() for edit in changes),
        verified=verified,
        verified_junit=verified_junit,
        tested=tested,
    )
    state.write_json(files.xfails, drops.to_json())


def _final_table(
    settings: Settings, op: str, record: OperatorRecord, junit_path: Path, console: Console
) -> None:
    """table.md becomes the table of the re-run (what the tree gives now the entries are
    gone), the one before the drops kept beside it; table.json, what the stages below
    depend on, stays the tested table."""
    files = state.op_files(settings, op)
    final = tables.build_table(
        junit.parse_report(junit_path).cases, names=tables.display_names(record.opinfos)
    )
    before = files.table_md.read_text(encoding="utf-8") if files.table_md.is_file() else ""
    state.write_text(files.table_before_drops_md, before)
    state.write_text(
        files.table_md,
        "## After dropping the xfails\n\n"
        + render.render_markdown(final)
        + f"\nThe table before the drops: {files.table_before_drops_md.name}\n",
    )
    render.render_terminal(final, console)


# -------------------------------------------------------------------------- summary


@dataclass(frozen=True)
class _StaleBuild:
    """build-check.json of a build the shader check stopped: its findings, one a line."""

    stale: tuple[str, ...]


def _build_lines(settings: Settings) -> list[str]:
    """The last build's shader check and toolchain, as build-check.json recorded them."""
    path = state.build_check(settings)
    if not path.is_file():
        return ["- build: shader check unknown (no build ran in this state directory)"]
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and "stale" in data:  # the check stopped that build
            stale = read(_StaleBuild, data, path.name).stale
            return [f"- build: stale shader: {line}" for line in stale]
        check = shaders.ShaderCheck.from_dict(data)
    except (ValueError, DocumentError) as exc:  # json.JSONDecodeError included
        return [f"- build: shader check unknown ({path.name} unreadable: {exc})"]
    return [f"- build: {check.describe()}", f"- build: {check.toolchain.describe()}"]


def _failures(files: state.OpFiles, drops: DropsRecord) -> list[junit.CaseResult]:
    """The failing tests of the latest run: the re-run after dropping xfails, if any."""
    report = drops.verified_junit or files.junit
    return [c for c in junit.parse_report(report).cases if c.outcome in junit.FAILING]


def _not_checked(files: state.OpFiles) -> list[str]:
    """The checks of the chain that could not run, each with why: never counted as passed
    (check_math's record says why it skipped: no functor, no torch)."""
    skipped = json.loads(files.math_json.read_text(encoding="utf-8")).get("skipped")
    return [f"check-math, because {skipped}"] if skipped else []


def _verdict(
    settings: Settings,
    op: str,
    items: Sequence[checklist.CheckItem],
    *,
    done: bool,
    not_checked: Sequence[str],
) -> list[str]:
    """The summary's last paragraph, which the run's ``verdict:`` line repeats. "Every
    checklist item passes" only when nothing was left unchecked: a skipped check (check-math
    without torch) is named, with why, never counted as passed."""
    unchecked = "; ".join(not_checked)
    if not done:
        return [
            *([f"Not checked: {unchecked}."] if not_checked else []),
            f"Next: fix the items above, then `doit migrate_op op={op}` again.",
        ]
    if not_checked:
        passed = f"{len(items)}/{len(items)} checklist items and the tests pass"
        head = f"{passed}; not checked: {unchecked}."
    else:
        head = "Every checklist item passes."
    return [
        head,
        # the tree's path: in the bundled sandbox the edits are in its working copy
        f"Next: review `git -C {settings.root} diff`, run `python test/test_mps.py -k "
        f"test_output_match_{op}` on a Mac, and open the PR with the `ciflow/mps` label.",
    ]


def summary(request: Request, console: Console) -> None:
    """What changed, what the checklist still lacks, the next command; summary.md.

    Fails (exit 1) when tests fail or checklist items are left: the chain is not done. A
    check that could not run (check-math without torch) fails nothing, but the verdict
    names it as not checked instead of saying that every item passes.
    """
    settings = request.settings
    index = load_index(settings.tree)
    record = index.record(request.op)
    files = state.op_files(settings, request.op)  # where the other stages wrote, as asked
    edits = EditRecord.read(files.edit)
    drops = DropsRecord.read(files.xfails)
    table = json.loads(files.table_json.read_text(encoding="utf-8"))
    counts = tables.DtypeTable.read(table, files.table_json.name, "").counts()
    # not passed: failed, or unknown (what it rests on could not be read)
    items = checklist.checklist(record)
    missing = [i for i in items if not i.ok]
    unknown = sum(i.status is checklist.Status.UNKNOWN for i in missing)
    failing = _failures(files, drops)
    lines = [f"# {record.op}: migrate_op summary", ""]
    lines += [f"- edited {e.file}: {e.summary}" for e in edits.edited] or [
        "- no source edits were needed"
    ]
    lines += [f"- manual: {m}" for m in edits.manual]
    lines.append("- tests: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if v))
    lines += _build_lines(settings)
    for x in drops.decisions:
        if x.action is not XfailAction.KEEP:
            lines.append(f"- xfail {x.list}[{x.key!r}]: {x.action} ({x.reason})")
    if drops.verified:
        lines.append(f"- re-run after dropping xfails: {drops.verified}")
    lines.append("")
    if files.math_md.is_file():  # check-math's (or check-kernel's) table, as the stage wrote it
        math_table = files.math_md.read_text(encoding="utf-8").strip()
        whole = "kernels" in json.loads(files.math_json.read_text(encoding="utf-8"))
        head = (
            "Whole kernels on the host (check-kernel)"
            if whole
            else "Functor math on the host (check-math)"
        )
        lines += [f"{head}:", "", math_table, ""]
    if failing:
        lines.append(f"Failing tests ({len(failing)}):")
        for case in failing[:FIRST_FAILURES]:
            message = case.message.strip().splitlines()[0] if case.message.strip() else ""
            lines.append(f"- {case.name} [{case.outcome.value}] {message[:200]}")
        if len(failing) > FIRST_FAILURES:
            lines.append(f"- … {len(failing) - FIRST_FAILURES} more in {files.table_md}")
        lines.append("")
    if index.warnings:  # what could not be read: the checks resting on it are unknown
        lines.append("Warnings:")
        lines += [f"- {w}" for w in index.warnings]
        lines.append("")
    if missing:
        lines.append("Still to do:")
        for item in missing:
            mark = "?" if item.status is checklist.Status.UNKNOWN else "✗"
            lines.append(f"- {mark} {item.title}")
            lines += [f"    - {x.text}" + (f" ({x.span})" if x.span else "") for x in item.details]
        lines.append("")
    lines += _verdict(settings, record.op, items, done=not (missing or failing),
                      not_checked=_not_checked(files))  # fmt: skip
    text = "\n".join(lines) + "\n"
    state.write_text(files.summary, text)
    show(text, console)
    if missing or failing:
        raise WorkLeftError(
            f"{record.op} is not done: {len(failing)} failing test(s), "
            f"{len(missing)} checklist item(s) left"
            + (f", {unknown} of them unknown" if unknown else "")
            + f" (see {files.summary})"
        )
