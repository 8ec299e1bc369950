"""The top-level command line: --version, --help's examples, global options on either side
of the command."""

from __future__ import annotations

import pytest

from pipeline.__main__ import _hoist, main


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("mps-pipeline ") and "required" not in out


def test_help_has_examples_markers_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "examples:\n  mps-pipeline demo ~/mps-demo" in out
    assert ".  STAGE       the stage ran" in out and "-- STAGE   it was up to date" in out
    assert "exit status: 0 done; 1 work left" in out


@pytest.mark.parametrize(
    ("argv", "hoisted"),
    [
        (["audit", "atan2"], ["audit", "atan2"]),
        # a value named like a command is the option's, not the command
        (["--root", "demo", "audit", "atan2"], ["audit", "--root", "demo", "atan2"]),
        (["--root=demo", "config"], ["config", "--root=demo"]),
        (["--ro", "x", "config"], ["config", "--ro", "x"]),  # argparse's abbreviation
        (
            ["--python", "/p", "--config", "c.yaml", "backlog", "--json"],
            ["backlog", "--python", "/p", "--config", "c.yaml", "--json"],
        ),
        (["nightly", "--results", "demo"], ["nightly", "--results", "demo"]),
        (["--version"], ["--version"]),
        (["--root", "x", "nosuch"], ["nosuch", "--root", "x"]),  # argparse says what is wrong
    ],
)
def test_global_options_before_the_command_move_after_it(
    argv: list[str], hoisted: list[str]
) -> None:
    assert _hoist(argv)[0] == hoisted


def test_a_global_option_before_an_unknown_command_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--root", "x", "nosuch"])
    assert exited.value.code == 2
    assert "invalid choice: 'nosuch'" in capsys.readouterr().err


def test_a_global_option_before_the_command_is_used_and_one_after_wins(
    capsys: pytest.CaptureFixture[str], tmp_path
) -> None:
    assert main(["--state-dir", str(tmp_path / "a"), "config", "--json"]) == 0
    assert str(tmp_path / "a") in capsys.readouterr().out
    args = ["--state-dir", str(tmp_path / "a"), "config", "--json", "--state-dir", str(tmp_path)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f'"value": "{tmp_path}"' in out and str(tmp_path / "a") not in out


def test_global_options_before_doit_become_its_variables(
    capsys: pytest.CaptureFixture[str], sandbox_tree, tmp_path
) -> None:
    state = str(tmp_path / "state")
    assert main(["--root", str(sandbox_tree), "--state-dir", state, "doit", "list"]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines()[0] == f"root: {sandbox_tree} (root=)"
    assert "migrate_op" in captured.out
    assert (tmp_path / "state" / "doit.sqlite").is_file()


def test_an_abbreviated_global_option_is_refused_not_guessed(
    capsys: pytest.CaptureFixture[str], tmp_path
) -> None:
    # issue 28: prefix matching turned `speed --op atan2` into `--opinfo-table atan2`
    with pytest.raises(SystemExit) as refused:
        main(["--state", str(tmp_path), "config", "--json"])
    assert refused.value.code == 2
    assert "--state" in capsys.readouterr().err
    assert main(["--state-dir", str(tmp_path), "config", "--json"]) == 0
