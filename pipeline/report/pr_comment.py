"""The PR status comment: Markdown assembled from plain inputs, safe to post, and short enough.

The failing tests lead, by how they compare with the nightly history of main
(:mod:`pipeline.results.baseline`): new failures first, then those already failing on main
and the flaky ones, each list capped at ``MAX_LISTED_FAILURES``.

Anything that comes from test output (operator names, reasons, error lines, test names inside
the rendered table) is defused: no raw HTML, no @-mentions or issue cross-references, no way
to close a code fence early. GitHub refuses comments over 65,536 characters, so the largest
tables lose whole rows first, then the diff loses whole hunks, each with a note saying so;
before that, every line from test output is cut to ``clip.MAX_LINE_CHARS``.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pipeline.report.clip import clip_lines
from pipeline.report.render import escape_markdown, neutralize_references
from pipeline.results.baseline import (
    ALREADY_FAILING,
    FLAKY,
    NEW,
    Baseline,
    Failure,
)
from pipeline.results.junit import DISPLAY_ORDER, FAILING

# The hidden first line of the PR-report comment: how the pipeline finds its comment again
# (github.GitHubClient.upsert_comment) instead of adding one per run.
MARKER = "<!-- mps-pipeline:pr-report -->"
GITHUB_COMMENT_LIMIT = 65_536
# Headroom under GitHub's limit for the marker, notes and any counting difference.
DEFAULT_BUDGET = 65_000
MAX_ERROR_CHARS = 500
MAX_REASON_CHARS = 200
# An operator name is an identifier; one longer than this is test output gone wrong.
MAX_OPERATOR_CHARS = 200
# Longer operator lists fold into <details> so the table stays near the top.
FOLD_OPERATORS_AFTER = 10
# Failing tests listed per class (new, already failing, flaky); results.json has them all.
MAX_LISTED_FAILURES = 20
# A test name is an identifier too; one longer than this is test output gone wrong.
MAX_TEST_CHARS = 200
# How the status description names the failures that are not the PR's.
CLASS_WORDS = {ALREADY_FAILING: "already failing on main", FLAKY: "flaky"}

OUTCOME_LABELS = (
    ("pass", "passed"),
    ("fail", "failed"),
    ("error", "errored"),
    ("xpass", "unexpectedly passed"),
    ("xfail", "xfailed"),
    ("skip", "skipped"),
)
_LABELS = dict(OUTCOME_LABELS)
_BAD_OUTCOMES = tuple(o.value for o in DISPLAY_ORDER if o in FAILING)

# Raw HTML starts here, but for the bare folding tags our own tables use (a Legend folded in
# <details><summary>): GitHub allows them, and without attributes they only fold text.
_TAG_START = re.compile(r"(?<!\\)<(?!/?(?:details|summary)>)(?=[A-Za-z/!?])")
_ENTITY_START = re.compile(r"&(?!(?:lt|gt|amp|quot);)(?=[A-Za-z#])")
_DELIMITER_ROW = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
_HUNK_HEADER = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
_CODE_SPAN = re.compile(r"(?<![\\`])(`+)(?!`)[^\n]*?(?<!`)\1(?!`)")
_FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def code_span(text: str) -> str:
    """``text`` as an inline code span, whatever backticks it contains (one line)."""
    text = " ".join(str(text).split())
    fence = "`" * (_longest_run(text, "`") + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def code_block(text: str, info: str = "") -> str:
    """``text`` as a fenced block whose fence is longer than any backtick run inside it."""
    fence = "`" * max(3, _longest_run(text, "`") + 1)
    return f"{fence}{info}\n{text.rstrip(chr(10))}\n{fence}"


def defuse(markdown: str) -> str:
    """Neutralise mentions, references and raw HTML in Markdown someone else rendered.

    Idempotent, and leaves Markdown structure (tables, escapes) and code spans alone, where
    GitHub neither links mentions nor interprets HTML, so it is safe on an escaped table.
    """
    out: list[str] = []
    start = 0
    for span in _CODE_SPAN.finditer(markdown):
        out += [_defuse_text(markdown[start : span.start()]), span.group(0)]
        start = span.end()
    out.append(_defuse_text(markdown[start:]))
    return "".join(out)


def _defuse_text(text: str) -> str:
    text = _ENTITY_START.sub("&amp;", text)
    text = _TAG_START.sub("&lt;", text)
    # the zero-width joiners escape_markdown puts in: one convention
    return neutralize_references(text)


def build_comment(
    *,
    marker: str,
    title: str,
    build_ok: bool,
    build_error: str | None = None,
    operators: Sequence[tuple[str, str]] = (),
    table: str = "",
    xfail_diff: str = "",
    counts: Mapping[str, int] | None = None,
    baseline: Baseline | None = None,
    footer: str = "",
    budget: int = DEFAULT_BUDGET,
    math: str = "",
    sections: Sequence[str] = (),
    kernels: str = "",
) -> str:
    """Assemble the PR comment.

    ``marker`` is the hidden ``<!-- mps-pipeline:... -->`` line that finds the comment
    again; ``build_error`` the first compiler error when ``build_ok`` is false;
    ``operators`` (op, why it was selected); ``table`` the per-dtype Markdown table(s);
    ``xfail_diff`` a unified diff of the xfail entries that can go; ``counts`` outcome -> n
    (pass fail error xfail xpass skip); ``baseline`` the failing tests classified against
    the nightly history, listed right after the head, new ones first; ``footer`` trusted
    Markdown (links to the run); ``math`` check-math's table
    (:func:`pipeline.report.math.render_markdown`), shown after the test tables, and
    ``kernels`` check-kernel's (:func:`pipeline.report.kernel.render_markdown`) after it;
    ``sections`` more Markdown sections after the failing tests (the review checks, kernel
    speed), defused. The result is at most ``budget`` characters.
    """
    if math.strip():
        table = f"{table.strip()}\n\n#### Functor math on the host\n\n{math.strip()}".strip()
    if kernels.strip():
        table = f"{table.strip()}\n\n#### Whole kernels on the host\n\n{kernels.strip()}".strip()
    # Long lines are cut before anything is escaped or defused: a cut that leaves a code
    # span open then cannot expose its text undefused.
    state = _State(
        tables=_split_tables(defuse(clip_lines(table))),
        diff=_split_diff(clip_lines(_unfence(xfail_diff))),
        operators=[
            (
                _shorten(" ".join(str(op).split()), MAX_OPERATOR_CHARS),
                _shorten(" ".join(str(reason).split()), MAX_REASON_CHARS),
            )
            for op, reason in operators
        ],
    )
    head = _head(marker, title, build_ok, build_error, counts or {})
    head += defuse(_baseline(baseline))
    head += "".join(f"\n{defuse(clip_lines(section)).strip()}\n" for section in sections)
    tail = f"\n---\n{defuse(footer.strip())}\n" if footer.strip() else ""

    def render() -> str:
        return head + _body(state) + tail

    body = render()
    for cut in (state.cut_table_row, state.cut_hunk, state.cut_operator):
        body = _shrink(body, budget, render, cut)
    if len(body) > budget:
        note = "\n\n_…comment truncated; full results in the workflow artifacts_\n"
        kept = body[: max(budget - len(note), 0)]
        # whole lines (the marker line first): a cut inside a line could leave a code span
        # open and turn what it held, never defused, into text GitHub links
        body = kept[: kept.rfind("\n") + 1] + note
    return body


def commit_status_for(
    counts: Mapping[str, int], build_ok: bool, classes: Mapping[str, int] | None = None
) -> tuple[str, str]:
    """The commit status ``(state, description)`` for a targeted run's outcome counts.

    Unexpected passes fail the status: with ``xfail_strict`` the suite fails until their
    xfail entries are removed, which the comment's diff does. ``classes`` (failing tests
    per class, :mod:`pipeline.results.baseline`; None without a nightly baseline): only new
    failures fail the status, and the description says how many others there are.
    """
    if not build_ok:
        return "failure", "MPS build failed; see the PR comment for the first error"
    if any(counts.get(key, 0) for key in _BAD_OUTCOMES):
        words = _count_words(counts, first=_BAD_OUTCOMES)
        if classes and sum(classes.values()):
            new = classes.get(NEW, 0)
            known = ", ".join(
                f"{classes[k]} {word}" for k, word in CLASS_WORDS.items() if classes.get(k)
            )
            if not new:
                return "success", _shorten(f"no new failures ({known}): {words}", 140)
            lead = f"{new} new failure{'' if new == 1 else 's'}" + (f" ({known})" if known else "")
            return "failure", _shorten(f"{lead}: {words}", 140)
        return "failure", _shorten(words, 140)
    if not sum(counts.values()):
        return "success", "no MPS consistency tests affected by this change"
    return "success", _shorten(_count_words(counts), 140)


# -- assembly ----------------------------------------------------------------------------


@dataclass
class _Table:
    before: list[str]  # non-table lines (headings, text) that precede it
    header: list[str]  # header row + delimiter row
    rows: list[str]
    total: int
    size: int = 0  # characters in the remaining rows, kept up to date by pop_row

    def __post_init__(self) -> None:
        self.size = sum(len(row) + 1 for row in self.rows)

    def pop_row(self) -> int:
        saved = len(self.rows.pop()) + 1
        self.size -= saved
        return saved

    def render(self) -> list[str]:
        lines = [*self.before, *self.header, *self.rows]
        if len(self.rows) < self.total:
            lines += [
                "",
                f"_…table truncated: {len(self.rows)} of {self.total} rows shown; "
                "full results in the workflow artifacts_",
            ]
        return lines


@dataclass
class _Tables:
    parts: list[_Table]
    trailing: list[str]  # lines after the last table


@dataclass
class _Diff:
    files: list[list[str]]  # per file: its header lines (diff/index/---/+++)
    hunks: list[tuple[int, list[str]]]  # (file index, hunk lines), in diff order
    total: int


@dataclass
class _State:
    """What is left of the cuttable content. Each cut_* removes one unit from the end and
    returns how many characters that saves (roughly), or None when nothing is left."""

    tables: _Tables
    diff: _Diff
    operators: list[tuple[str, str]]
    operators_total: int = 0
    _heap: list[tuple[int, int]] | None = None

    def __post_init__(self) -> None:
        self.operators_total = len(self.operators)

    def cut_table_row(self) -> int | None:
        # a max-heap on remaining size: the largest table always gives the next row
        if self._heap is None:
            self._heap = [(-t.size, i) for i, t in enumerate(self.tables.parts) if t.rows]
            heapq.heapify(self._heap)
        if not self._heap:
            return None
        _, index = heapq.heappop(self._heap)
        table = self.tables.parts[index]
        saved = table.pop_row()
        if table.rows:
            heapq.heappush(self._heap, (-table.size, index))
        return saved

    def cut_hunk(self) -> int | None:
        if not self.diff.hunks:
            return None
        return sum(len(line) + 1 for line in self.diff.hunks.pop()[1])

    def cut_operator(self) -> int | None:
        if not self.operators:
            return None
        op, reason = self.operators.pop()
        return len(op) + len(reason) + 8


def _shrink(
    body: str, budget: int, render: Callable[[], str], cut: Callable[[], int | None]
) -> str:
    """Cut units until ``render()`` fits ``budget``; notes added by a cut are re-measured."""
    while len(body) > budget:
        excess = len(body) - budget
        cut_any = False
        while excess > 0 and (saved := cut()) is not None:
            excess -= saved
            cut_any = True
        if not cut_any:
            return body
        body = render()
    return body


def _head(
    marker: str, title: str, build_ok: bool, build_error: str | None, counts: Mapping[str, int]
) -> str:
    lines = [marker, f"## {escape_markdown(title)}", ""]
    if build_ok:
        lines.append("**Build:** ✅ succeeded")
    else:
        error = (build_error or "").strip().splitlines()
        first = _shorten(" ".join(error[0].split()), MAX_ERROR_CHARS) if error else ""
        lines.append("**Build:** ❌ failed" + (f": {code_span(first)}" if first else ""))
    if counts:
        lines += ["", f"**Tests:** {escape_markdown(_count_words(counts, sep=' · '))}"]
    return "\n".join(lines) + "\n"


def _failure_items(failures: Sequence[Failure], reasons: bool = True) -> list[str]:
    items = [
        f"- {code_span(_shorten(f.test, MAX_TEST_CHARS))} ({_LABELS[f.outcome.value]})"
        + (f": {escape_markdown(_one_line(f.reason, MAX_REASON_CHARS))}" if reasons else "")
        for f in failures[:MAX_LISTED_FAILURES]
    ]
    if len(failures) > MAX_LISTED_FAILURES:
        items.append(
            f"- _…{len(failures) - MAX_LISTED_FAILURES} more in results.json (the workflow "
            "artifacts)_"
        )
    return items


def _baseline(baseline: Baseline | None) -> str:
    """The failing tests by class, new ones first; "" when nothing failed."""
    if baseline is None or not baseline.failures:
        return ""
    night = baseline.night
    out: list[str] = []
    note = _one_line(baseline.note, MAX_REASON_CHARS)
    note = escape_markdown(note[:1].upper() + note[1:])
    if night is None:
        out += ["", f"_{note or 'No nightly baseline'}. Every failing test counts as new._"]
    elif note:
        out += ["", f"_{note}._"]
    new, old, flaky = (baseline.of(k) for k in (NEW, ALREADY_FAILING, FLAKY))
    if new:
        items = _failure_items(new, reasons=night is not None)
        out += ["", f"### ❌ New failures ({len(new)})", "", *items]
    else:
        out += ["", "**No new failures:** each failing test below fails on main too or is flaky."]
    if night is not None and (old or flaky):
        where = f"the nightly of {escape_markdown(night.date)}"
        if night.commit:
            where += f", commit {code_span(night.commit[:12])}"
        runners = escape_markdown(", ".join(night.runners))
        if old:
            out += [
                "",
                f"### Already failing on main ({len(old)})",
                "",
                f"These fail on main too, in {where} ({runners}): not caused by this PR; "
                "they do not fail the commit status.",
                "",
                *_failure_items(old),
            ]
        if flaky:
            out += [
                "",
                f"### Flaky ({len(flaky)})",
                "",
                f"Their outcome on main changes from night to night (the last "
                f"{baseline.window} nightlies, up to {where}); they do not fail the commit "
                "status.",
                "",
                *_failure_items(flaky),
            ]
    return "\n".join(out) + "\n" if out else ""


def _body(state: _State) -> str:
    out: list[str] = []
    if state.operators_total:
        out += ["", f"### Operators selected ({state.operators_total})", ""]
        items = [
            f"- {code_span(op)}" + (f": {escape_markdown(reason)}" if reason else "")
            for op, reason in state.operators
        ]
        if len(state.operators) < state.operators_total:
            items.append(
                f"- _…{state.operators_total - len(state.operators)} more in the workflow "
                "artifacts_"
            )
        if state.operators_total > FOLD_OPERATORS_AFTER:
            items = ["<details><summary>show</summary>", "", *items, "", "</details>"]
        out += items
    if state.tables.parts or state.tables.trailing:
        out += ["", "### Results per dtype", ""]
        for part in state.tables.parts:
            out += part.render()
        out += state.tables.trailing
    diff = state.diff
    if diff.total:
        out += ["", "### Expected failures that can go", ""]
        if diff.hunks:
            lines: list[str] = []
            shown: set[int] = set()
            for index, hunk in diff.hunks:
                if index not in shown:
                    shown.add(index)
                    lines += diff.files[index]
                lines += hunk
            out.append(code_block("\n".join(lines), "diff"))
        if len(diff.hunks) < diff.total:
            out += [
                "",
                f"_…diff truncated: {len(diff.hunks)} of {diff.total} hunks shown; "
                "full diff in the workflow artifacts_",
            ]
    return "\n".join(out) + "\n" if out else ""


def _split_tables(markdown: str) -> _Tables:
    """Cut rendered Markdown into tables (header kept apart from rows) and other lines."""
    lines = markdown.strip("\n").splitlines() if markdown.strip() else []
    parts: list[_Table] = []
    pending: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        is_header = (
            line.lstrip().startswith("|")
            and i + 1 < len(lines)
            and _DELIMITER_ROW.match(lines[i + 1])
            and "-" in lines[i + 1]
        )
        if not is_header:
            # a fence opened here would swallow the rest of the comment: show it literally
            pending.append(_FENCE_LINE.sub(r"\\\1", line) if _FENCE_LINE.match(line) else line)
            i += 1
            continue
        j = i + 2
        while j < len(lines) and lines[j].lstrip().startswith("|"):
            j += 1
        rows = lines[i + 2 : j]
        parts.append(_Table(pending, lines[i : i + 2], rows, len(rows)))
        pending = []
        i = j
    return _Tables(parts, pending)


def _split_diff(diff: str) -> _Diff:
    """A unified diff as file headers and hunks. Hunk line counts are honoured, so a removed
    line that happens to start with "-- " is not mistaken for a new file header."""
    lines = diff.strip("\n").splitlines() if diff.strip() else []
    files: list[list[str]] = []
    hunks: list[tuple[int, list[str]]] = []
    i = 0
    while i < len(lines):
        match = _HUNK_HEADER.match(lines[i])
        if not match:
            # a header line; a new file starts unless we are still in this file's header
            if not files or (hunks and hunks[-1][0] == len(files) - 1):
                files.append([])
            files[-1].append(lines[i])
            i += 1
            continue
        if not files:
            files.append([])
        old = int(match.group(1)) if match.group(1) is not None else 1
        new = int(match.group(2)) if match.group(2) is not None else 1
        hunk = [lines[i]]
        i += 1
        while i < len(lines) and _is_hunk_line(lines[i], old, new):
            line = lines[i]
            if line.startswith("-"):
                old -= 1
            elif line.startswith("+"):
                new -= 1
            elif not line.startswith("\\"):
                old, new = old - 1, new - 1
            hunk.append(line)
            i += 1
        hunks.append((len(files) - 1, hunk))
    if lines and not hunks:
        # not a unified diff: show it whole or not at all
        return _Diff([[]], [(0, lines)], 1)
    return _Diff(files, hunks, len(hunks))


def _is_hunk_line(line: str, old: int, new: int) -> bool:
    if line.startswith("\\"):  # "\ No newline at end of file" belongs to the hunk before
        return True
    # Lines still owed by the hunk header; an empty line is context with its space stripped.
    return (old > 0 or new > 0) and (line == "" or line[0] in " -+")


def _unfence(diff: str) -> str:
    lines = diff.strip("\n").splitlines()
    if len(lines) >= 2 and _FENCE_LINE.match(lines[0]) and _FENCE_LINE.match(lines[-1]):
        return "\n".join(lines[1:-1])
    return diff


def _count_words(counts: Mapping[str, int], sep: str = ", ", first: Sequence[str] = ()) -> str:
    labels = dict(OUTCOME_LABELS)
    order = [*first, *(k for k, _ in OUTCOME_LABELS if k not in first)]
    order += sorted(k for k in counts if k not in labels)
    return sep.join(f"{counts[key]} {labels.get(key, key)}" for key in order if counts.get(key, 0))


def _one_line(text: str, limit: int) -> str:
    return _shorten(" ".join(str(text).split()), limit)


def _longest_run(text: str, char: str) -> int:
    runs = re.findall(f"{re.escape(char)}+", text)
    return max((len(run) for run in runs), default=0)


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
