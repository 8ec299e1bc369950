"""Settings: precedence, validation errors that name the key, the sandbox default."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline import sandbox
from pipeline.config import load_raw, load_settings
from pipeline.errors import ConfigError
from pipeline.workspace import prepare


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pipeline.yaml"
    path.write_text(text)
    return path


def test_bundled_config_is_valid_and_defaults_to_the_sandbox(tmp_path: Path) -> None:
    raw = load_raw()
    assert raw["root"] == "sandbox"
    settings = prepare(load_settings({"state_dir": str(tmp_path / "state")}, env={}, cwd=tmp_path))
    assert settings.is_sandbox
    assert settings.root == tmp_path / "state" / "sandbox"
    assert (settings.root / "aten/src/ATen/native/native_functions.yaml").is_file()
    assert settings.opinfo_table == settings.root / sandbox.OPINFO_TABLE
    assert settings.build_command[-1] == "torch_cpu"
    assert str(settings.build_dir) in settings.build_command


def test_unknown_key_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown config key 'rot'.*known keys: .*root"):
        load_raw(_write(tmp_path, "rot: /x\n"))
    with pytest.raises(ConfigError, match=r"unknown config key 'test\.kind'") as raised:
        load_raw(_write(tmp_path, "test:\n  kind: [output_match]\n"))
    # the message names the file and the key meant
    assert str(raised.value).startswith(str(tmp_path))
    assert "(did you mean 'test.kinds'?)" in str(raised.value)


def test_wrong_type_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'test\.timeout' must be int or float, got str"):
        load_raw(_write(tmp_path, "test:\n  timeout: soon\n"))


def test_bad_test_kind_and_bad_yaml(tmp_path: Path) -> None:
    path = _write(tmp_path, "test:\n  kinds: [output_match, speed]\n")
    with pytest.raises(ConfigError, match=r"'test\.kinds': 'speed'"):
        load_settings(config_path=path, env={}, cwd=tmp_path)
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_raw(_write(tmp_path, "root: [unclosed\n"))


def test_precedence_override_beats_env_beats_file(tmp_path: Path) -> None:
    a, b, c = (tmp_path / n for n in "abc")
    for d in (a, b, c):
        d.mkdir()
    path = _write(tmp_path, f"root: {a}\n")
    env = {"MPS_PIPELINE_ROOT": str(b), "MPS_PIPELINE_PYTHON": "/opt/py/bin/python"}
    assert load_settings(config_path=path, env={}, cwd=tmp_path).root == a
    from_env = load_settings(config_path=path, env=env, cwd=tmp_path)
    assert from_env.root == b
    assert from_env.python == "/opt/py/bin/python"
    assert load_settings({"root": str(c)}, config_path=path, env=env, cwd=tmp_path).root == c


def test_missing_root_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="point root= at a PyTorch checkout"):
        load_settings({"root": str(tmp_path / "nope")}, env={}, cwd=tmp_path)


def test_only_some_keys_can_be_overridden(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot override config key 'runners'"):
        load_settings({"runners": "x"}, env={}, cwd=tmp_path)
