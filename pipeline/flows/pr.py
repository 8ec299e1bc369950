"""A PR's affected operators, built and tested, in one PR comment (`pr-report --pr N`).

The diff ``base..head`` is mapped to operators (``pipeline.impact``); ``ninja torch_cpu``
runs only when a build input changed; one pytest run covers the selected operators' tests
(the whole consistency suite for a full sweep); the JUnit report becomes the per-dtype table
and the xfail entries that can go, as a diff that is shown and never applied. The results
land in ``<state_dir>/results/pr-<N>/`` (``results.json``, ``comment.md``); the comment is
created or updated in place (one per PR: the comment of ``github.bot_login`` that carries
``MARKER``), and the commit status ``github.status_context`` is set on the PR head that was
tested (``--status-sha``; without it, on the PR's head as GitHub has it when posting).

ci/workflows/mps-pr.yml splits this in two so that the write token never reaches the
self-hosted Mac: ``--results-only`` there (no token), then ``--post-from DIR`` in a
GitHub-hosted job, which reads the uploaded folder as untrusted data. ``--dry-run`` prints
the comment instead of posting it.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from rich.console import Console
from rich.text import Text

from pipeline import state, testid
from pipeline.config import Settings
from pipeline.errors import BuildError, PipelineError
from pipeline.flows import stages
from pipeline.flows.inductor import run_inductor_tests
from pipeline.github import PR_PERMISSIONS, GitHubClient, token_from_env
from pipeline.guide.xfails import plan_decoration_changes, plan_xfail_changes
from pipeline.impact import affected, selected_opinfos
from pipeline.report.clip import LogCap, clip_line
from pipeline.report.console import terminal
from pipeline.report.impact import render_text
from pipeline.report.pr import PrResults, first_line
from pipeline.report.pr_comment import MARKER
from pipeline.results import baseline as baselines
from pipeline.results import junit
from pipeline.results import table as tables
from pipeline.results.decide import XfailDecision
from pipeline.results.inductor import InductorRun
from pipeline.results.pr import (
    RESULTS_JSON,
    read_results_json,
    results_folder,
)
from pipeline.run import shaders
from pipeline.run.device import probe
from pipeline.tree import common_mps, decorations, opinfo
from pipeline.tree.git import default_base, resolve
from pipeline.tree.opinfo import OpInfoRecord

COMMENT_MD = "comment.md"
_STATUS_SHA = re.compile(r"[0-9a-fA-F]{40}")
_RUN_SERVER = re.compile(r"https://[A-Za-z0-9.-]+(?::\d+)?")
_RUN_REPO = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")


# ------------------------------------------------------------------------ collecting


def _build_error(settings: Settings, exc: BuildError) -> str:
    """The build's first compiler error (path relative to the tree), else the first line of
    the build's own message (no build.ninja, ninja missing...)."""
    found = exc.first_error
    if found is None:
        return first_line(str(exc)) or "the build failed"
    path = Path(found.path)
    if path.is_absolute() and path.is_relative_to(settings.root):
        found = replace(found, path=path.relative_to(settings.root).as_posix())
    return str(found)


class _Say:
    """Prints what the build and the tests said, capped (``pipeline.report.clip``): each
    line, and all of it together, so that one huge error line cannot flood the CI log."""

    def __init__(self, console: Console) -> None:
        self._console = console
        self._cap = LogCap()

    def __call__(self, text: str, label: str = "", style: str = "") -> None:
        shown = self._cap(text)
        if shown is None:
            return
        line = Text()
        if label:
            line.append(label, style=style)
            line.append(" ")
        line.append(shown)
        # no wrapping: a line of the log is a line of the message, capped
        self._console.print(line, highlight=False, soft_wrap=True)


@dataclass(frozen=True)
class Runners:
    """What runs the PR's build and tests: the migrate chain's runners, unless a caller (a
    test) passes its own."""

    build: Callable[[Settings, Console], object]
    tests: Callable[[Settings, tuple[str, ...], str], tuple[Path, str]]
    inductor: Callable[[Settings, tuple[str, ...], str], InductorRun] = run_inductor_tests

    @classmethod
    def default(cls) -> Runners:
        return cls(stages.run_build, stages.run_consistency_tests, run_inductor_tests)


def _build(
    settings: Settings, run: Runners, console: Console, say: _Say, result: PrResults
) -> PrResults:
    """``result`` with the build's outcome: failed (with its first error), or done with the
    shader check it recorded. ``say``: the run's capped output, shared with the tests'."""
    check = state.build_check(settings)
    check.unlink(missing_ok=True)  # what this build's check says, or nothing
    try:
        run.build(settings, console)
    except BuildError as exc:
        say(str(exc), "build failed:", "red")
        return replace(result, build_ok=False, build_error=_build_error(settings, exc))
    if check.is_file():
        recorded = json.loads(check.read_text(encoding="utf-8"))
        result = replace(result, build_check=shaders.ShaderCheck.from_dict(recorded))
    return result


def collect(
    settings: Settings,
    pr: int,
    console: Console,
    *,
    base: str | None = None,
    head: str | None = None,
    runners: Runners | None = None,
) -> PrResults:
    """Analyse the diff, build if a build input changed, run the selected tests, decide xfails.

    A failed build or a test run without results is recorded in the result (the comment
    says so), not raised. Tests always run in the work tree, so ``head`` should be what is
    checked out (or None).
    """
    run = runners or Runners.default()
    say = _Say(console)
    root = settings.root
    base_sha = resolve(root, base) if base else default_base(root, head)
    head_sha = resolve(root, head) if head else None
    kinds = settings.test_kinds
    opinfos = opinfo.load_opinfos(settings.tree)
    impact = affected(
        root, base_sha, head_sha, opinfos=opinfos, kinds=kinds, test_file=settings.test_file
    )
    say(render_text(impact))  # operator names come from the PR's code
    chosen = selected_opinfos(impact, opinfos, kinds)
    result = PrResults(
        pr=pr,
        base=base_sha,
        head=head_sha,
        impact=impact,
        build_needed=impact.build_needed,
        build_ok=True,
        build_error=None,
        test_error=None,
        selectors=(),
        run=None,
        table=None,
        xfail_decisions=(),
        xfail_diff="",
    )
    if impact.build_needed:
        result = _build(settings, run, console, say, result)
        if not result.build_ok:
            return result
    if impact.inductor_tests:
        inductor = run.inductor(settings, impact.inductor_tests, f"pr-{pr}-inductor")
        console.print(f"Inductor tests: {_inductor_line(inductor)}", markup=False, highlight=False)
        result = replace(result, inductor=inductor)
    if not chosen:
        return result
    return _run_selected(settings, run, console, say, result, chosen)


def _run_selected(
    settings: Settings,
    run: Runners,
    console: Console,
    say: _Say,
    result: PrResults,
    chosen: Sequence[OpInfoRecord],
) -> PrResults:
    """Run the chosen OpInfos' tests and decide their xfails; a run without results is
    recorded in the result, not raised."""
    kinds = settings.test_kinds
    if result.impact.full_sweep:
        selectors = tuple(testid.kind_selector(k) for k in kinds)
    else:
        selectors = stages.selectors(chosen, kinds)
    result = replace(result, selectors=selectors)
    try:
        junit_path, summary = run.tests(settings, selectors, f"pr-{result.pr}")
    except PipelineError as exc:
        say(str(exc), "tests:", "red")
        return replace(result, test_error=str(exc))
    console.print(f"tests: {summary}", markup=False, highlight=False)
    if sys.platform == "darwin":  # the device the tests ran on; elsewhere there is none
        result = replace(result, device=probe(settings.python))
    report = junit.parse_report(junit_path)
    for warning in report.warnings:
        say(warning, "warning:", "yellow")
    table = tables.build_table(report.cases, names=tables.display_names(chosen))
    decisions, diff = _xfail_changes(settings, chosen, table)
    return replace(
        result,
        run=junit_path.parent.relative_to(settings.results_dir).as_posix(),
        table=table,
        xfail_decisions=decisions,
        xfail_diff=diff,
    )


def _xfail_changes(
    settings: Settings, chosen: Sequence[OpInfoRecord], table: tables.DtypeTable
) -> tuple[tuple[XfailDecision, ...], str]:
    """The xfail decisions for the chosen OpInfos, in common_mps.py and, for their
    DecorateInfos, outside it (issue 31), and the diff that makes them."""
    root = settings.root
    entries = common_mps.read(root).entries
    decisions, edit = plan_xfail_changes(settings, entries, chosen, table)
    keys = {info.key for info in chosen}
    reaching = [d for d in decorations.read(root).entries if d.key in keys or d.refers_to in keys]
    outside, edits = plan_decoration_changes(settings, reaching, chosen, table)
    diffs = [e.diff() for e in (*([edit] if edit is not None else []), *edits)]
    return (*decisions, *outside), "".join(diffs)


def _inductor_line(run: InductorRun) -> str:
    if run.error is not None:
        return run.error
    counts = ", ".join(f"{k} {n}" for k, n in run.counts.items()) or "no test collected"
    return counts + (f"; not in the tree: {', '.join(run.missing)}" if run.missing else "")


def write_results(results: PrResults, folder: Path) -> Path:
    """Write ``results.json`` and ``comment.md`` (the body without a run link) to ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    text = json.dumps(results.to_json(), indent=2, ensure_ascii=False) + "\n"
    (folder / RESULTS_JSON).write_text(text, encoding="utf-8")
    (folder / COMMENT_MD).write_text(results.comment(), encoding="utf-8")
    return folder


def load_results(folder: Path, pr: int) -> PrResults:
    """PR ``pr``'s results from ``folder`` (or from ``folder/pr-<N>/``: a whole results dir)."""
    return PrResults.from_json(read_results_json(folder, pr), pr)


# ------------------------------------------------------------------------- posting


def run_url(env: Mapping[str, str] = os.environ) -> str | None:
    """The GitHub Actions run this process belongs to (for the footer and the status link)."""
    server = env.get("GITHUB_SERVER_URL", "")
    repo = env.get("GITHUB_REPOSITORY", "")
    run_id = env.get("GITHUB_RUN_ID", "")
    if _RUN_SERVER.fullmatch(server) and _RUN_REPO.fullmatch(repo) and run_id.isdigit():
        return f"{server}/{repo}/actions/runs/{run_id}"
    return None


def _status_commit(text: str) -> str:
    """``text`` (``--status-sha``) as a full commit id, lower case."""
    if not _STATUS_SHA.fullmatch(text):
        raise PipelineError(
            f"--status-sha {text!r}: pass the full 40-hex commit id of the tested PR head "
            "(in a workflow: github.event.pull_request.head.sha)"
        )
    return text.lower()


def post(
    settings: Settings,
    results: PrResults,
    token: str,
    url: str | None,
    sha: str | None = None,
) -> str:
    """Create or update the PR's one comment and set the commit status on ``sha``; a line
    saying so.

    ``sha`` is the PR head that was tested. Without it (a local run) the status goes to the
    PR's head as GitHub has it now, which is another commit if someone pushed meanwhile.
    """
    github = settings.github
    client = GitHubClient(github.api_url, github.repo, token, token_env=github.token_env)
    body = results.comment(footer=f"[workflow run]({url})" if url else "")
    comment_id, outcome = client.upsert_comment(results.pr, body, MARKER, author=github.bot_login)
    if sha is None:
        sha = client.pull_head_sha(results.pr)
    state, description = results.status()
    client.set_status(sha, state, description, github.status_context, target_url=url)
    return (
        f"PR #{results.pr}: comment {outcome} (id {comment_id}); "
        f"{github.status_context} {state} on {sha[:12]}: {description}"
    )


def report(
    settings: Settings,
    pr: int,
    *,
    base: str | None = None,
    head: str | None = None,
    dry_run: bool = False,
    results_only: bool = False,
    post_from: Path | None = None,
    status_sha: str | None = None,
    history_path: str | Path | None = None,
    runner: str | None = None,
    annotate: Callable[[PrResults, bool], PrResults] | None = None,
    runners: Runners | None = None,
) -> int:
    """The whole command: collect (or load ``post_from``), classify the failing tests
    against the nightly history, write the results, then print the comment (``dry_run``),
    stop (``results_only``) or post it with the commit status (on ``status_sha``, else on
    the PR's current head).

    The history is ``history_path`` (which must exist), else the state directory's when
    there is one (:func:`pipeline.results.baseline.history_file`); ``runner`` the PR run's
    configuration (default ``$RUNNER_CONFIG``). With ``post_from``, the failing tests are
    classified again only when a history is found here; else the classes the results-only
    job wrote stand (and ``runner`` defaults to the one it recorded); ``runners`` build and
    test (default :meth:`Runners.default`). ``annotate(results,
    loaded)`` adds what the layers above compute (the review checks, kernel speed) to the
    collected results before they are written, or (``loaded``) to those read back.
    """
    if pr < 1:
        raise PipelineError(f"--pr {pr}: a pull request number is a positive integer")
    if post_from is not None and (base or head):
        raise PipelineError("--base/--head do not go with --post-from: the results record them")
    if status_sha is not None and results_only:
        raise PipelineError("--status-sha does not go with --results-only: nothing is posted")
    sha = None if status_sha is None else _status_commit(status_sha)
    console = terminal(stderr=True)  # stdout carries the comment body alone (--dry-run)
    posting = not (dry_run or results_only)
    # Missing credentials and a missing or broken history fail now, not after hours of
    # building and testing.
    needs = (
        f"pr-report posts the comment and the commit status with a token that has "
        f"{PR_PERMISSIONS}; --dry-run prints the comment without one"
    )
    token = token_from_env(settings.github.token_env, needs) if posting else None
    db = baselines.history_at(settings, history_path)
    if db is not None:
        baselines.refuse_unusable_history(db)
    window = settings.nightly.flaky_window
    if post_from is not None:
        results = load_results(post_from, pr)
        if db is not None:  # classified again here; else as the results-only job did
            runner = runner or results.judged.runner
            judged = baselines.classify(db, results.table, runner=runner, window=window)
            results = replace(results, baseline=judged)
        if annotate is not None:
            results = annotate(results, True)
    else:
        runner = runner or os.environ.get(baselines.RUNNER_ENV) or None
        results = collect(settings, pr, console, base=base, head=head, runners=runners)
        judged = baselines.classify(db, results.table, runner=runner, window=window)
        results = replace(results, baseline=judged)
        if annotate is not None:
            results = annotate(results, False)
        folder = write_results(results, results_folder(settings, pr))
        console.print(f"results: {folder}", markup=False, highlight=False)
    console.print(clip_line(baseline_line(results.judged)), markup=False, highlight=False)
    url = run_url()
    if dry_run:
        sys.stdout.write(results.comment(footer=f"[workflow run]({url})" if url else ""))
        return 0
    if token is None:
        state, description = results.status()
        line = clip_line(f"status to post: {state}: {description}")
        console.print(line, markup=False, highlight=False)
        return 0
    print(clip_line(post(settings, results, token, url, sha)))
    return 0


def baseline_line(baseline: baselines.Baseline) -> str:
    """What the failing tests were compared with, for the log."""
    night = baseline.night
    if night is None:
        return f"baseline: {baseline.note or baselines.NO_BASELINE}"
    counts = baseline.counts
    classes = ", ".join(f"{counts[k]} {k.replace('_', ' ')}" for k in baselines.CLASSES)
    commit = f", commit {night.commit[:12]}" if night.commit else ""
    line = f"baseline: the nightly of {night.date} ({', '.join(night.runners)}{commit}): {classes}"
    return line + (f"; {baseline.note}" if baseline.note else "")


def pr_number(text: str) -> int:
    """``text`` (a doit variable) as a PR number."""
    try:
        return int(text)
    except ValueError:
        raise PipelineError(f"pr={text!r}: a pull request number is an integer") from None
