"""Typed errors. Every message says what went wrong *and* what to do about it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipeline.run.build import CompilerError


class PipelineError(Exception):
    """Base class: the CLI prints these without a traceback and exits 2."""


class ConfigError(PipelineError):
    """A configuration key is missing, unknown or has the wrong type."""


class ParseError(PipelineError):
    """A source file could not be read; the message names file and line."""

    def __init__(self, path: str, line: int | None, message: str) -> None:
        self.path = path
        self.line = line
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {message}")


class UnknownOperatorError(PipelineError):
    """The operator is not in the tree; suggests close names."""

    def __init__(self, op: str, suggestions: list[str]) -> None:
        self.op = op
        self.suggestions = suggestions
        hint = f" Did you mean: {', '.join(suggestions)}?" if suggestions else ""
        super().__init__(
            f"unknown operator {op!r}: no native_functions.yaml entry or OpInfo has that "
            f"name.{hint}"
        )


class DirtyFileError(PipelineError):
    """Refusing to overwrite a file with uncommitted changes made by someone else."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(
            f"{path} has uncommitted changes; commit or stash them, or pass force=1 "
            "(--force) to let the pipeline edit it anyway"
        )


class EditVerificationError(PipelineError):
    """An edit, re-parsed, did not change exactly what was intended; nothing was written."""


class MissingFunctorError(PipelineError):
    """The Metal functor the host stub needs does not exist yet: the contributor writes it."""


class BuildError(PipelineError):
    """`ninja torch_cpu` failed; the message carries the first compiler error.

    ``first_error`` is that error as data (None when the build could not start, timed out
    or failed without a compiler error), so callers need not parse the log again.
    """

    def __init__(self, message: str, first_error: CompilerError | None = None) -> None:
        super().__init__(message)
        self.first_error = first_error


class GitHubError(PipelineError):
    """The GitHub API refused a request (401/403/404/422...)."""
