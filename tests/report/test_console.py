"""pipeline/report/console.py: the one console the commands print to, on a pipe and a terminal."""

from __future__ import annotations

import io

import pytest
from rich.table import Table

from pipeline.report.console import PIPE_WIDTH, LazyTerminal, terminal

LONG = "error: " + " ".join(f"word{i}" for i in range(60)) + " (see /a/path/that/is/long.md)"


class Tty(io.StringIO):
    """A stdout that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_on_a_pipe_a_long_line_stays_one_line_and_tables_fit_the_pipe_width(capsys):
    assert len(LONG) > PIPE_WIDTH
    console = terminal()
    console.print(LONG)
    table = Table("file", "reason")
    table.add_row("aten/src/ATen/native/native_functions.yaml:329", "x " * 200)
    console.print(table)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == LONG  # whole, not cut mid-sentence at 80 or 160 columns
    assert max(len(line) for line in out[1:]) <= PIPE_WIDTH
    assert any("native_functions.yaml:329" in line for line in out[1:])


def test_on_stderr_too(capsys):
    terminal(stderr=True).print(LONG)
    LazyTerminal(stderr=True).print(LONG)
    assert capsys.readouterr().err.splitlines() == [LONG, LONG]


def test_a_terminal_wraps_at_its_width(monkeypatch: pytest.MonkeyPatch):
    stdout = Tty()
    monkeypatch.setattr("sys.stdout", stdout)
    monkeypatch.setenv("COLUMNS", "60")
    monkeypatch.delenv("NO_COLOR", raising=False)
    console = terminal()
    assert console.is_terminal and console.width == 60
    console.print(LONG, markup=False)
    lines = stdout.getvalue().splitlines()
    assert len(lines) > 1 and max(len(line) for line in lines) <= 60
