"""The one table of the options a user gives: each is a doit variable (``dry_run=1``) and a
CLI flag (``--dry-run``), and its help text is written here once (nox's ``_options.py`` is
the model).

``doit help TASK`` lists a task's variables from :meth:`Option.doit_help`; the CLI's parsers
add theirs with :meth:`Option.add_to`. A switch (no ``metavar``) is ``name=1`` in doit and a
plain ``--flag`` on the command line. A settings option's environment variable and default
are its setting's: ``MPS_PIPELINE_<NAME>`` (:func:`pipeline.config.env_name`) and
``defaults.yaml``, the one place of defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a parser is handed in: config, which reads OVERRIDABLE, never pays for it
    import argparse


@dataclass(frozen=True)
class Option:
    name: str  # the doit variable, and the argparse destination
    help: str  # one line, without the option's spelling
    metavar: str | None = None  # None: a switch
    example: str = ""  # shown in doit's help after the text: "(op=atan2, op=arctan2)"
    doit: bool = True  # also a doit variable (False: the command line's alone, as --json)

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
        self,
        parser: argparse.ArgumentParser,
        *,
        positional: bool = False,
        optional: bool = False,
        more: str = "",
    ) -> None:
        """Add this option to ``parser``: ``--flag`` (or ``name``, ``positional``; one that
        may be left out, ``optional``); ``more``: what it means to this command, after the
        shared help."""
        text = f"{self.help}. {more}" if more else self.help
        if positional:
            nargs = "?" if optional else None
            parser.add_argument(self.name, nargs=nargs, metavar=self.metavar, help=text)
        elif self.switch:
            parser.add_argument(self.flag, action="store_true", help=text)
        else:
            parser.add_argument(self.flag, metavar=self.metavar, help=text)


# the two most commands take, by name (a renamed one is a mypy error, not a KeyError)
OP = Option("op", "operator name or OpInfo alias", "NAME", "op=atan2, op=arctan2")
JSON = Option(
    "json", "print JSON instead of the report (schema: docs/machine-output.md)", doit=False
)
OPTIONS: dict[str, Option] = {
    o.name: o
    for o in (
        OP,
        Option("root", "PyTorch checkout (default: the one you stand in, else the sandbox)", "DIR"),
        Option("force", "edit files that have uncommitted changes of yours"),
        Option("dry_run", "show every diff and what is left to write; write nothing"),
        Option(
            "body",
            "operator() body of a Metal functor not written yet",
            "CODE",
            'body="return a + b;"',
        ),
        Option("host_body", "body of a host kernel for a stub with extra parameters", "CODE"),
        Option("python", "interpreter that can import torch (OpInfos, the tests)", "EXE"),
        Option("state_dir", "where results, caches and doit's database live", "DIR"),
        Option("build_dir", "the build directory, relative to root (default: build)", "DIR"),
        Option("opinfo_table", "a static OpInfo table instead of importing op_db", "FILE"),
        Option("config", "a config file instead of the checkout's .mps-pipeline.yaml", "FILE"),
        JSON,
    )
}
# the settings a command line may set (config.load_settings refuses any other)
OVERRIDABLE: tuple[str, ...] = ("root", "python", "state_dir", "build_dir", "opinfo_table")
# the nightly history a command reads or writes (nightly, shards, pr-report, speed, export):
# a CLI flag only, never a doit variable of the migrate chain
HISTORY = Option(
    "history",
    "the nightly history: an SQLite file or a postgresql:// URL (default: the history.url "
    "setting, else the state directory's file)",
    "FILE_OR_URL",
    doit=False,
)
# the options every command and every stage's task takes: where the tree and its state are
SETTINGS_OPTIONS: tuple[str, ...] = (*OVERRIDABLE, "config")
