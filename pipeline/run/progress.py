"""What the runners share: stream a subprocess into a log file, and show a progress display.

Both runners (build, tests) start a long child process, copy everything it prints into a log
file as it arrives, parse each line for progress, and must be able to stop it cleanly on a
timeout or Ctrl-C. The child runs in its own session so that killing it reaches everything it
started (compilers, test workers), and so that a Ctrl-C in the terminal reaches us first.
"""

from __future__ import annotations

import os
import queue
import re
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

# ninja forwards SIGTERM to the process groups of its running commands and waits for them;
# SIGKILL would orphan those compilers, so it is only the fallback after this grace period.
TERMINATE_GRACE = 5.0
# After a kill, how long to wait for the last buffered output (a grandchild that escaped the
# process group could hold the pipe open forever).
DRAIN_GRACE = 2.0
DETAIL_WIDTH = 60

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    """``text`` without terminal colour codes (compilers colour diagnostics under ninja)."""
    return _ANSI.sub("", text) if "\x1b" in text else text


@dataclass(frozen=True)
class StreamOutcome:
    """How a streamed process ended. ``returncode`` is negative when a signal ended it."""

    returncode: int
    seconds: float
    timed_out: bool


def stream(
    command: Sequence[str],
    *,
    cwd: Path,
    log_path: Path,
    timeout: float | None,
    on_line: Callable[[str], None],
    env: Mapping[str, str] | None = None,
    append: bool = False,
) -> StreamOutcome:
    """Run ``command``, writing its stdout+stderr to ``log_path`` and each line to ``on_line``.

    The log starts with a ``$ command`` line. ``env`` entries are added to the inherited
    environment. On timeout the whole process group is terminated and ``timed_out`` is set;
    on any exception (Ctrl-C included) it is terminated and the exception propagates.
    Raises OSError (FileNotFoundError...) when the command cannot be started.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    full_env = {**os.environ, **(env or {})}
    with open(log_path, "ab" if append else "wb") as log:
        log.write(f"$ {shlex.join(command)}\n".encode())
        log.flush()
        start = time.monotonic()
        proc = subprocess.Popen(
            list(command),
            cwd=cwd,
            env=full_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        assert proc.stdout is not None
        lines: queue.Queue[bytes | None] = queue.Queue()
        reader = threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True)
        reader.start()
        deadline = None if timeout is None else start + timeout
        try:
            finished = _copy_lines(lines, log, on_line, deadline)
            if finished:
                finished = _wait(proc, deadline)
            if not finished:
                _terminate(proc)
                _copy_lines(lines, log, on_line, time.monotonic() + DRAIN_GRACE)
        except BaseException:
            _terminate(proc)
            raise
        returncode = proc.wait()
    return StreamOutcome(returncode, time.monotonic() - start, timed_out=not finished)


def _pump(pipe: IO[bytes], lines: queue.Queue[bytes | None]) -> None:
    # A thread, so that the main loop can wait on a queue with a deadline instead of
    # blocking in readline() while the child is silent.
    for raw in pipe:
        lines.put(raw)
    lines.put(None)


def _copy_lines(
    lines: queue.Queue[bytes | None],
    log: IO[bytes],
    on_line: Callable[[str], None],
    deadline: float | None,
) -> bool:
    """Copy lines until end of output (True) or the deadline (False)."""
    while True:
        wait = None if deadline is None else deadline - time.monotonic()
        if wait is not None and wait <= 0:
            return False
        try:
            raw = lines.get(timeout=wait)
        except queue.Empty:
            return False
        if raw is None:
            return True
        log.write(raw)
        # Flushed per line so that `tail -f` on the log follows a long build live.
        log.flush()
        on_line(raw.decode("utf-8", "replace").rstrip("\r\n"))


def _wait(proc: subprocess.Popen[bytes], deadline: float | None) -> bool:
    wait = None if deadline is None else max(deadline - time.monotonic(), 0)
    try:
        proc.wait(timeout=wait)
    except subprocess.TimeoutExpired:
        return False
    return True


def _terminate(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group, then SIGKILL whatever is left after a grace period."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    with suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=TERMINATE_GRACE)
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


class ProgressDisplay:
    """A progress display; ``update`` may be called for every line, it throttles itself."""

    def update(self, done: int, total: int | None, detail: str = "") -> None:
        """Report ``done`` of ``total`` steps (``total`` None while still unknown)."""


class _RichBar(ProgressDisplay):
    def __init__(self, label: str, console: Console) -> None:
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[detail]}", markup=False),
            console=console,
        )
        self._task = self._progress.add_task(label, total=None, detail="")

    def update(self, done: int, total: int | None, detail: str = "") -> None:
        self._progress.update(self._task, completed=done, total=total, detail=_clip(detail))

    def __enter__(self) -> _RichBar:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()


class _PlainLines(ProgressDisplay):
    """Not a terminal (CI logs, pipes): one compact line per tenth of the work."""

    def __init__(self, label: str, console: Console) -> None:
        self._label = label
        self._console = console
        self._tenth = 0

    def update(self, done: int, total: int | None, detail: str = "") -> None:
        if not total:
            return
        tenth = min(done * 10 // total, 10)
        if tenth <= self._tenth:
            return
        self._tenth = tenth
        line = f"{self._label}: {done * 100 // total:3d}% ({done}/{total})"
        if detail:
            line += f" {_clip(detail)}"
        self._console.print(line, markup=False, highlight=False, soft_wrap=True)


def _clip(text: str) -> str:
    return text if len(text) <= DETAIL_WIDTH else text[: DETAIL_WIDTH - 1] + "…"


@contextmanager
def progress_display(
    label: str, enabled: bool, *, console: Console | None = None
) -> Iterator[ProgressDisplay]:
    """A rich bar on stderr when it is a terminal, compact lines when it is not, nothing when
    ``enabled`` is false. ``console`` is for tests (force_terminal=...)."""
    if not enabled:
        yield ProgressDisplay()
        return
    console = console or Console(stderr=True)
    if not console.is_terminal:
        yield _PlainLines(label, console)
        return
    with _RichBar(label, console) as bar:
        yield bar
