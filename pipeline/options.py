"""The one table of the options a user gives: each is a doit variable (``dry_run=1``) and a
CLI flag (``--dry-run``), and its help text is written here once.

``doit help TASK`` lists a task's variables from :meth:`Option.doit_help`; the CLI's parsers
add theirs with :meth:`Option.add_to`. A switch (no ``metavar``) is ``name=1`` in doit and a
plain ``--flag`` on the command line.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass


@dataclass(frozen=True)
class Option:
    name: str  # the doit variable, and the argparse destination
    help: str  # one line, without the option's spelling
    metavar: str | None = None  # None: a switch
    example: str = ""  # shown in doit's help after the text: "(op=atan2, op=arctan2)"

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def switch(self) -> bool:
        return self.metavar is None

    def doit_help(self) -> str:
        """``dry_run=1: show every diff ...``: one line of ``doit help TASK``."""
        spelled = f"{self.name}={'1' if self.switch else self.metavar}"
        return f"{spelled}: {self.help}" + (f" ({self.example})" if self.example else "")

    def add_to(
        self, parser: argparse.ArgumentParser, *, positional: bool = False, more: str = ""
    ) -> None:
        """Add this option to ``parser``: ``--flag`` (or ``name``, ``positional``); ``more``:
        what it means to this command, after the shared help."""
        text = f"{self.help}. {more}" if more else self.help
        if positional:
            parser.add_argument(self.name, metavar=self.metavar, help=text)
        elif self.switch:
            parser.add_argument(self.flag, action="store_true", help=text)
        else:
            parser.add_argument(self.flag, metavar=self.metavar, help=text)


OPTIONS: dict[str, Option] = {
    o.name: o
    for o in (
        Option("op", "operator name or OpInfo alias", "NAME", "op=atan2, op=arctan2"),
        Option("root", "PyTorch checkout (default: the one you stand in, else the sandbox)", "DIR"),
        Option("force", "edit files that have uncommitted changes of yours"),
        Option("dry_run", "show every diff and what is left to write; write nothing"),
        Option(
            "body", "operator() body of a Metal functor not written yet", "CODE",
            'body="return a + b;"',
        ),
        Option("host_body", "body of a host kernel for a stub with extra parameters", "CODE"),
        Option("python", "interpreter that can import torch (OpInfos, the tests)", "EXE"),
        Option("state_dir", "where results, caches and doit's database live", "DIR"),
        Option("build_dir", "the build directory, relative to root (default: build)", "DIR"),
        Option("opinfo_table", "a static OpInfo table instead of importing op_db", "FILE"),
        Option("config", "a config file instead of the checkout's .mps-pipeline.yaml", "FILE"),
    )
}
# the nightly history a command reads or writes (nightly, shards, pr-report, speed, export):
# a CLI flag only, never a doit variable of the migrate chain
HISTORY = Option(
    "history",
    "the nightly history: an SQLite file or a postgresql:// URL (default: the history.url "
    "setting, else the state directory's file)",
    "FILE_OR_URL",
)
# the options every command and every stage's task takes: where the tree and its state are
SETTINGS_OPTIONS: tuple[str, ...] = (
    "root", "python", "state_dir", "build_dir", "opinfo_table", "config",
)  # fmt: skip
