"""What a migrate chain will need, checked before its first write (issue 19, item 2).

A chain that writes its edits and then finds no build directory, no interpreter with pytest
(or torch, in a real checkout), no common_mps.py or no declaration of the stub it registers
has changed the tree for nothing. :func:`check_chain` looks for all of them at once and
raises one :class:`~pipeline.errors.PipelineError` (exit 2) listing each missing piece and
what to do; nothing has been written when it does. Settings (a timeout > 0) are checked when
they are loaded (:func:`pipeline.config.load_settings`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from pipeline.config import Settings
from pipeline.errors import PipelineError
from pipeline.guide.plan import EditPlan
from pipeline.run.build import CONFIGURE_HINT
from pipeline.run.tests import PROBE_TIMEOUT, with_plugin
from pipeline.sections import Key
from pipeline.tree import paths
from pipeline.tree.index import OperatorRecord

__all__ = ["check_chain", "missing"]

# prints the modules of argv the interpreter cannot find, space-separated
_MODULES_PROBE = (
    "import importlib.util, sys; "
    "print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))"
)


def _build(settings: Settings) -> list[str]:
    command = settings.build_command
    if not command:
        return ["build_command is empty: set it (`mps-pipeline config` shows where it is set)"]
    exe = command[0]
    found = (
        (settings.root / exe).exists() or Path(exe).exists() if "/" in exe else shutil.which(exe)
    )
    problems = []
    if not found:
        hint = "pip install ninja" if exe == "ninja" else "install it or fix build_command"
        problems.append(f"the build command's {exe!r} is not found on PATH: {hint}")
    origin = settings.sources[Key.BUILD_COMMAND].origin if settings.sources else "default"
    ninja_file = settings.build_dir / "build.ninja"
    if origin == "default" and not ninja_file.is_file():
        problems.append(f"{ninja_file} not found: {CONFIGURE_HINT}, or set build_dir=")
    return problems


def _interpreter(settings: Settings) -> list[str]:
    # the sandbox's tests import the pipeline's simulated backend, a checkout's import torch
    wanted = ["pytest"] if settings.is_sandbox else ["pytest", "torch"]
    env = with_plugin(os.environ)
    try:
        probe = subprocess.run(
            [settings.python, "-c", _MODULES_PROBE, *wanted],
            cwd=settings.root,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
        )
    except FileNotFoundError:
        return [
            f"python={settings.python} not found: set python= (or MPS_PIPELINE_PYTHON) to the "
            "interpreter your checkout is installed into"
        ]
    except (OSError, subprocess.TimeoutExpired):
        return []  # cannot tell: the test stage's own log will say why
    absent = probe.stdout.split() if probe.returncode == 0 else []
    if absent:
        shown = shutil.which(settings.python) or settings.python
        return [
            f"python={shown} has no {' and no '.join(absent)}: pip install "
            f"{' '.join(absent)} into it (or set python= / MPS_PIPELINE_PYTHON to an "
            "interpreter that has it)"
        ]
    return []


def _tree(settings: Settings, record: OperatorRecord, plan: EditPlan) -> list[str]:
    problems = []
    common = settings.root / paths.COMMON_MPS
    if not common.is_file():
        problems.append(
            f"{paths.COMMON_MPS} not found: the tests read their expected failures from it; "
            "restore it (git checkout -- it)"
        )
    for _source, gap in record.gaps:
        # a file skipped as unreadable may hold what the edit must remove or must not double
        problems.append(f"{gap}: the edit cannot be checked against a file it cannot read")
    stub = record.stub
    registers = any(e.after.count(stub) > e.before.count(stub) for e in plan.edits)
    if registers and record.stub_decl is None:
        problems.append(
            f"no DECLARE_DISPATCH({stub}, ...) in {paths.NATIVE_HEADERS}: the build needs the "
            "header declaring the stub the edit registers; restore it"
        )
    return problems


def missing(settings: Settings, record: OperatorRecord, plan: EditPlan) -> list[str]:
    """Every piece the chain after the edit will need that is not there, one line each."""
    return [*_tree(settings, record, plan), *_build(settings), *_interpreter(settings)]


def check_chain(settings: Settings, record: OperatorRecord, plan: EditPlan) -> None:
    """Raise PipelineError (exit 2) naming every missing piece; nothing is written yet."""
    problems = missing(settings, record, plan)
    if problems:
        raise PipelineError(
            f"{record.op}: nothing was written, the chain would stop later: " + "; ".join(problems)
        )
