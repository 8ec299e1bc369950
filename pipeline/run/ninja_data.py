"""What ninja itself knows about a build directory: its log, its graph and its deps log.

Read through ninja's own tools (``-t query``, ``-t deps``, ``-t inputs``, ``-t commands``) and
its ``.ninja_log``, never by parsing ``build.ninja``: the graph a generator wrote (CMake, the
sandbox) is only what ninja says it is. Paths are ninja's node names (relative to the build
directory, or absolute, as the generator wrote them); :meth:`NinjaData.node_path` resolves
one to a file.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.errors import BuildError
from pipeline.state import NINJA_LOG

_LOG_HEADER = "# ninja log v"
# ninja >= 1.10 records nanosecond mtimes; earlier logs (v4) are not read
_LOG_VERSIONS = frozenset({5, 6, 7})
_QUERY_TIMEOUT = 120.0


@dataclass(frozen=True)
class LogEntry:
    """One line of ``.ninja_log``: a command ninja ran for ``output``, and the output's mtime
    (nanoseconds) when it finished."""

    output: str
    start_ms: int
    end_ms: int
    mtime_ns: int
    command_hash: str

    @classmethod
    def parse(cls, line: str) -> LogEntry | None:
        fields = line.rstrip("\n").split("\t")
        if len(fields) != 5:
            return None
        start, end, mtime, output, command_hash = fields
        try:
            return cls(output, int(start), int(end), int(mtime), command_hash)
        except ValueError:
            return None


def read_log(build_dir: Path) -> dict[str, LogEntry]:
    """The latest entry per output of ``build_dir/.ninja_log`` (later lines win, as in ninja);
    empty when there is no log, or one of a version this reader does not know."""
    try:
        text = (build_dir / NINJA_LOG).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    lines = text.splitlines()
    if not lines or not lines[0].startswith(_LOG_HEADER):
        return {}
    version = lines[0].removeprefix(_LOG_HEADER).strip()
    if not version.isdigit() or int(version) not in _LOG_VERSIONS:
        return {}
    entries: dict[str, LogEntry] = {}
    for line in lines[1:]:
        if (entry := LogEntry.parse(line)) is not None:
            entries[entry.output] = entry
    return entries


@dataclass(frozen=True)
class Node:
    """A node as ``ninja -t query`` shows it: the rule of the edge that builds it (None for a
    source), that edge's explicit, implicit (``|``) and order-only (``||``) inputs, and the
    nodes whose edges take it as an input (of any kind)."""

    name: str
    rule: str | None
    explicit: tuple[str, ...]
    implicit: tuple[str, ...]
    order_only: tuple[str, ...]
    consumers: tuple[str, ...]

    def rebuilds_on(self, name: str) -> bool:
        """Whether a change to ``name`` makes ninja rebuild this node (an order-only input
        only orders the build; it never makes the node dirty)."""
        return name in self.explicit or name in self.implicit


def parse_query(text: str) -> dict[str, Node]:
    """``ninja -t query`` output: one block per node, ``input: RULE`` then indented inputs
    (``| x`` implicit, ``|| x`` order-only), ``outputs:`` then indented consumers."""
    nodes: dict[str, Node] = {}
    name: str | None = None
    rule: str | None = None
    section = ""
    explicit: list[str] = []
    implicit: list[str] = []
    order_only: list[str] = []
    consumers: list[str] = []

    def close() -> None:
        if name is not None:
            nodes[name] = Node(
                name,
                rule,
                tuple(explicit),
                tuple(implicit),
                tuple(order_only),
                tuple(consumers),
            )

    for raw in text.splitlines():
        if raw and not raw.startswith(" "):
            close()
            name, rule, section = raw.rstrip().removesuffix(":"), None, ""
            explicit, implicit, order_only, consumers = [], [], [], []
            continue
        line = raw.strip()
        if line.startswith("input:"):
            section, rule = "input", line.removeprefix("input:").strip()
        elif line == "outputs:":
            section = "outputs"
        elif line in ("validations:", "") or section == "":
            section = "" if line == "validations:" else section
        elif section == "outputs":
            consumers.append(line)
        elif line.startswith("|| "):
            order_only.append(line[3:])
        elif line.startswith("| "):
            implicit.append(line[2:])
        else:
            explicit.append(line)
    close()
    return nodes


def parse_deps(text: str) -> dict[str, tuple[str, ...]]:
    """``ninja -t deps`` output: per target, the dependencies its depfile recorded (the
    headers a compile read). Stale records (``STALE``) are kept: ninja still uses them."""
    deps: dict[str, list[str]] = {}
    current: list[str] | None = None
    for raw in text.splitlines():
        if not raw.strip():
            current = None
        elif not raw.startswith(" ") and ": #deps " in raw:
            current = deps.setdefault(raw.split(": #deps ", 1)[0], [])
        elif current is not None:
            current.append(raw.strip())
    return {target: tuple(found) for target, found in deps.items()}


@dataclass(frozen=True)
class NinjaData:
    """Runs ninja's tools in ``build_dir`` with the ``ninja`` executable. Nodes once queried
    are kept: each ninja run loads the whole manifest (seconds on PyTorch's), and the graph
    does not change while nothing builds."""

    ninja: str
    build_dir: Path
    _nodes: dict[str, Node] = field(default_factory=dict, compare=False, repr=False)

    def _tool(self, *args: str) -> str:
        command = [self.ninja, "-C", str(self.build_dir), "-t", *args]
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=_QUERY_TIMEOUT, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise BuildError(f"could not read the build graph ({' '.join(args)}): {exc}") from None
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip().splitlines()
            raise BuildError(
                f"`ninja -t {' '.join(args[:2])}` failed in {self.build_dir}: "
                f"{said[-1] if said else f'exit {done.returncode}'}"
            )
        return done.stdout

    def query(self, names: Iterable[str]) -> dict[str, Node]:
        """The nodes ``names`` (all must be known to ninja), in at most one ninja run."""
        asked = set(names)
        if wanted := sorted(asked - self._nodes.keys()):
            self._nodes.update(parse_query(self._tool("query", *wanted)))
        return {name: self._nodes[name] for name in asked}

    def inputs(self, target: str) -> tuple[str, ...]:
        """Every node ``target`` transitively reads through ``build.ninja``'s edges (not the
        deps log), order-only ones included."""
        return tuple(line for line in self._tool("inputs", target).splitlines() if line)

    def deps(self) -> dict[str, tuple[str, ...]]:
        """The whole deps log (what each compile's depfile said it read)."""
        return parse_deps(self._tool("deps"))

    def command(self, name: str) -> str:
        """The command line of the edge building ``name`` (that step only)."""
        return self._tool("commands", "-s", name).strip()

    def node_path(self, name: str) -> Path:
        """The file a node name stands for."""
        path = Path(name)
        return (path if path.is_absolute() else self.build_dir / path).resolve()
