"""Real runs of the tool on a demo checkout, as a user types them."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# the packaged runner list's names, each with the macOS release its name ends in
RUNNERS = {"macos-m1-14": "14.7", "macos-m2-15": "15.5", "macos-m2-26": "26.0"}
DEMO_OP = "atan2"


@dataclass(frozen=True)
class Shown:
    """A command as typed (``$ mps-pipeline ...``) and what it printed, stderr and stdout
    interleaved as a terminal shows them."""

    command: str
    output: str
    returncode: int

    def text(self) -> str:
        return f"$ {self.command}\n{self.output}"


def user_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment without this session's MPS_PIPELINE_* settings or pytest's variables:
    what a user's shell has. Rich draws without colour codes, for a terminal wide enough
    that no line wraps where a scratch folder's path would move the wrap."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MPS_PIPELINE_", "PYTEST_", "MPS_SIM_"))
    }
    return {**env, "COLUMNS": "400", "NO_COLOR": "1", "TERM": "dumb", **(extra or {})}


def mps_pipeline(
    args: Sequence[str],
    cwd: Path,
    *,
    python: str = sys.executable,
    check: bool = True,
    env: Mapping[str, str] | None = None,
) -> Shown:
    """``mps-pipeline ARGS`` (as ``python -m pipeline``) in ``cwd``, ``env`` added to a
    user's environment."""
    proc = subprocess.run(
        [python, "-m", "pipeline", *args],
        cwd=cwd,
        env=user_env(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
        check=False,
    )
    if check and proc.returncode not in (0, 1):
        command = " ".join(args)
        raise RuntimeError(f"mps-pipeline {command} exited {proc.returncode}:\n{proc.stdout}")
    return Shown("mps-pipeline " + " ".join(args), proc.stdout, proc.returncode)


def make_demo(
    work: Path, *, python: str = sys.executable, env: Mapping[str, str] | None = None
) -> tuple[Path, Shown]:
    """``mps-pipeline demo WORK/mps-demo``: the checkout and what the command said."""
    shown = mps_pipeline(["demo", "mps-demo"], work, python=python, env=env)
    return work / "mps-demo", shown


def first_hour(work: Path, *, python: str = sys.executable) -> list[Shown]:
    """The README's sample: make a demo, migrate atan2, then migrate it again (a no-op)."""
    demo, made = make_demo(work, python=python)
    return [
        made,
        mps_pipeline(["migrate", DEMO_OP], demo, python=python),
        mps_pipeline(["migrate", DEMO_OP], demo, python=python),
    ]


def demo_nightlies(
    work: Path,
    *,
    nights: int = 3,
    python: str = sys.executable,
    env: Mapping[str, str] | None = None,
) -> Path:
    """A demo checkout and ``nights`` real nightlies of it on every runner; the dashboard.

    atan2 is migrated first but its xfails kept (``--stage build``), as a PR that landed
    without dropping them: every runner xpasses the integer dtypes each night, so after 3
    nights the dashboard proposes removing that entry. ``env`` is added to the user's
    environment of every ``mps-pipeline`` command.
    """
    from pipeline.sandbox.demo import sweep

    demo, _ = make_demo(work, python=python, env=env)
    nightly_results = work / "nightly-results"
    mps_pipeline(["migrate", DEMO_OP, "--stage", "build"], demo, python=python, env=env)
    subprocess.run(
        ["git", "-c", "user.name=demo", "-c", "user.email=demo@localhost", "commit", "-qam",
         f"{DEMO_OP}: MPSGraph -> Metal kernel"],
        cwd=demo, check=True,
    )  # fmt: skip
    for night in range(1, nights + 1):
        results = nightly_results / f"night-{night}"
        for runner, macos in RUNNERS.items():
            sweep(demo, results / runner / "shard-1.xml", macos=macos)
        mps_pipeline(
            ["nightly", "--results", str(results), "--source", f"demo night {night}"],
            demo,
            python=python,
            env=env,
        )
    return demo / ".mps-pipeline" / "dashboard"
