"""README command 2 on a fresh machine (issue 28): what only CI must have (Chromium, the
released wheels) is required where CI is set, and skips with a reason elsewhere."""

from __future__ import annotations

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
