"""tree.git: a revision's commit, and where a PR branched off, in real git repositories."""

from __future__ import annotations

import pytest

from pipeline.errors import PipelineError
from pipeline.tree import git as git_checkout
from tests.conftest import commit, git


def test_default_base_is_the_merge_base_with_origin_main_or_main(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "trunk")
    (root / "f").write_text("1")
    first = commit(root, "one")
    with pytest.raises(PipelineError, match="neither origin/main nor main exists"):
        git_checkout.default_base(root)
    git(root, "branch", "main")
    git(root, "checkout", "-qb", "feature")
    (root / "f").write_text("2")
    commit(root, "feature work")
    git(root, "checkout", "-q", "main")
    (root / "g").write_text("main moved on")
    main_tip = commit(root, "main moves")
    git(root, "checkout", "-q", "feature")
    assert git_checkout.default_base(root) == first
    git(root, "update-ref", "refs/remotes/origin/main", main_tip)
    assert git_checkout.default_base(root) == first
    assert git_checkout.default_base(root, "main") == main_tip
    with pytest.raises(PipelineError, match="is not a commit"):
        git_checkout.resolve(root, "--output=/tmp/x")
