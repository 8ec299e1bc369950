"""Running the real doit command line on a private state dir, as a user does, and reading
which tasks it ran: shared by the end-to-end tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def doit(
    state: Path, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``doit -f <repo>/dodo.py ARGS state_dir=STATE``, run from ``cwd`` (STATE's parent)."""
    cwd = cwd or state.parent
    cmd = [sys.executable, "-m", "doit", "-f", str(REPO / "dodo.py"), "-d", str(cwd)]
    return subprocess.run(
        [*cmd, *args, f"state_dir={state}"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def executed(output: str) -> set[str]:
    """Tasks doit ran ('.  edit:atan2'), as opposed to found up to date ('-- edit:atan2')."""
    return {line[3:] for line in output.splitlines() if line.startswith(".  ")}


def stages_run(output: str) -> set[str]:
    """The stages among :func:`executed` tasks, without their operator ('edit')."""
    return {name.split(":")[0] for name in executed(output)}
