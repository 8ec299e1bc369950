"""The git checkout a PyTorch tree lives in: its HEAD, a revision's commit, a PR's base.

Every question is one ``git -C root ...`` call that never raises on git's own refusal:
``git`` returns None then, and the callers say what to do about it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from pipeline.errors import PipelineError

# Where a PR branches off, tried in this order when no base is given.
BASE_BRANCHES = ("origin/main", "main")


def git(root: Path, *args: str) -> str | None:
    """``git args`` in ``root``: its stripped output, or None when git says no."""
    proc = subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=False
    )
    return proc.stdout.strip() if proc.returncode == 0 else None


def head_commit(root: Path) -> str:
    """The commit checked out at ``root``; "" when it is not a git checkout."""
    return git(root, "rev-parse", "HEAD") or ""


def resolve(root: Path, rev: str) -> str:
    """The commit id ``rev`` names in the checkout at ``root``."""
    # --end-of-options: a revision such as "--output=x" is a name, never an option
    sha = git(root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
    if not sha:
        raise PipelineError(f"{rev!r} is not a commit in {root}: check the revision (git log)")
    return sha


def default_base(root: Path, head: str | None = None) -> str:
    """Where ``head`` (default HEAD) branched off: its merge base with origin/main, else main."""
    tip = head or "HEAD"
    for branch in BASE_BRANCHES:
        if git(root, "rev-parse", "--verify", "--quiet", f"{branch}^{{commit}}") is None:
            continue
        base = git(root, "merge-base", "--end-of-options", tip, branch)
        if not base:
            raise PipelineError(f"{tip} and {branch} share no history: pass --base REV")
        return base
    raise PipelineError(
        f"neither {' nor '.join(BASE_BRANCHES)} exists in {root}: pass --base REV "
        "(the commit the PR is based on)"
    )


def has_commit(root: Path, sha: str) -> bool:
    """Whether the checkout at ``root`` holds commit ``sha`` (``git cat-file -e``)."""
    return bool(sha) and git(root, "cat-file", "-e", "--end-of-options", f"{sha}^{{commit}}") == ""


def is_ancestor(root: Path, older: str, newer: str) -> bool:
    """Whether ``older`` is ``newer`` or one of its ancestors."""
    return git(root, "merge-base", "--is-ancestor", "--end-of-options", older, newer) == ""


def range_count(root: Path, before: str, after: str) -> int | None:
    """How many commits ``git rev-list before..after`` lists; None when git says no."""
    out = git(root, "rev-list", "--count", "--end-of-options", f"{before}..{after}")
    return int(out) if out is not None and out.isdigit() else None


def range_log(
    root: Path, before: str, after: str, limit: int
) -> tuple[tuple[str, tuple[str, ...], str], ...] | None:
    """The newest ``limit`` commits of ``before..after``, newest first (topological order):
    each ``(sha, parents, title)``; None when git says no."""
    out = git(
        root,
        "log",
        "--topo-order",
        f"--max-count={limit}",
        "--format=%H%x1f%P%x1f%s",
        "--end-of-options",
        f"{before}..{after}",
        "--",
    )
    if out is None:
        return None
    commits = []
    for line in out.splitlines():
        sha, parents, title = (line.split("\x1f", 2) + ["", ""])[:3]
        commits.append((sha, tuple(parents.split()), title))
    return tuple(commits)
