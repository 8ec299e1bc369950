"""A demo checkout: the bundled sandbox as a PyTorch checkout of your own, in a folder you name.

The working copy that commands make outside any checkout (``sandbox/`` in the user's state
folder, :func:`pipeline.fsio.sandbox_state_dir`) is the tool's private scratch tree; a demo
is the user's. It is complete the way a real checkout is: a git work tree with everything
committed, a build directory whose ``build.ninja`` builds ``torch_cpu``, and a
``.mps-pipeline.yaml`` naming its static OpInfo table, so every command works from inside it
with no flag or environment variable (and without torch).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import ConfigError
from pipeline.sandbox import BUILD_DIR, OPINFO_TABLE, TEST_ENV, _git, materialize

CONFIG_FILE = ".mps-pipeline.yaml"
CONFIG_TEXT = (
    "# mps-pipeline settings for this demo checkout (see `mps-pipeline config`).\n"
    "# The demo is not PyTorch: its OpInfos come from a static table, not from torch's op_db.\n"
    f"opinfo_table: {OPINFO_TABLE}\n"
)
DEMO_OP = "atan2"


@dataclass(frozen=True)
class Demo:
    """A made demo checkout."""

    root: Path
    build_ninja: Path
    opinfo_table: Path
    config: Path


def make_demo(dest: Path) -> Demo:
    """Create the demo checkout at ``dest`` (a new folder, or an empty one).

    Assembled beside ``dest`` and renamed into place: a failed or interrupted run leaves no
    half-made checkout. Raises ConfigError (exit 2) when ``dest`` holds anything.
    """
    dest = Path(os.path.abspath(os.path.expanduser(dest)))
    if dest.exists() and not dest.is_dir():
        raise ConfigError(f"{dest} is a file; name a new folder for the demo checkout")
    if dest.is_dir() and any(dest.iterdir()):
        raise ConfigError(
            f"{dest} is not empty; name a new (or empty) folder for the demo checkout"
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}-demo-", dir=dest.parent))
    try:
        work = materialize(staging / "tree")
        (work / CONFIG_FILE).write_text(CONFIG_TEXT, encoding="utf-8")
        _git(work, "add", CONFIG_FILE)
        _git(work, "commit", "-q", "-m", "mps-pipeline demo: settings (the static OpInfo table)")
        if dest.is_dir():
            dest.rmdir()  # empty, checked above
        os.rename(work, dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return Demo(
        root=dest,
        build_ninja=dest / BUILD_DIR / "build.ninja",
        opinfo_table=dest / OPINFO_TABLE,
        config=dest / CONFIG_FILE,
    )


def sweep(root: Path, report: Path, *, macos: str | None = None, timeout: float = 600) -> int:
    """Run the demo's whole consistency suite once, its JUnit written to ``report``: what a
    nightly runner's shard produces (``results/<runner>/shard-1.xml``). Builds ``torch_cpu``
    first. Returns pytest's exit status (1 = some tests failed: data, not an error)."""
    from pipeline.sandbox import backend

    subprocess.run(
        [sys.executable, "-m", "ninja", "-C", str(root / BUILD_DIR), "torch_cpu"],
        check=True,
        capture_output=True,
        timeout=timeout,
    )
    report = Path(os.path.abspath(report))  # pytest runs in root
    report.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **TEST_ENV}
    if macos is not None:
        env[backend.MACOS_ENV] = macos
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "test/test_mps.py", f"--junitxml={report}"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode not in (0, 1) or not report.is_file():
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or ["no output"]
        raise ConfigError(f"the demo's test run failed (exit {proc.returncode}): {tail[0]}")
    return proc.returncode
