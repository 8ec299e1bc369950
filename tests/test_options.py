"""pipeline/options.py: each option's help is written once and read by argparse and doit."""

from __future__ import annotations

import argparse

from pipeline.__main__ import build_parser
from pipeline.flows.migrate import BY_NAME, VARIABLES
from pipeline.options import OPTIONS, OVERRIDABLE, SETTINGS_OPTIONS


def test_the_settings_options_are_the_overridable_settings_and_config() -> None:
    assert (*OVERRIDABLE, "config") == SETTINGS_OPTIONS


def test_doit_and_the_cli_show_the_same_help_text() -> None:
    parser = build_parser("migrate")
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    migrate = sub.choices["migrate"]
    cli = {a.dest: a.help for a in migrate._actions}
    for name in BY_NAME["migrate_op"].all_variables:
        assert OPTIONS[name].help in VARIABLES[name]
        assert cli[name] == OPTIONS[name].help


def test_switches_are_one_in_doit_and_plain_flags_on_the_cli() -> None:
    assert VARIABLES["dry_run"].startswith("dry_run=1: ")
    assert VARIABLES["op"] == "op=NAME: operator name or OpInfo alias (op=atan2, op=arctan2)"
    parser = build_parser("migrate")
    args = parser.parse_args(["migrate", "atan2", "--dry-run", "--state-dir", "/tmp/x"])
    assert (args.op, args.dry_run, args.force, args.state_dir) == ("atan2", True, False, "/tmp/x")


def test_an_abbreviated_flag_is_refused_not_guessed():
    # argparse's prefix matching once read `speed --op atan2` as `--opinfo-table atan2`
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "pipeline", "speed", "--op", "atan2"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "unrecognized arguments: --op" in proc.stderr
