"""Typed errors. Every message says what went wrong *and* what to do about it."""

from __future__ import annotations

from dataclasses import dataclass

# The exit-code table, the same for `python -m pipeline` and doit (README, "Exit status").
EXIT_OK = 0
EXIT_WORK_LEFT = 1  # tests or checklist failed, a build failed, work is left for a human
EXIT_INPUT = 2  # usage or input error: bad config, unknown operator, unreadable file
EXIT_CRASHED = 70  # `nightly` only: an unexpected error (a bug), never mistaken for 1
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)


class PipelineError(Exception):
    """Base class: printed without a traceback; ``exit_code`` is what the command exits with.

    The default is an input error (2); errors about the work itself say 1.
    """

    exit_code = EXIT_INPUT


class WorkLeftError(PipelineError):
    """The chain ran, but is not done: tests fail, checklist items or hand-written pieces
    are left. The message says what."""

    exit_code = EXIT_WORK_LEFT


class ConfigError(PipelineError):
    """A configuration key is missing, unknown or has the wrong type."""


class ParseError(PipelineError):
    """A source file could not be read; the message names file and line."""

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


class DirtyFileError(PipelineError):
    """Refusing to overwrite a file with uncommitted changes made by someone else."""

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


class GitHubError(PipelineError):
    """The GitHub API refused a request (401/403/404/422...)."""

    status: int | None = None  # the HTTP status, when GitHub answered


class HistoryServerError(PipelineError):
    """The history server could not do what was asked: unreachable, gone mid-night, a
    role without the right, a schema from a newer mps-pipeline, a lock another job holds.
    The message names the server with its secrets hidden; nothing was half-recorded (a
    night is one transaction, rolled back by the server when the connection goes)."""


class CopyMismatchError(PipelineError):
    """A history copied into another read back different: the copy was rolled back, the
    target left as it was. The message names the table, the row's key and both values."""
