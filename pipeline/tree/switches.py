"""The environment switches a tree's host files read to force an operator back onto its
MPSGraph path (``c10::utils::has_env("PYTORCH_MPS_FORCE_MPSGRAPH_SOFTMAX")``).

Upstream keeps such an escape hatch for some migrated operators; it is read once per
process, so a same-build comparison runs each path in its own process. A switch names the
operator it forces by its suffix (``..._SOFTMAX``: ``softmax``, and ``log_softmax``, which
shares its kernels).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pipeline.tree import files, paths
from pipeline.tree.text import read_text

PREFIX = "PYTORCH_MPS_FORCE_MPSGRAPH_"
_SWITCH = re.compile(r'"(' + PREFIX + r'[A-Z0-9_]+)"')


@dataclass(frozen=True)
class GraphSwitch:
    """One switch: the variable and the host file that reads it (tree-relative)."""

    variable: str
    file: str

    def covers(self, op: str) -> bool:
        """Whether the switch forces ``op``: its suffix is the operator's name, or the
        operator's last ``_`` part(s) (``log_softmax`` under ``..._SOFTMAX``)."""
        name = self.variable.removeprefix(PREFIX).lower()
        return op == name or op.endswith(f"_{name}")


def graph_switches(root: Path) -> tuple[GraphSwitch, ...]:
    """Every switch the tree's ``operations/*.mm`` files name, in file order."""
    found: dict[str, GraphSwitch] = {}
    for path in files(root, (paths.OPERATIONS_MM,)):
        rel = path.relative_to(root).as_posix()
        for variable in _SWITCH.findall(read_text(path, rel)):
            found.setdefault(variable, GraphSwitch(variable, rel))
    return tuple(found.values())
