"""The CLI audit's witness (pipeline/flows/audit_replay.py): a warm `mps-pipeline audit` writes the
last output before resolving its settings, and never once anything it rests on changed.

In-process runs count whether the settings were resolved (``load_settings`` called: the
full path); the subprocess test reads ``-X importtime``. A witness is only saved for paths
still for a while (:func:`pipeline.fsio.racy`); the in-process tests widen that to 300 ms,
so that "just changed" holds on a loaded machine too, and sleep past it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import pipeline.config
from pipeline.__main__ import main
from pipeline.flows import audit_replay as replay
from tests.conftest import outside_a_checkout
from tests.test_settings_memo import WAIT_NS, count_resolutions

REPO = Path(__file__).parents[2]
COMMON_MPS = "torch/testing/_internal/common_mps.py"
KERNELS = "aten/src/ATen/native/mps/kernels"


class Runs:
    """``mps-pipeline audit atan2 --state-dir STATE [extra]`` in this process: exit status,
    stdout, stderr, and whether the settings were resolved (the full path)."""

    def __init__(self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                 state: Path) -> None:  # fmt: skip
        self.capsys, self.state = capsys, state
        self.resolutions = count_resolutions(monkeypatch)

    def __call__(self, *extra: str) -> tuple[int, str, str, bool]:
        before = self.resolutions()
        code = main(["audit", "atan2", "--state-dir", str(self.state), *extra])
        out, err = self.capsys.readouterr()
        return code, out, err, self.resolutions() > before

    def still(self, *extra: str) -> tuple[int, str, str]:
        """Let the tree be still past RACY_NS, then run until the witness replays; that
        replay's output."""
        time.sleep(WAIT_NS / 1e9 + 0.05)
        self(*extra)  # the digest replay (or a render): it saves the witness
        code, out, err, resolved = self(*extra)
        assert not resolved, "a still tree did not replay before resolving its settings"
        return code, out, err


@pytest.fixture
def runs(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
         tmp_path: Path) -> Runs:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    for name in [k for k in os.environ if k.startswith("MPS_PIPELINE_")]:
        monkeypatch.delenv(name)
    return Runs(capsys, monkeypatch, tmp_path / "state")


def test_a_still_tree_replays_the_same_bytes_and_exit_status(runs: Runs) -> None:
    first = runs()
    assert first[0] == 1 and first[3]  # rendered: the checklist fails before the migration
    assert "✗ no MPSGraph implementation left" in first[1]
    assert first[2].startswith("root: the bundled sandbox")
    assert runs.still() == first[:3]
    saved = json.loads((runs.state / "ops/atan2" / replay.SCREEN.format(kind="cli")).read_text())
    assert saved["witness"]["argv"] == ["audit", "atan2", "--state-dir", str(runs.state)]
    watched = {path for path, _ in saved["witness"]["files"]}
    assert str(runs.state / "sandbox" / COMMON_MPS) in watched
    assert str(runs.state / "sandbox" / KERNELS) in watched  # its listing
    assert str(Path(pipeline.config.__file__)) in watched  # the code


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


# What a change does to the tree or the run, and whether the audit's output shows it.
CHANGES: dict[str, tuple[Callable[[Path], None], bool]] = {
    # same size, same second: only the status's mtime/ctime (and content) differ
    "a tree file's content": (
        lambda s: _edit(s / "sandbox" / COMMON_MPS, '"atan2"', '"atan3"'), True
    ),
    "a new file in a folder the digest lists": (
        lambda s: (s / "sandbox" / KERNELS / "New.metal").write_text("// new\n"), False
    ),
    "a file removed": (
        lambda s: (s / "sandbox" / KERNELS / "BinaryKernel.metal").unlink(), True
    ),
    "a file replaced by a copy with its old mtime": (
        lambda s: _replace_keeping_mtime(s / "sandbox" / COMMON_MPS), False
    ),
}  # fmt: skip


def _replace_keeping_mtime(path: Path) -> None:
    st = path.stat()
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(path.read_bytes())
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp, path)


@pytest.mark.parametrize("change", CHANGES)
def test_a_changed_input_is_never_replayed_by_the_witness(runs: Runs, change: str) -> None:
    runs()
    warm = runs.still()
    make, shows = CHANGES[change]
    make(runs.state)
    code, out, err, resolved = runs()
    assert resolved, f"{change}: replayed although the tree changed"
    assert (out != warm[1]) == shows
    # the output is what a render of the tree as it is now prints
    (runs.state / "ops/atan2" / replay.SCREEN.format(kind="cli")).unlink()
    assert runs()[:3] == (code, out, err)


def test_a_changed_config_file_resolves_the_settings_again(runs: Runs, tmp_path: Path) -> None:
    config = tmp_path / "mine.yaml"
    config.write_text("lock_wait: 30\n")
    runs("--config", str(config))
    warm = runs.still("--config", str(config))
    config.write_text("lock_wait: 31\n")  # same size
    code, out, err, resolved = runs("--config", str(config))
    assert resolved and (code, out, err) == warm
    config.write_text("lock_wait: -1\n")  # a bad value: the error, not the last output
    code, out, err, resolved = runs("--config", str(config))
    assert resolved and code == 2 and "lock_wait" in err and out == ""


def test_a_checkout_config_file_edited_or_appearing_is_read(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # standing in a checkout (a sandbox copy), which names its OpInfo table in its own
    # config file, as the demo does: the state folder is inside it
    main(["audit", "atan2", "--state-dir", str(tmp_path / "first")])
    checkout = tmp_path / "first" / "sandbox"
    config = checkout / ".mps-pipeline.yaml"
    config.write_text("opinfo_table: torch/testing/_internal/opinfo_table.yaml\n")
    monkeypatch.chdir(checkout)
    runs = Runs(capsys, monkeypatch, checkout / ".mps-pipeline")
    capsys.readouterr()

    def audit() -> tuple[int, str, str, bool]:
        before = runs.resolutions()
        code = main(["audit", "atan2"])
        out, err = capsys.readouterr()
        return code, out, err, runs.resolutions() > before

    def warm() -> tuple[int, str, str]:
        time.sleep(WAIT_NS / 1e9 + 0.05)
        audit()  # the digest replay saves the witness
        code, out, err, resolved = audit()
        assert not resolved
        return code, out, err

    first = audit()
    assert "the PyTorch checkout containing the current directory" in first[2]
    assert warm() == first[:3]
    # a second config file appears beside it: the settings refuse both, never replay
    pyproject = checkout / "pyproject.toml"
    pyproject.write_text("[tool.mps-pipeline]\nlock_wait = 3\n")
    code, out, err, resolved = audit()
    assert resolved and code == 2 and "two config files" in err and out == ""
    pyproject.unlink()
    assert warm() == first[:3]
    with config.open("a") as fh:
        fh.write("state_dir: elsewhere\n")
    code, out, err, resolved = audit()
    assert resolved and (code, out) == first[:2]
    assert (checkout / "elsewhere" / "ops" / "atan2").is_dir()  # the new state folder


@pytest.mark.parametrize(
    "how", ["another directory", "a settings variable", "another width", "other words"]
)
def test_another_run_is_never_replayed_by_the_witness(
    runs: Runs, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, how: str
) -> None:
    runs()
    warm = runs.still()
    extra: tuple[str, ...] = ()
    if how == "another directory":
        (tmp_path / "sub").mkdir()
        monkeypatch.chdir(tmp_path / "sub")
    elif how == "a settings variable":
        monkeypatch.setenv("MPS_PIPELINE_LOCK_WAIT", "5")
    elif how == "another width":
        monkeypatch.setenv("COLUMNS", "91")
    else:
        extra = ("--root", "sandbox")
    code, out, err, resolved = runs(*extra)
    assert resolved and (code, out) == warm[:2]


def test_no_witness_is_saved_for_a_tree_that_just_changed(runs: Runs) -> None:
    runs()
    runs.still()
    _edit(runs.state / "sandbox" / COMMON_MPS, '"atan2"', '"atan3"')
    runs()  # renders; the edit is younger than RACY_NS: no witness
    saved = json.loads((runs.state / "ops/atan2" / replay.SCREEN.format(kind="cli")).read_text())
    assert "witness" not in saved
    assert runs()[3]  # the digest replay (settings resolved), not the witness


def test_json_and_other_command_lines_never_replay(runs: Runs) -> None:
    runs()
    runs.still()
    assert replay.cli_saved(["audit", "atan2", "--state-dir", str(runs.state), "--json"]) is None
    assert replay.cli_saved(["audit", "--state-dir", str(runs.state)]) is None
    assert replay.cli_saved(["audit", "../atan2", "--state-dir", str(runs.state)]) is None
    assert replay.cli_saved(["audit", "atan2", "--state-dir", str(runs.state)]) is not None


@pytest.mark.slow
def test_the_warm_cli_imports_neither_settings_yaml_nor_argparse(tmp_path: Path) -> None:
    """The real process, the real wait: once the tree is still, the replay runs before
    anything of the settings is imported, and says the same bytes."""
    state = tmp_path / "state"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env = {k: v for k, v in env.items() if not k.startswith("MPS_PIPELINE_")}

    def cli() -> tuple[subprocess.CompletedProcess[str], set[str]]:
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "pipeline", "audit", "atan2",
             "--state-dir", str(state)],
            capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env,
        )  # fmt: skip
        lines = proc.stderr.splitlines()
        imported = {x.split("|")[-1].strip() for x in lines if x.startswith("import time:")}
        proc.stderr = "".join(f"{x}\n" for x in lines if not x.startswith("import time:"))
        return proc, imported

    first, _ = cli()
    assert first.returncode == 1
    time.sleep(2.1)  # past the wait of a file system with whole-second times too
    cli()  # the digest replay saves the witness
    warm, imported = cli()
    assert (warm.returncode, warm.stdout, warm.stderr) == (1, first.stdout, first.stderr)
    assert not {"pipeline.config", "yaml", "argparse", "rich", "pipeline.errors"} & imported
    # a tree file edited: the full path, which shows it
    common = state / "sandbox" / COMMON_MPS
    common.write_text(common.read_text().replace('"atan2"', '"atan3"'))
    changed, imported = cli()
    assert "pipeline.config" in imported and changed.stdout != first.stdout


def test_outside_a_checkout_the_witness_is_in_the_sandboxs_state_folder(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # no --state-dir and no checkout around: the bundled sandbox's state is the user's state
    # folder, where the warm audit finds its saved output; the current directory gets nothing
    here, home = outside_a_checkout(monkeypatch, tmp_path)
    resolutions = count_resolutions(monkeypatch)
    first = main(["audit", "atan2"]), capsys.readouterr()
    time.sleep(WAIT_NS / 1e9 + 0.05)
    main(["audit", "atan2"])  # saves the witness
    capsys.readouterr()
    before = resolutions()
    again = main(["audit", "atan2"]), capsys.readouterr()
    assert resolutions() == before, "not replayed from the sandbox's state folder"
    assert again == first and first[0] == 1
    assert (home / "mps-pipeline" / "ops/atan2" / replay.SCREEN.format(kind="cli")).is_file()
    assert list(here.iterdir()) == []
