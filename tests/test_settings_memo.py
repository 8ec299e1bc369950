"""pipeline/workspace.py's load(): each doit run's settings, resolved once and then taken
from the state folder while nothing the resolution looked at changed; never once one did.

``load_settings`` is counted to tell a resolution from a memo. A memo is only saved for
files still for a while (fsio.racy): the tests widen that to 300 ms and sleep past it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import pipeline.config
from pipeline import fsio, workspace
from pipeline.config import load_settings
from tests.conftest import outside_a_checkout

WAIT_NS = 300_000_000  # the in-process tests' fsio.RACY_NS: far above a file system's tick


def count_resolutions(monkeypatch: pytest.MonkeyPatch) -> Callable[[], int]:
    """Count the full resolutions (``pipeline.config.load_settings`` calls) from now on, with
    fsio's racy window widened to WAIT_NS; the count so far."""
    calls = [0]
    real = pipeline.config.load_settings

    def counting(*args: object, **kwargs: object) -> pipeline.config.Settings:
        calls[0] += 1
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pipeline.config, "load_settings", counting)
    monkeypatch.setattr(fsio, "RACY_NS", WAIT_NS)
    return lambda: calls[0]


class Loads:
    def __init__(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        self.resolutions = count_resolutions(monkeypatch)
        monkeypatch.chdir(tmp_path)
        self.state = tmp_path / "state"
        self.state.mkdir()

    def __call__(self, **given: str) -> tuple[pipeline.config.Settings, bool]:
        before = self.resolutions()
        overrides = {"state_dir": str(self.state), **given}
        settings = workspace.load(overrides, via="doit", cwd=Path.cwd())
        return settings, self.resolutions() > before

    def warm(self, **given: str) -> pipeline.config.Settings:
        time.sleep(WAIT_NS / 1e9 + 0.05)
        self(**given)  # resolves (the files were too new to trust) and remembers
        settings, resolved = self(**given)
        assert not resolved
        return settings


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Loads:
    for name in [k for k in os.environ if k.startswith("MPS_PIPELINE_")]:
        monkeypatch.delenv(name)
    return Loads(monkeypatch, tmp_path)


def test_the_memo_is_the_resolution_itself(
    loads: Loads, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "mine.yaml"
    config.write_text(
        "lock_wait: 12.5\nrunners: {macos-m1-14: '14.0', macos-m2-15: null}\n"
        "math:\n  known: [{op: atan2, dtype: float16, reason: rounding}]\n"
    )
    monkeypatch.setenv("MPS_PIPELINE_CONFIG", str(config))
    given = {"root": "sandbox"}
    fresh, resolved = loads(**given)
    assert resolved
    remembered = loads.warm(**given)
    assert remembered == fresh  # every compared field
    # and those equality leaves out: every value with its origin, what was looked at
    assert remembered.sources == fresh.sources and remembered.looked_at == fresh.looked_at
    assert type(remembered.sources).__name__ == "mappingproxy"
    assert remembered.build_command == fresh.build_command  # a tuple stays one
    memo = loads.state / "cache" / workspace.MEMO.format(via="doit")
    assert json.loads(memo.read_text())["witness"]["overrides"] == [
        ["root", "sandbox"], ["state_dir", str(loads.state)]
    ]  # fmt: skip
    direct = load_settings({"state_dir": str(loads.state), **given}, via="doit")
    assert remembered == direct


def test_a_changed_config_file_is_read_again(
    loads: Loads, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "mine.yaml"
    config.write_text("lock_wait: 30\n")
    monkeypatch.setenv("MPS_PIPELINE_CONFIG", str(config))
    assert loads.warm().lock_wait == 30
    config.write_text("lock_wait: 31\n")  # same size
    settings, resolved = loads()
    assert resolved and settings.lock_wait == 31


@pytest.mark.parametrize("how", ["a variable", "another directory", "another override"])
def test_another_resolution_is_never_taken_from_the_memo(
    loads: Loads, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, how: str
) -> None:
    loads.warm()
    given: dict[str, str] = {}
    if how == "a variable":
        monkeypatch.setenv("MPS_PIPELINE_LOCK_WAIT", "7")
    elif how == "another directory":
        (tmp_path / "sub").mkdir()
        monkeypatch.chdir(tmp_path / "sub")
    else:
        given = {"build_dir": "out"}
    settings, resolved = loads(**given)
    assert resolved
    assert settings == load_settings({"state_dir": str(loads.state), **given}, via="doit")


def test_a_damaged_memo_is_resolved_again(loads: Loads) -> None:
    loads.warm()
    memo = loads.state / "cache" / workspace.MEMO.format(via="doit")
    doc = json.loads(memo.read_text())
    doc["settings"]["fields"]["root"] = {"class": "NoSuch", "fields": {}}
    memo.write_text(json.dumps(doc))
    settings, resolved = loads()
    assert resolved and settings.is_sandbox
    memo.write_text("{not json")
    assert loads()[1]
    loads.warm()
    doc = json.loads(memo.read_text())
    for damage in ({"files": "x"}, {"unknown": 1}, {"via": None}):
        memo.write_text(json.dumps({**doc, "witness": {**doc["witness"], **damage}}))
        assert loads()[1], damage  # a witness of another shape is no witness


def test_values_json_would_change_are_never_remembered() -> None:
    with pytest.raises(TypeError):
        workspace._encode(object())
    nan = float("nan")
    encoded = workspace._encode((nan,))
    # NaN is no NaN's equal: the round trip check refuses it, and the memo is not written
    assert workspace._encode(workspace._decode(json.loads(json.dumps(encoded)))) != encoded


def test_a_status_is_trusted_after_its_file_systems_step() -> None:
    now = 1_700_000_000_123_456_789
    fine = [0o100644, 1, 2, 3, now - 60_000_000, now - 60_000_000]  # ns stamps, 60 ms ago
    assert not fsio.racy(fine, now) and fsio.racy(fine, now - 20_000_000)
    # whole-second stamps (HFS+, ext3): a change 1.5 s ago may be followed in its second
    second = (now // 10**9 - 1) * 10**9
    coarse = [0o100644, 1, 2, 3, second, second]
    assert fsio.racy(coarse, second + 1_500_000_000)
    assert not fsio.racy(coarse, second + 2_100_000_000)
    # a symlink is as recent as the newer of itself and its target
    assert fsio.racy([*fine, *fine[:4], now, now], now)


def test_the_sandboxs_default_state_folder_keeps_the_memo(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # outside any checkout, with no state_dir: the memo is in the user's state folder (the
    # bundled sandbox's), found there again, and nothing is written to the current directory
    here, home = outside_a_checkout(monkeypatch, tmp_path)
    resolutions = count_resolutions(monkeypatch)
    settings = workspace.load({}, via="doit", cwd=here)
    assert settings.is_sandbox and settings.state_dir == home / "mps-pipeline"
    settings.state_dir.mkdir(parents=True)  # as the first doit run makes it
    time.sleep(WAIT_NS / 1e9 + 0.05)
    workspace.load({}, via="doit", cwd=here)  # remembers
    assert (settings.cache_dir / workspace.MEMO.format(via="doit")).is_file()
    before = resolutions()
    assert workspace.load({}, via="doit", cwd=here) == settings
    assert resolutions() == before
    # another state home is another resolution
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "other"))
    assert workspace.load({}, via="doit", cwd=here).state_dir == tmp_path / "other/mps-pipeline"
    assert resolutions() == before + 1
    assert list(here.iterdir()) == []
