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
