"""The state directory's layout: where each stage keeps what it wrote, and the digests that
decide whether a stage is up to date.

doit loads this on every run, so it imports nothing heavy at module level.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pipeline.config import Settings
from pipeline.tree import files, paths


def op_dir(settings: Settings, op: str) -> Path:
    """Where the stages of one operator keep their outputs."""
    return settings.state_dir / "ops" / op


def build_stamp(settings: Settings) -> Path:
    """Written by a successful build; what the test stage depends on."""
    return settings.state_dir / "build.json"


def build_log(settings: Settings) -> Path:
    """The whole output of the last build."""
    return settings.state_dir / "logs" / "build.log"


def write_json(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""


def build_inputs(settings: Settings) -> list[Path]:
    """The build inputs the pipeline knows of: a change to anything else never starts ninja."""
    return files(settings.root, paths.BUILD_PATTERNS)


def edit_inputs(settings: Settings) -> list[Path]:
    """The files the audit and edit stages read: the build inputs and the OpInfo table."""
    inputs = build_inputs(settings)
    if settings.opinfo_table is not None and settings.opinfo_table.is_file():
        inputs.append(settings.opinfo_table)
    return inputs


def inputs_digest(settings: Settings) -> str:
    """Content digest of what the audit reads (the edit inputs and common_mps.py): when it
    matches the recorded one, the recorded audit holds."""
    h = hashlib.sha256()
    for path in [*edit_inputs(settings), _common_mps(settings)]:
        h.update(f"{path}\0{_sha(path)}\n".encode())
    return h.hexdigest()


def _common_mps(settings: Settings) -> Path:
    return settings.root / paths.COMMON_MPS


def xfail_digest(settings: Settings, op: str) -> str:
    """Digest of the operator's xfail/skip entries: what decides its expected outcomes."""
    from pipeline.tree.index import load_index  # the slow path only

    record = load_index(settings).record(op, find_references=False)
    text = json.dumps([(e.list, e.function, e.key, e.dtypes) for e in record.xfails])
    return hashlib.sha256(text.encode()).hexdigest()


def record_expectations(settings: Settings, op: str) -> None:
    """Note which expectations the operator's last test results were produced under."""
    write_json(
        op_dir(settings, op) / "expectations.json",
        {"common_mps": _sha(_common_mps(settings)), "entries": xfail_digest(settings, op)},
    )


def expectations_current(settings: Settings, op: str) -> bool:
    """True when the operator's xfail entries are what its last results were run under.

    Tracked by the operator's own entries, not the file's hash, so dropping another
    operator's xfails does not re-run these tests; the file hash is only the fast path.
    """
    path = op_dir(settings, op) / "expectations.json"
    if not path.is_file():
        return False
    recorded = json.loads(path.read_text())
    if recorded["common_mps"] == _sha(_common_mps(settings)):
        return True
    return recorded["entries"] == xfail_digest(settings, op)
