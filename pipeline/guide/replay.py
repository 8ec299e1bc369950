"""A warm audit prints what the last one printed, without loading the index or rich.

The checklist is a function of the files :func:`pipeline.state.inputs_digest` hashes (the
contract the audit stage's up-to-date rule already rests on), of the code that judges and
renders it, and of the terminal it is drawn for. Each audit that renders saves what it
wrote, with those three keys, beside the operator's other outputs; the next one whose keys
all match writes the saved text again and imports none of the readers, the checklist or
rich (on this project's machine that was most of a warm ``doit audit``: 2.5-3x doit's own
start). Anything else (a file changed, another terminal width, a new mps-pipeline) renders
afresh and saves again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from pipeline import state
from pipeline.config import Settings

SCREEN = "audit.{kind}.screen.json"  # in the operator's state folder, one per kind of audit
# what rich reads to decide colors and width, besides whether the stream is a terminal
_TERMINAL_ENV = (
    "TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE",
    "COLUMNS", "LINES", "JUPYTER_COLUMNS", "JUPYTER_LINES",
)  # fmt: skip
_PACKAGE = Path(__file__).resolve().parent.parent
# the code the printed checklist comes from: the readers, the judging, the rendering
_CODE = ("tree/*.py", "guide/checklist.py", "guide/workflow.py", "report/guide.py", "dtypes.py")
_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def _code_key() -> str:
    h = hashlib.sha256()
    for pattern in _CODE:
        for path in sorted(_PACKAGE.glob(pattern)):
            stat = path.stat()
            h.update(f"{path.name}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _terminal_key() -> list[Any]:
    out = sys.stdout  # doit's own writer, in a doit action
    tty = bool(getattr(out, "isatty", lambda: False)())
    size = list(shutil.get_terminal_size()) if tty else None
    env = [os.environ.get(k) for k in _TERMINAL_ENV]
    return [type(out).__name__, tty, size, getattr(out, "encoding", None), env]


def _path(settings: Settings, op: str, kind: str) -> Path:
    return state.op_files(settings, op).dir / SCREEN.format(kind=kind)


def keys(settings: Settings, kind: str) -> dict[str, Any]:
    """What a saved output must have been made with to be written again: taken before an
    audit renders (what it reads may change while it does)."""
    return {
        "kind": kind,
        "inputs": state.inputs_digest(settings),
        "code": _code_key(),
        "terminal": _terminal_key(),
    }


def replay(settings: Settings, op: str, now: dict[str, Any]) -> dict[str, Any] | None:
    """Write the saved output of the last audit of ``op`` when it was made with the keys
    ``now`` (:func:`keys`), and return what was saved (``ok``: whether every item passed);
    else None."""
    if not _NAME.fullmatch(op):
        return None
    try:
        saved = json.loads(_path(settings, op, now["kind"]).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(saved, dict) or saved.get("keys") != now:
        return None
    sys.stderr.write(saved["stderr"])
    sys.stdout.write(saved["stdout"])
    sys.stdout.flush()
    return saved


def save(
    settings: Settings, op: str, made: dict[str, Any], stdout: str, stderr: str, ok: bool
) -> None:
    """Save what an audit of ``op`` made with the keys ``made`` wrote, for :func:`replay`."""
    if not _NAME.fullmatch(op):
        return
    doc = {"keys": made, "stdout": stdout, "stderr": stderr, "ok": ok}
    state.write_text(_path(settings, op, made["kind"]), json.dumps(doc, ensure_ascii=False) + "\n")
