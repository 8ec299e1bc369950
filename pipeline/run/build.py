"""Run the build (``ninja -C build torch_cpu``) with a progress bar; find the first error.

The whole output goes to a log file; the result carries ninja's step counts, whether there
was nothing to do, and on failure the first compiler error plus a message that says what to
do (configure the build directory, fix ``build_command``, read the log).
"""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pipeline.errors import BuildError, CompilerError
from pipeline.run.progress import ProgressDisplay, progress_display, stream, strip_ansi

# Forced so that progress lines parse whatever the user's NINJA_STATUS says; it also reaches
# a ninja started by `cmake --build`.
NINJA_STATUS = "[%f/%t] "
NO_WORK = "ninja: no work to do."
CONFIGURE_HINT = "run `python setup.py develop` (or cmake -G Ninja) first to configure it"

_PROGRESS = re.compile(r"\[(\d+)/(\d+)\] ?(.*)")
# clang, gcc and the Metal compiler: path:line[:col]: [fatal ]error: message
_COMPILER_ERROR = re.compile(
    r"""\s*(?P<path>[^\s:"'][^:"']*):(?P<line>\d+):(?:(?P<column>\d+):)?"""
    r"""\s*(?:fatal\s+)?error:\s*(?P<message>.*\S)"""
)
# A build that re-runs cmake: "CMake Error at CMakeLists.txt:12 (message):" + indented text.
_CMAKE_ERROR = re.compile(r"CMake Error at (?P<path>.+?):(?P<line>\d+) \(")
# ninja >= 1.12 writes "FAILED: [code=1] target", older ones "FAILED: target".
_FAILED = re.compile(r"FAILED: (?:\[code=-?\d+\] )?(?P<target>.*?)\s*$")
_NINJA_ERROR = re.compile(r"ninja: (?:error|fatal): (?P<message>.+)")
_NO_BUILD_FILE = re.compile(r"loading '[^']+': No such file or directory")
_NO_DIRECTORY = re.compile(r"chdir to '[^']+' - No such file or directory")
_UNKNOWN_TARGET = re.compile(r"unknown target '(?P<target>[^']+)'(?P<rest>.*)")


@dataclass(frozen=True)
class BuildRequest:
    """One build: ``command`` runs in ``cwd``; its whole output goes to ``log_path``."""

    command: tuple[str, ...]
    cwd: Path
    log_path: Path
    timeout: float | None = None


@dataclass(frozen=True)
class BuildResult:
    """How a build went. ``message`` says it in one or two lines, for people."""

    ok: bool
    returncode: int
    seconds: float
    steps_done: int
    steps_total: int
    no_work: bool
    first_error: CompilerError | None
    log_path: Path
    timed_out: bool = False
    failed_target: str | None = None
    message: str = ""

    def check(self) -> BuildResult:
        """Return self when the build succeeded; raise BuildError (message and first error)
        if not."""
        if not self.ok:
            raise BuildError(self.message, first_error=self.first_error)
        return self


def parse_progress(line: str) -> tuple[int, int, str] | None:
    """``(done, total, description)`` from a ninja status line ``[n/N] description``, else
    None."""
    match = _PROGRESS.match(strip_ansi(line))
    return (int(match[1]), int(match[2]), match[3]) if match else None


def first_compiler_error(lines: Iterable[str]) -> CompilerError | None:
    """The first ``path:line[:col]: error: msg`` (or ``CMake Error at path:line``) in ``lines``.

    Warnings, notes and "In file included from" lines are skipped; colour codes are ignored;
    so is the command line ninja echoes after ``FAILED:``, which can quote anything.
    """
    cmake: tuple[str, int] | None = None
    echoed_command = False
    for raw in lines:
        line = strip_ansi(raw).rstrip()
        if echoed_command:
            echoed_command = False
            continue
        if _FAILED.match(line):
            echoed_command = True
            continue
        if cmake is not None:
            # cmake puts the message on the following, indented, line(s)
            if line.strip():
                return CompilerError(cmake[0], cmake[1], None, line.strip())
            continue
        if match := _COMPILER_ERROR.match(line):
            path, lineno, column, message = match.groups()
            return CompilerError(path, int(lineno), int(column) if column else None, message)
        if match := _CMAKE_ERROR.match(line):
            path, lineno = match.groups()
            cmake = (path, int(lineno))
    if cmake is not None:
        return CompilerError(cmake[0], cmake[1], None, "CMake error")
    return None


def find_ninja() -> str | None:
    """The ninja executable: on PATH, else the one the ``ninja`` package put in this venv."""
    found = shutil.which("ninja")
    if found:
        return found
    candidates = [Path(sys.prefix) / "bin" / "ninja", Path(sys.executable).parent / "ninja"]
    try:
        import ninja  # the PyPI package ships the binary next to the interpreter's scripts

        if ninja.BIN_DIR:
            candidates.insert(0, Path(ninja.BIN_DIR) / "ninja")
    except ImportError:
        pass
    for candidate in candidates:
        if candidate.is_file():
            return str(candidate)
    return None


def run(request: BuildRequest, *, progress: bool = True) -> BuildResult:
    """Run the build, streaming its output to the log and ninja's ``[n/N]`` to a progress bar.

    A failing build is a result (``ok=False`` with ``first_error`` and ``message``); a build
    that cannot start at all (no ninja, no working directory) raises BuildError.
    """
    command = _resolve(request.command)
    if not request.cwd.is_dir():
        raise BuildError(f"build working directory {request.cwd} does not exist")
    watch = _Watch()
    with progress_display("build", progress) as bar:
        watch.bar = bar
        try:
            outcome = stream(
                command,
                cwd=request.cwd,
                log_path=request.log_path,
                timeout=request.timeout,
                on_line=watch.on_line,
                env={"NINJA_STATUS": NINJA_STATUS},
            )
        except FileNotFoundError as exc:
            raise BuildError(
                f"build command {command[0]!r} not found: install it or fix build_command "
                "in your config file (.mps-pipeline.yaml) or MPS_PIPELINE_BUILD_COMMAND"
            ) from exc

    ok = outcome.returncode == 0 and not outcome.timed_out
    result = BuildResult(
        ok=ok,
        returncode=outcome.returncode,
        seconds=outcome.seconds,
        steps_done=watch.done,
        steps_total=watch.total,
        no_work=watch.no_work,
        first_error=None,
        log_path=request.log_path,
        timed_out=outcome.timed_out,
    )
    if ok:
        summary = (
            "up to date (ninja: no work to do)"
            if result.no_work
            else f"built {result.steps_done} step(s) in {result.seconds:.1f}s"
        )
        return replace(result, message=summary)
    if outcome.timed_out:
        return replace(
            result,
            message=(
                f"build timed out after {request.timeout:g}s at step "
                f"{result.steps_done}/{result.steps_total}; the build was stopped "
                f"(full log: {request.log_path})"
            ),
        )
    lines = request.log_path.read_text(errors="replace").splitlines()
    first_error = first_compiler_error(lines)
    target = _failed_target(lines)
    return replace(
        result,
        first_error=first_error,
        failed_target=target,
        message=_failure_message(lines, first_error, target, request, outcome.returncode),
    )


class _Watch:
    """Per-line state of a running build: ninja's step counts and "no work to do"."""

    def __init__(self) -> None:
        self.done = 0
        self.total = 0
        self.no_work = False
        self.bar = ProgressDisplay()

    def on_line(self, line: str) -> None:
        step = parse_progress(line)
        if step:
            self.done, self.total, description = step
            self.bar.update(self.done, self.total, description)
        elif line.strip() == NO_WORK:
            self.no_work = True


def _resolve(command: Sequence[str]) -> tuple[str, ...]:
    """Put the full path of ninja in front when the command is a bare ``ninja``."""
    if not command:
        raise BuildError(
            "build_command is empty: set it in .mps-pipeline.yaml or MPS_PIPELINE_BUILD_COMMAND"
        )
    if command[0] != "ninja":
        return tuple(command)
    ninja = find_ninja()
    if ninja is None:
        raise BuildError(
            "ninja not found on PATH or in this Python environment: install it "
            "(`pip install ninja` or `brew install ninja`)"
        )
    return (ninja, *command[1:])


def _failed_target(lines: Iterable[str]) -> str | None:
    for line in lines:
        if match := _FAILED.match(strip_ansi(line)):
            return match[1]
    return None


def _build_dir(request: BuildRequest) -> Path:
    """The directory ninja reads build.ninja from (``-C dir``, relative to cwd)."""
    args = list(request.command)
    for i, arg in enumerate(args[:-1]):
        if arg == "-C":
            return request.cwd / args[i + 1]
    return request.cwd


def _failure_message(
    lines: Sequence[str],
    first_error: CompilerError | None,
    target: str | None,
    request: BuildRequest,
    returncode: int,
) -> str:
    log = f"full log: {request.log_path}"
    if first_error is not None:
        where = f" (building {target})" if target else ""
        return f"build failed: {first_error}{where}\n{log}"
    for line in lines:
        match = _NINJA_ERROR.match(strip_ansi(line))
        if match is None:
            continue
        text = match[1]
        if _NO_BUILD_FILE.search(text):
            return f"build directory {_build_dir(request)} has no build.ninja: {CONFIGURE_HINT}"
        if _NO_DIRECTORY.search(text):
            return f"build directory {_build_dir(request)} does not exist: {CONFIGURE_HINT}"
        if unknown := _UNKNOWN_TARGET.search(text):
            missing, rest = unknown.groups()
            hint = rest.lstrip(", ")
            return (
                f"ninja has no target {missing!r} in {_build_dir(request)}"
                f"{f' ({hint})' if hint else ''}; check build_command "
                "(`mps-pipeline config` shows where it is set)"
            )
        return f"ninja: {text}\n{log}"
    if target is not None:
        return f"build failed while building {target}: {_failed_summary(lines)}\n{log}"
    last = next((s for s in reversed(lines) if s.strip()), "")
    return f"build command exited with status {returncode}: {strip_ansi(last).strip()}\n{log}"


def _failed_summary(lines: Sequence[str]) -> str:
    """The most telling line of the first failed step's output (linker, codegen...)."""
    start = next(i for i, line in enumerate(lines) if _FAILED.match(strip_ansi(line)))
    # The line after FAILED: is the command itself; its output follows until ninja speaks.
    block: list[str] = []
    for raw in lines[start + 2 :]:
        line = strip_ansi(raw).rstrip()
        if line.startswith(("FAILED: ", "ninja: ")) or _PROGRESS.match(line):
            break
        if line.strip():
            block.append(line.strip())
    for line in block:
        if "error" in line.lower() or line.startswith("Undefined symbols"):
            return line
    return block[-1] if block else "no output"
