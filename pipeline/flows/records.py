"""What the migrate chain's stages hand each other through the operator's state folder:
each file a frozen dataclass, written by one stage (:func:`pipeline.fields.dump`, or its
``to_json``) and read by the next with ``read`` (every key checked, none left over:
:func:`pipeline.fields.read`),
so a renamed field fails where the file is read, not as a missing key further in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pipeline.config import Settings
from pipeline.errors import DocumentError
from pipeline.fields import read
from pipeline.results.decide import XfailDecision
from pipeline.state import edit_digest, op_files


def _json(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise DocumentError(str(path), "the file", f"is not JSON ({exc})") from None


@dataclass(frozen=True)
class EditedFile:
    file: str  # tree-relative
    summary: str


@dataclass(frozen=True)
class OldNameRef:
    """A reference to a name the migration retired, left in the tree."""

    name: str
    file: str
    line: int


@dataclass(frozen=True)
class EditRecord:
    """``edit.json``: what the edit stage changed and what it leaves to a person."""

    inputs: str  # state.edit_digest of the tree, body and host_body the plan was made from
    edited: tuple[EditedFile, ...]
    manual: tuple[str, ...]
    old_name_refs: tuple[OldNameRef, ...]

    @classmethod
    def read(cls, path: Path) -> EditRecord:
        return read(cls, _json(path), str(path))


def edit_current(
    settings: Settings, op: str, body: str | None, host_body: str | None = None
) -> bool:
    """True when the operator's plan was last found empty for the tree exactly as it is.

    The plan is a pure function of the tree, ``body`` and ``host_body``, so this memo of
    "the plan is empty" is the rule itself; any change to the tree (a fold by hand, a
    half-done migration) re-plans, and so does a record that does not read back.
    """
    path = op_files(settings, op).edit
    if not path.is_file():
        return False
    try:
        recorded = EditRecord.read(path).inputs
    except DocumentError:
        return False
    return recorded == edit_digest(settings, body, host_body)


@dataclass(frozen=True)
class DropsRecord:
    """``xfails.json``: the drop_xfails stage's decisions, its diff of common_mps.py, and the
    re-run that verified the drops."""

    decisions: tuple[XfailDecision, ...]
    diff: str
    verified: str | None  # the re-run's summary; None: nothing was dropped and re-run
    verified_junit: str | None  # the re-run's report: what the tests say now
    tested: str  # digest of the operator's report the decisions were made over

    def to_json(self) -> dict[str, object]:
        return {
            "decisions": [d.to_dict() for d in self.decisions],
            "diff": self.diff,
            "verified": self.verified,
            "verified_junit": self.verified_junit,
            "tested": self.tested,
        }

    @classmethod
    def read(cls, path: Path) -> DropsRecord:
        return read(cls, _json(path), str(path))
