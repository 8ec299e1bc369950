"""README command 2 on a fresh machine (issue 28): what only CI must have (Chromium, the
released wheels) is required where CI is set, and skips with a reason elsewhere."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("env", "in_ci"),
    [
        ({}, False),
        ({"CI": "true"}, True),
        ({"CI": "false"}, False),
        ({"MPS_PIPELINE_CI": "1"}, True),
    ],
)
def test_the_test_session_is_strict_only_under_ci(env: dict[str, str], in_ci: bool) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "import noxfile; print(noxfile.IN_CI)"],
        cwd=REPO, env={"PATH": "/usr/bin:/bin", **env}, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert proc.stdout.strip() == str(in_ci)


def test_ci_run_sets_ci_before_the_readme_commands() -> None:
    script = (REPO / ".ci" / "run").read_text()
    assert script.index("export CI=true") < script.index(".venv/bin/nox -s tests")


def _docstrings() -> dict[str, str]:
    """Each nox session's docstring, read from noxfile.py (nox's listing shows its first line)."""
    tree = ast.parse((REPO / "noxfile.py").read_text(encoding="utf-8"))
    return {
        node.name: ast.get_docstring(node) or ""
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and any("session" in ast.unparse(d) for d in node.decorator_list)
    }


def test_the_fast_tiers_time_is_the_recorded_one_with_its_conditions() -> None:
    # `nox -l` once said "under a minute"; a new user under load saw 3 min 11 s (issue 28)
    first = _docstrings()["fast"].splitlines()[0]
    performance = " ".join((REPO / "docs" / "performance.md").read_text().split())
    recorded = re.findall(r"`nox -s fast` ([\d.]+) s", performance)[-1]  # the latest record
    assert re.search(rf"\b{re.escape(recorded)} s on 2 cores\b", first), first
    assert "under load" in first and "(docs/performance.md)" in first
    assert "3 min 11 s" in performance


def test_no_session_promises_a_time_without_saying_where_it_was_measured() -> None:
    for name, doc in _docstrings().items():
        first = doc.splitlines()[0] if doc else ""
        assert "under a minute" not in first.lower(), name
        if re.search(r"\d+ (s|min)\b", first):
            assert "cores" in first and "docs/performance.md" in first, name
