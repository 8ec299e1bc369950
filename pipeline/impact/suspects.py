"""The suspects of a regression: the commits between two nights that can affect its operator.

A regression is a test that worked in a runner's previous nightly and fails tonight; each
night recorded the PyTorch commit it tested. Every commit of ``git rev-list before..after``
(the newest :data:`MAX_COMMITS`) is analysed as ``affected(root, sha^, sha)`` would, and
the commits whose impact reaches the regressed test's OpInfo are its suspects, ranked by
what they changed (:data:`KINDS`, then newest first):

1. ``own``: the operator's own code or entry: its functor, kernel, stub, registration,
   dispatch row, structured kernel, xfail or OpInfo entry;
2. ``shared``: a header, macro or helper it shares with other operators;
3. ``sweep``: a change that may affect every test (test_mps.py, shared MPS infrastructure).

A :class:`CommitAnalysis` analyses each commit once, however many regressions share it
(within one nightly). Cost per commit: two ``git diff`` calls and one ``git cat-file
--batch``; the tree's MPS sources are read and parsed once per range (at the parent of its
oldest commit), and each commit's sources are its parent's with only the files it changed
re-parsed. A commit that changes no file an impact rule reads is not analysed further.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from pipeline.errors import PipelineError
from pipeline.impact.analyze import OWN, SHARED, Impact, analyze, classify
from pipeline.impact.changes import changed_files
from pipeline.impact.view import TreeView, load_view
from pipeline.tree import git, paths
from pipeline.tree.opinfo import OpInfoRecord

SWEEP = "sweep"
KINDS = (OWN, SHARED, SWEEP)  # the ranking, first first
MAX_COMMITS = 200  # per range; the newest are analysed


class SuspectJson(TypedDict):
    commit: str
    title: str
    kind: str
    reasons: list[str]


@dataclass(frozen=True)
class Suspect:
    """A commit that can affect the operator, why (``kind``: one of :data:`KINDS`)."""

    commit: str
    title: str
    kind: str
    reasons: tuple[str, ...]

    def to_dict(self) -> SuspectJson:
        return {
            "commit": self.commit,
            "title": self.title,
            "kind": self.kind,
            "reasons": list(self.reasons),
        }

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind is {self.kind!r}, not one of {', '.join(KINDS)}")


@dataclass(frozen=True)
class Suspects:
    """The ranked suspects of one regression, and what limits them (``""``: nothing)."""

    suspects: tuple[Suspect, ...]
    note: str


@dataclass(frozen=True)
class _Range:
    commits: tuple[tuple[str, str], ...]  # (sha, title), newest first
    notes: tuple[str, ...]
    total: int


def _short(sha: str) -> str:
    return sha[:12]


class CommitAnalysis:
    """The impact of each commit of the checkout at ``root``, each analysed at most once."""

    def __init__(
        self,
        root: Path,
        opinfos: Sequence[OpInfoRecord],
        kinds: Sequence[str] = ("output_match",),
        *,
        limit: int = MAX_COMMITS,
        test_file: str = paths.TEST_MPS,
    ) -> None:
        self.root, self.opinfos, self.kinds, self.limit = root, tuple(opinfos), kinds, limit
        self.test_file = test_file
        self._ranges: dict[tuple[str, str], _Range] = {}
        # sha -> its impact (None: it changed nothing a rule reads), or why it could not be
        self._impacts: dict[str, Impact | None | str] = {}
        self._view: tuple[str, TreeView] | None = None  # the last commit's sources
        self.analysed = 0  # commits analysed (git diff + rules): the measure of the cost

    # -- ranges and commits ---------------------------------------------------------------

    def _range(self, before: str, after: str) -> _Range | str:
        """The commits of ``before..after`` (newest first), or why there are none to list."""
        if not before or not after:
            which = "last night's run" if not before else "tonight's run"
            return f"the PyTorch commit of {which} is not recorded: suspects need both"
        if before == after:
            return "same PyTorch commit as last night: not a code change (flaky or environment)"
        if not git.head_commit(self.root):
            return f"{self.root} is not a git checkout: suspects need the PyTorch history"
        lacking = [sha for sha in (before, after) if not git.has_commit(self.root, sha)]
        if lacking:
            them = "it" if len(lacking) == 1 else "them"
            return f"the checkout lacks {' and '.join(lacking)}: fetch {them} to name suspects"
        key = (before, after)
        if key not in self._ranges:
            self._ranges[key] = self._list(before, after)
        return self._ranges[key]

    def _list(self, before: str, after: str) -> _Range:
        total = git.range_count(self.root, before, after) or 0
        listed = git.range_log(self.root, before, after, self.limit)
        log = listed or ()
        notes = [] if listed is not None else [f"git log {_short(before)}..{_short(after)} failed"]
        if not git.is_ancestor(self.root, before, after):
            notes.append(
                f"{_short(after)} does not descend from {_short(before)}: the commits are "
                f"those of {_short(after)} that {_short(before)} lacks"
            )
        if total > len(log):
            notes.append(f"{total} commits in range: only the newest {len(log)} were analysed")
        # oldest first, so each commit's sources derive from its parent's
        for sha, parents, _title in reversed(log):
            self._impact(sha, parents[0] if parents else None)
        for sha, _parents, _title in log:
            why = self._impacts[sha]
            if isinstance(why, str):
                notes.append(f"could not analyse {_short(sha)}: {why}")
        return _Range(tuple((sha, title) for sha, _, title in log), tuple(notes), total)

    def _impact(self, sha: str, parent: str | None) -> Impact | None | str:
        if sha in self._impacts:
            return self._impacts[sha]
        if parent is None:
            self._impacts[sha] = "a root commit, with no parent to compare with"
            return self._impacts[sha]
        try:
            changes = changed_files(self.root, parent, sha)
            if self._view is not None and self._view[0] == parent:
                view = self._view[1]
            else:
                view = load_view(self.root, parent)
            view = view.with_texts({c.path: c.new_text for c in changes})
            self._view = (sha, view)
            self.analysed += 1
            if all(classify(c.path, self.test_file) == "ignored" for c in changes):
                result: Impact | None | str = None
            else:
                result = analyze(
                    changes,
                    opinfos=self.opinfos,
                    view=view,
                    kinds=self.kinds,
                    test_file=self.test_file,
                )
        except PipelineError as exc:
            result = str(exc)
        self._impacts[sha] = result
        return result

    # -- suspects -------------------------------------------------------------------------

    def suspects(self, before: str, after: str, stem: str | None) -> Suspects:
        """The commits of ``before..after`` that can affect the tests of OpInfo ``stem``
        (None: not a consistency test, so only the commits that may affect every test)."""
        found = self._range(before, after)
        if isinstance(found, str):
            return Suspects((), found)
        infos = [i for i in self.opinfos if i.stem == stem] if stem else []
        ranked = []
        for position, (sha, title) in enumerate(found.commits):
            impact = self._impacts.get(sha)
            if not isinstance(impact, Impact):
                continue
            reach = _reach(impact, stem, infos)
            if reach is not None:
                kind, reasons = reach
                ranked.append((KINDS.index(kind), position, Suspect(sha, title, kind, reasons)))
        suspects = tuple(s for _, _, s in sorted(ranked, key=lambda t: t[:2]))
        notes = list(found.notes)
        if stem is None:
            notes.append("not a consistency test: only commits that may affect every test count")
        if not suspects:
            analysed = len(found.commits)
            span = f"{_short(before)}..{_short(after)}"
            if analysed == 0:
                notes.append(f"no commit in {span}")
            else:
                plural = "commit" if analysed == 1 else f"{analysed} commits"
                notes.append(f"none of the {plural} in {span} can affect {stem or 'this test'}")
        return Suspects(suspects, "; ".join(notes))


def _reach(
    impact: Impact, stem: str | None, infos: Sequence[OpInfoRecord]
) -> tuple[str, tuple[str, ...]] | None:
    """(kind, reasons) when ``impact`` reaches the OpInfo ``stem`` (``infos``: its records;
    none known: an operator named ``stem``), else None."""
    own: list[str] = []
    shared: list[str] = []
    if stem is not None:
        for op in impact.operators:
            if not (any(op.matches(i) for i in infos) if infos else op.operator == stem):
                continue
            kinds = op.kinds or (OWN,) * len(op.reasons)
            for reason, kind in zip(op.reasons, kinds, strict=True):
                (own if kind == OWN else shared).append(reason)
    sweep = list(impact.full_sweep_reasons) if impact.full_sweep else []
    reasons = tuple(dict.fromkeys([*own, *shared, *sweep]))
    if own:
        return OWN, reasons
    if shared:
        return SHARED, reasons
    if sweep:
        return SWEEP, reasons
    return None
