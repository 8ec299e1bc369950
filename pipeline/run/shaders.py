"""Did the build really use the edited shader? The check after ``ninja torch_cpu``.

pytorch#196202: with only the Command Line Tools, CMake embeds each ``.metal`` file's source
in a generated ``*_metallib.h``, and the step that writes it did not depend on the
``c10/metal`` headers the shader includes. Editing a header rebuilt nothing, and the tests
ran the old shader: a false green.

A *shader artifact* is what ninja builds straight from a ``.metal`` file (the ``.air`` or the
generated header). Its *sources* are that file and the in-tree headers it includes. For every
artifact one of whose sources is newer than the artifact was at the previous build, this
build must have (from ninja's own data, never from names we guess):

1. an edge from the source to the artifact (its explicit or implicit inputs, or its deps
   log entry) — else ninja cannot know the artifact is stale;
2. rerun the artifact's step (its ``.ninja_log`` entry changed);
3. relinked the library ``torch_cpu`` stands for, through a chain of edges that make each
   step dirty (an order-only edge does not), every step of which ran.

Any miss raises :class:`~pipeline.errors.StaleShaderError` (exit 1), naming the file, the
artifact and how to force the rebuild.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TypeVar

from pipeline.errors import (
    BuildError,
    DocumentError,
    StaleShaderError,
    StaleShaderFinding,
    StaleShaderReason,
)
from pipeline.fields import dump, read
from pipeline.run.ninja_data import LogEntry, NinjaData, Node, read_log
from pipeline.tree import files, paths
from pipeline.tree.includes import shader_sources

# How many edges above an artifact the library may be (.air → .metallib → link: 2).
_MAX_DEPTH = 8
_METAL_STD = re.compile(r"-std=(metal[\w.]+)")
_METAL_COMPILE = re.compile(r"\bmetal\s+(?:\S+\s+)*?-c\b")
XCODE_SELECT = ("xcode-select", "-p")
COMMAND_LINE_TOOLS = "/Library/Developer/CommandLineTools"
# the target the build stage builds (README: `ninja -C build torch_cpu`)
TORCH_CPU = "torch_cpu"


BUILD_CHECK = "build-check.json"
T = TypeVar("T")


def _read(kind: type[T], data: object) -> T:
    """A build-check.json record (:func:`pipeline.fields.read`); ValueError, as its readers
    expect, for a field that is missing, of another type or unknown."""
    try:
        return read(kind, data, BUILD_CHECK)
    except DocumentError as exc:
        raise ValueError(f"not a shader check record: {exc.where} {exc.problem}") from None


class CheckStatus(Enum):
    """What the shader check could say about this build."""

    FRESH = "fresh"  # every changed shader source reached the library in this build
    NO_CHANGE = "no change"  # no shader source is newer than its artifact
    FIRST_BUILD = "first build"  # no earlier ninja log: every artifact was built anew
    NO_SHADERS = "no shaders"  # ninja builds nothing from a .metal file for the target
    # not checked: no ninja build directory (another build command), or ninja could not say
    UNKNOWN = "unknown"

    @classmethod
    def parse(cls, text: object) -> CheckStatus:
        """The status whose value is ``text``; ValueError for anything else."""
        return cls(text)


class ToolchainKind(Enum):
    XCODE = "Xcode"
    COMMAND_LINE_TOOLS = "Command Line Tools"
    UNKNOWN = "unknown"


class ShaderForm(Enum):
    """How the build ships its shaders: compiled ahead, or as source the Metal framework
    compiles at run time (the Command Line Tools have no Metal compiler)."""

    METALLIB = "compiled metallib"
    EMBEDDED = "embedded source, compiled at run time"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Toolchain:
    """The toolchain a build used: Xcode or the Command Line Tools (``xcode-select -p``), and
    the Metal language version the shader step asked for (``-std=metal3.1``)."""

    kind: ToolchainKind
    developer_dir: str | None
    shader_form: ShaderForm
    metal_std: str  # "metal3.1", or "unknown" when no step names one

    @classmethod
    def read(cls, developer_dir: str | None, shader_command: str | None) -> Toolchain:
        """From ``xcode-select -p``'s output (None: not run, not a Mac) and the command of a
        shader step as ninja reports it."""
        directory = developer_dir.strip() if developer_dir and developer_dir.strip() else None
        if directory is None:
            kind = ToolchainKind.UNKNOWN
        elif directory.rstrip("/") == COMMAND_LINE_TOOLS:
            kind = ToolchainKind.COMMAND_LINE_TOOLS
        else:
            kind = ToolchainKind.XCODE
        form, std = ShaderForm.UNKNOWN, "unknown"
        if shader_command:
            compiled = _METAL_COMPILE.search(shader_command)
            form = ShaderForm.METALLIB if compiled else ShaderForm.EMBEDDED
            if found := _METAL_STD.search(shader_command):
                std = found[1]
            elif not compiled:
                std = "chosen at run time"
        return cls(kind, directory, form, std)

    def describe(self) -> str:
        where = f" ({self.developer_dir})" if self.developer_dir else ""
        return (
            f"toolchain {self.kind.value}{where}; shaders: {self.shader_form.value}, "
            f"Metal language {self.metal_std}"
        )


def developer_dir() -> str | None:
    """``xcode-select -p``'s answer, or None where there is no such command (not a Mac)."""
    try:
        done = subprocess.run(
            list(XCODE_SELECT), capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


@dataclass(frozen=True)
class Artifact:
    """A shader artifact: a node ninja builds from ``metal``, and the tree files it reads."""

    node: Node
    metal: Path
    sources: tuple[Path, ...]


@dataclass(frozen=True)
class ShaderCheck:
    """The check's verdict on one build."""

    status: CheckStatus
    artifacts: tuple[str, ...]  # every shader artifact ninja builds for the target
    checked: tuple[tuple[str, str], ...]  # (changed source, artifact) pairs found fresh
    library: str | None
    toolchain: Toolchain
    seconds: float
    note: str = ""  # why the check could not run (UNKNOWN)

    def describe(self) -> str:
        if self.status is CheckStatus.FRESH:
            return (
                f"shaders fresh: {len(self.checked)} changed source/artifact pair(s) rebuilt "
                f"and {self.library} relinked ({self.seconds:.2f}s)"
            )
        if self.status is CheckStatus.UNKNOWN:
            return f"shaders: not checked ({self.note})"
        return f"shaders: {self.status.value} ({len(self.artifacts)} artifact(s))"

    @classmethod
    def from_dict(cls, data: object) -> ShaderCheck:
        """The inverse of :meth:`to_dict` (build-check.json); ValueError on anything else."""
        found = _read(_Written, data)
        return cls(
            found.status,
            found.artifacts,
            tuple((c.source, c.artifact) for c in found.checked),
            found.library,
            found.toolchain,
            found.seconds,
            found.note,
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "status": self.status.value,
            "artifacts": list(self.artifacts),
            "checked": [{"source": s, "artifact": a} for s, a in self.checked],
            "library": self.library,
            "toolchain": dump(self.toolchain),
            "seconds": round(self.seconds, 3),
            "note": self.note,
        }


@dataclass(frozen=True)
class _Checked:
    source: str
    artifact: str


@dataclass(frozen=True)
class _Written:
    """:meth:`ShaderCheck.to_dict` as written: its pairs as objects (its toolchain is
    :class:`Toolchain` as it is)."""

    status: CheckStatus
    artifacts: tuple[str, ...]
    checked: tuple[_Checked, ...]
    library: str | None
    toolchain: Toolchain
    seconds: float
    note: str


def check(
    root: Path,
    data: NinjaData,
    before: Mapping[str, LogEntry],
    target: str,
    *,
    xcode_dir: str | None = None,
) -> ShaderCheck:
    """Check the build that just ran (``before``: the ninja log read before it)."""
    start = time.monotonic()
    after = read_log(data.build_dir)
    metal = metal_nodes(root, data, target)
    data.query([target, *metal])  # one ninja run for what the next two steps read
    library = _library(data, target)
    artifacts = find_artifacts(root, data, metal, library)
    shader_command = data.command(artifacts[0].node.name) if artifacts else None
    toolchain = Toolchain.read(xcode_dir, shader_command)

    def verdict(
        status: CheckStatus, checked: Sequence[tuple[str, str]] = (), library: str | None = None
    ) -> ShaderCheck:
        names = tuple(a.node.name for a in artifacts)
        return ShaderCheck(
            status, names, tuple(checked), library, toolchain, time.monotonic() - start
        )

    if not artifacts:
        return verdict(CheckStatus.NO_SHADERS)
    if not before:
        return verdict(CheckStatus.FIRST_BUILD)
    changed = [(s, a) for a in artifacts for s in a.sources if _newer(s, before.get(a.node.name))]
    if not changed:
        return verdict(CheckStatus.NO_CHANGE)
    deps = data.deps()
    context = _Context(data, target)
    findings: list[StaleShaderFinding] = []
    for source, artifact in changed:
        rel, name = _rel(source, root), artifact.node.name
        if source != artifact.metal and not _reads(data, artifact.node, deps, source):
            findings.append(context.finding(StaleShaderReason.NO_EDGE, rel, name))
        elif after.get(name) == before.get(name):
            findings.append(context.finding(StaleShaderReason.NOT_REBUILT, rel, name))
    for artifact in dict.fromkeys(a for _, a in changed):
        findings += _link_findings(context, artifact, library, deps, (before, after), root)
    if findings:
        raise StaleShaderError(tuple(findings))
    pairs = [(_rel(s, root), a.node.name) for s, a in changed]
    return verdict(CheckStatus.FRESH, pairs, library)


def metal_nodes(root: Path, data: NinjaData, target: str) -> dict[str, Path]:
    """Node name -> tree file of every ``.metal`` file among ``target``'s inputs."""
    metal_files = {p.resolve() for p in files(root, (paths.KERNELS_METAL,))}
    return {
        name: path for name in data.inputs(target) if (path := data.node_path(name)) in metal_files
    }


def find_artifacts(
    root: Path, data: NinjaData, metal: Mapping[str, Path], library: str
) -> tuple[Artifact, ...]:
    """The nodes whose edges ninja reruns when a tree ``.metal`` file changes: the direct
    consumers of each node of ``metal``, except ``library`` itself (a link that also reads
    the shader is checked as the link)."""
    if not metal:
        return ()
    sources = data.query(metal)
    consumers = data.query(c for node in sources.values() for c in node.consumers)
    found: list[Artifact] = []
    for name, path in metal.items():
        for consumer in sources[name].consumers:
            if consumer != library and consumers[consumer].rebuilds_on(name):
                found.append(Artifact(consumers[consumer], path, shader_sources(root, path)))
    return tuple(found)


def _newer(source: Path, entry: LogEntry | None) -> bool:
    """Whether ``source`` changed after the artifact's last build (None: never built by this
    log, so built anew now: nothing can be stale)."""
    return entry is not None and source.stat().st_mtime_ns > entry.mtime_ns


def _reads(data: NinjaData, node: Node, deps: Mapping[str, tuple[str, ...]], source: Path) -> bool:
    names = (*node.explicit, *node.implicit, *deps.get(node.name, ()))
    return any(data.node_path(name) == source for name in names)


def _library(data: NinjaData, target: str) -> str:
    """The file ``target`` stands for: itself, or the input of its phony edge."""
    node = data.query([target])[target]
    if node.rule == "phony" and len(node.explicit) == 1:
        return node.explicit[0]
    return target


def _link_findings(
    context: _Context,
    artifact: Artifact,
    library: str,
    deps: Mapping[str, tuple[str, ...]],
    logs: tuple[Mapping[str, LogEntry], Mapping[str, LogEntry]],
    root: Path,
) -> list[StaleShaderFinding]:
    """The steps from ``artifact`` up to ``library`` that did not run (or no such chain)."""
    before, after = logs
    name, source = artifact.node.name, _rel(artifact.metal, root)
    chain = _chain(context.data, name, library, deps)
    if chain is None:
        return [context.finding(StaleShaderReason.NOT_LINKED, source, name, library)]
    return [
        context.finding(StaleShaderReason.NOT_RELINKED, source, name, step)
        for step in chain
        if after.get(step) == before.get(step)
    ]


def _chain(
    data: NinjaData, start: str, library: str, deps: Mapping[str, tuple[str, ...]]
) -> list[str] | None:
    """The non-phony nodes on a path of rebuild edges from ``start`` to ``library``
    (``start`` excluded, ``library`` included); None when there is no such path."""
    readers: dict[str, list[str]] = {}
    for target, inputs in deps.items():
        for name in inputs:
            readers.setdefault(name, []).append(target)
    parent: dict[str, str] = {}
    phony: set[str] = set()
    frontier = [start]
    for _ in range(_MAX_DEPTH):
        nodes = data.query(frontier)
        above = {c for name in frontier for c in (*nodes[name].consumers, *readers.get(name, ()))}
        above -= parent.keys() | {start}
        consumers = data.query(above)
        frontier = []
        for name in sorted(above):
            via = next(
                (n for n in nodes if consumers[name].rebuilds_on(n) or n in deps.get(name, ())),
                None,
            )
            if via is None:
                continue  # only an order-only edge: a change never reaches it
            parent[name] = via
            if consumers[name].rule == "phony":
                phony.add(name)
            if name == library:
                return _path(parent, library, start, phony)
            frontier.append(name)
        if not frontier:
            return None
    return None


def _path(parent: Mapping[str, str], end: str, start: str, phony: set[str]) -> list[str]:
    steps = [end]
    while steps[-1] in parent and parent[steps[-1]] != start:
        steps.append(parent[steps[-1]])
    return [s for s in reversed(steps) if s not in phony]


def _rel(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


@dataclass(frozen=True)
class _Context:
    data: NinjaData
    target: str

    def finding(
        self, reason: StaleShaderReason, source: str, artifact: str, step: str | None = None
    ) -> StaleShaderFinding:
        """A finding with the commands that force the rebuild: remove the stale file, so
        ninja must make it again whatever its graph says, and build the target."""
        stale = shlex.quote(str(self.data.node_path(step or artifact)))
        force = f"rm {stale} && ninja -C {shlex.quote(str(self.data.build_dir))} {self.target}"
        return StaleShaderFinding(reason, source, artifact, step, force)


def check_build(
    root: Path, build_dir: Path, before: Mapping[str, LogEntry], ninja: str | None
) -> ShaderCheck:
    """:func:`check` on ``build_dir``'s ``torch_cpu``, or UNKNOWN (never a pass) when there
    is no ninja graph to read: another build command, no ninja, or ninja's tools failed."""
    xcode = developer_dir() if sys.platform == "darwin" else None

    def unknown(note: str) -> ShaderCheck:
        toolchain = Toolchain.read(xcode, None)
        return ShaderCheck(CheckStatus.UNKNOWN, (), (), None, toolchain, 0.0, note)

    if ninja is None:
        return unknown("no ninja to read the build graph with")
    if not (build_dir / "build.ninja").is_file():
        return unknown(f"no build.ninja in {build_dir}")
    try:
        return check(root, NinjaData(ninja, build_dir), before, TORCH_CPU, xcode_dir=xcode)
    except StaleShaderError:
        raise
    except BuildError as exc:  # ninja's tools failed (no torch_cpu target...)
        return unknown(str(exc))
