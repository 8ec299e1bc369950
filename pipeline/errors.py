"""Typed errors. Every message says what went wrong *and* what to do about it.

Every :class:`PipelineError` lives here, each with its exit code, and :func:`failure` is the
one place an exception becomes an exit status and the line said about it: ``python -m
pipeline`` and every doit task call it alike (cibuildwheel's ``__main__`` is the model). An
exception that is not ours is a bug: exit 70 ("crashed") everywhere, its traceback printed
first, never 1 ("work left") or 2 ("bad input").
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

# The exit-code table, the same for `python -m pipeline` and doit (README, "Exit status").
EXIT_OK = 0
EXIT_WORK_LEFT = 1  # tests or checklist failed, a build failed, work is left for a human
EXIT_INPUT = 2  # usage or input error: bad config, unknown operator, unreadable file
EXIT_CRASHED = 70  # an unexpected error (a bug), never mistaken for 1 or 2
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)


class PipelineError(Exception):
    """Base class: printed without a traceback; ``exit_code`` is what the command exits with.

    The default is an input error (2); errors about the work itself say 1.
    """

    exit_code = EXIT_INPUT


class DocumentError(PipelineError):
    """A JSON document this tool wrote (results.json...) does not read back: a field is
    missing, of another type, or unknown. The message names the document and the field."""

    exit_code = EXIT_INPUT

    def __init__(self, doc: str, where: str, problem: str) -> None:
        self.doc, self.where, self.problem = doc, where, problem
        super().__init__(
            f"{doc}: {where} {problem}; was it written by this version of mps-pipeline?"
        )


class WorkLeftError(PipelineError):
    """The chain ran, but is not done: tests fail, checklist items or hand-written pieces
    are left. The message says what."""

    exit_code = EXIT_WORK_LEFT


class ConfigError(PipelineError):
    """A configuration key is missing, unknown or has the wrong type."""

    exit_code = EXIT_INPUT


class NoCompilerError(ConfigError):
    """No host C++ compiler to build functors with; the message names the setting to set."""

    exit_code = EXIT_INPUT


class NoTorchError(ConfigError):
    """The configured interpreter has no torch: no reference, no wheel headers; the message
    says which setting points at one that has it."""

    exit_code = EXIT_INPUT


class NothingToCheckError(PipelineError):
    """The operator or file has no registered Metal functor; the message names what the
    tree has instead."""

    exit_code = EXIT_INPUT


class NotElementwiseError(PipelineError):
    """The operator is not a shared element-wise kernel behind a declared stub: the guide's
    recipe (a functor, a registration, a folded row) does not apply. Exit 2, before any write."""

    exit_code = EXIT_INPUT


class NoDeviceError(PipelineError):
    """The interpreter's torch cannot use the device asked for; nothing was timed (exit 2,
    as for any input that cannot work here). ``instead`` is what the command suggests."""

    exit_code = EXIT_INPUT

    def __init__(self, device: str, reason: str, instead: str = "") -> None:
        self.device = device
        self.reason = reason
        text = f"speed: no {device.upper()} device here: {reason}"
        super().__init__(f"{text}; {instead}" if instead else text)

    def suggesting(self, instead: str) -> NoDeviceError:
        """The same error, with what the command that met it suggests doing."""
        return NoDeviceError(self.device, self.reason, instead)


class DamagedHistoryError(PipelineError):
    """A file at the history's path that is not a valid history; it was not touched."""

    exit_code = EXIT_INPUT

    def __init__(self, path: Path, why: str) -> None:
        self.path = path
        self.why = why
        super().__init__(
            f"{path}: not a valid mps-pipeline history ({why}): restore it from a backup, "
            "or move it away to start a new history"
        )


class HistoryBusyError(PipelineError):
    """The history cannot be written now: another process holds its lock, or the file or
    its folder is read-only. The environment, not a bug, and nothing was recorded."""

    exit_code = EXIT_INPUT

    def __init__(self, path: Path, why: str) -> None:
        self.path = path
        super().__init__(
            f"{path}: the history cannot be written now ({why}); nothing was recorded: "
            "wait for the other run or make the file writable, then run again"
        )


class ParseError(PipelineError):
    """A source file could not be read; the message names file and line."""

    exit_code = EXIT_INPUT

    def __init__(self, path: str, line: int | None, message: str) -> None:
        self.path = path
        self.line = line
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {message}")


class UnreadableFileError(ParseError):
    """A tree file could not be read as text: an OSError, NUL bytes, or bytes that are not
    UTF-8. The message names the file (tree-relative) and, for a decoding error, the line,
    column and byte; :func:`pipeline.tree.text.read_text` raises it."""

    def __init__(
        self, path: str, message: str, line: int | None = None, column: int | None = None
    ) -> None:
        self.path = path
        self.line = line
        self.column = column
        PipelineError.__init__(self, f"{path}: {message}")


class UnknownOperatorError(PipelineError):
    """The operator is not in the tree; suggests close names."""

    exit_code = EXIT_INPUT

    def __init__(self, op: str, suggestions: list[str]) -> None:
        self.op = op
        self.suggestions = suggestions
        hint = f" Did you mean: {', '.join(suggestions)}?" if suggestions else ""
        shown = repr(op) if len(op) <= 60 else f"{op[:60]!r}… ({len(op)} characters)"
        super().__init__(
            f"unknown operator {shown}: no native_functions.yaml entry or OpInfo has that "
            f"name.{hint}"
        )


class UnknownImplementationError(PipelineError):
    """What the tool must read to plan an edit is not in the tree (a shared implementation
    no native/*.cpp defines): unknown, never guessed. Exit 2, before any write."""

    exit_code = EXIT_INPUT


class DirtyFileError(PipelineError):
    """Refusing to overwrite a file with uncommitted changes made by someone else."""

    exit_code = EXIT_INPUT

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(
            f"{path} has uncommitted changes; commit or stash them, or pass force=1 "
            "(--force) to let the pipeline edit it anyway"
        )


class ConcurrentChangeError(PipelineError):
    """A file changed on disk between planning an edit and committing it; nothing was written."""

    exit_code = EXIT_WORK_LEFT

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(
            f"{path} was changed by another process since it was read; nothing was written "
            "— re-run to plan the edit again"
        )


class TreeBusyError(PipelineError):
    """Another run holds the tree's edit lock (and did not release it within the wait)."""

    exit_code = EXIT_WORK_LEFT

    def __init__(self, pid: int | None) -> None:
        self.pid = pid
        who = f"pid {pid}" if pid is not None else "pid unknown"
        super().__init__(
            f"another mps-pipeline run is editing this tree ({who}); "
            "wait for it to finish or stop it"
        )


class EditVerificationError(PipelineError):
    """An edit, re-parsed, did not change exactly what was intended; nothing was written."""

    exit_code = EXIT_INPUT


@dataclass(frozen=True)
class CompilerError:
    """The first error a compiler (or cmake) reported: where, and what."""

    path: str
    line: int
    column: int | None
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


class BuildError(PipelineError):
    """`ninja torch_cpu` failed; the message carries the first compiler error.

    ``first_error`` is that error as data (None when the build could not start, timed out
    or failed without a compiler error), so callers need not parse the log again.
    """

    exit_code = EXIT_WORK_LEFT

    def __init__(self, message: str, first_error: CompilerError | None = None) -> None:
        super().__init__(message)
        self.first_error = first_error


class StaleShaderReason(Enum):
    """Why a shader artifact the build should have remade is stale."""

    NO_EDGE = "no ninja edge from the source to the artifact"
    NOT_REBUILT = "the artifact's step did not run in this build"
    NOT_LINKED = "no rebuild edge from the artifact to the library (order-only at most)"
    NOT_RELINKED = "a step between the artifact and the library did not run in this build"


@dataclass(frozen=True)
class StaleShaderFinding:
    """One stale artifact: the changed tree file, the artifact built from it, the step that
    did not run (for the link), and the shell commands that force the rebuild."""

    reason: StaleShaderReason
    source: str
    artifact: str
    step: str | None
    force: str

    def __str__(self) -> str:
        step = f" (step {self.step})" if self.step else ""
        return (
            f"{self.source} changed, but {self.artifact}{step} is stale: {self.reason.value}; "
            f"force the rebuild with `{self.force}`"
        )


class StaleShaderError(BuildError):
    """The build finished but did not remake a shader from its edited source (pytorch#196202):
    the tests would run the old shader. Exit 1, before any test runs."""

    def __init__(self, findings: tuple[StaleShaderFinding, ...]) -> None:
        self.findings = findings
        more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
        edge = any(f.reason is StaleShaderReason.NO_EDGE for f in findings)
        fix = (
            "; the build's shader step must depend on the headers the shader includes "
            "(upstream: cmake/Metal.cmake's METAL_HEADER_DEPS), else every header edit "
            "needs the forced rebuild"
            if edge
            else ""
        )
        super().__init__(f"stale shader: {findings[0]}{more}{fix}")


class NoKernelFileError(PipelineError):
    """check-kernel was given a ``.metal`` file that is neither a path nor a file of the
    tree's kernels folder (exit 2)."""

    exit_code = EXIT_INPUT

    def __init__(self, file: str, folder: Path) -> None:
        self.file = file
        super().__init__(
            f"{file}: no such .metal file (looked in {folder} too); give a path to one, "
            "or the name or stem of a file in that folder"
        )


class LaunchSpecError(ConfigError):
    """A check-kernel launch spec that cannot be read: the message names the file, the
    entry and the key, and where the format is described (exit 2)."""

    exit_code = EXIT_INPUT

    def __init__(self, problem: str) -> None:
        super().__init__(
            f'{problem}; fix the launch spec (its format: docs/check-kernel.md, "The launch spec")'
        )


class DeviceRefusedError(PipelineError):
    """Timings asked for on a device whose figures mean nothing for a Mac (a VM's
    paravirtual GPU): refused before anything is timed, with the reason (exit 2)."""


class GitHubError(PipelineError):
    """The GitHub API refused a request (401/403/404/422...)."""

    exit_code = EXIT_INPUT
    status: int | None = None  # the HTTP status, when GitHub answered


def os_error_line(exc: OSError) -> str:
    """One line for an OSError: the path(s) it names and the system's reason."""
    where = " -> ".join(str(f) for f in (exc.filename, exc.filename2) if f is not None)
    return f"{where}: {exc.strerror or exc}" if where else str(exc)


@dataclass(frozen=True)
class Failure:
    """What a command or task that raised says, on stderr, and exits with."""

    code: int
    line: str  # the one line said, without "error: "


def failure(exc: BaseException, *, where: str = "") -> Failure:
    """The exit status of a run that raised ``exc`` and its one line. ``where``: what was
    running (``during the build``), said after an interruption or a crash.

    Anything but the errors below is a bug: its traceback is printed on stderr here, first,
    and the line says so (exit 70, whatever the command or task)."""
    during = f" during {where}" if where else ""
    if isinstance(exc, BrokenPipeError):
        # `... --json | head` closed our stdout: not an error of ours
        return Failure(EXIT_OK, "")
    if isinstance(exc, PipelineError):
        return Failure(exc.exit_code, str(exc))
    if isinstance(exc, KeyboardInterrupt):
        # source edits are transactions: rolled back, or forward by the next run
        return Failure(EXIT_INTERRUPTED, f"interrupted{during}: no file was left half-written")
    if isinstance(exc, OSError):  # a read-only, full or failing disk: the path and why
        return Failure(EXIT_INPUT, os_error_line(exc))
    import traceback  # only for a bug: the floor's import stays cheap

    traceback.print_exception(exc, file=sys.stderr)
    return Failure(
        EXIT_CRASHED,
        f"crashed{during}: unexpected {type(exc).__name__}, a bug in mps-pipeline (the "
        f"traceback is above; please report it): exit {EXIT_CRASHED}, not 1 or 2, so it is "
        "never taken for failing tests or bad input",
    )


class HistoryServerError(PipelineError):
    """The history server could not do what was asked: unreachable, gone mid-night, a
    role without the right, a schema from a newer mps-pipeline, a lock another job holds.
    The message names the server with its secrets hidden; nothing was half-recorded (a
    night is one transaction, rolled back by the server when the connection goes)."""


class CopyMismatchError(PipelineError):
    """A history copied into another read back different: the copy was rolled back, the
    target left as it was. The message names the table, the row's key and both values."""
