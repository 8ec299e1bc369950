"""Settings: the sources and their order, every environment form, the checkout you stand in,
validation errors that name the key, `mps-pipeline config`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pipeline import sandbox
from pipeline.__main__ import main
from pipeline.config import TYPES, defaults, env_var, load_settings, read_file
from pipeline.errors import ConfigError
from pipeline.sections import Key
from pipeline.tree import paths
from pipeline.workspace import prepare


def _write(folder: Path, text: str, name: str = "pipeline.yaml") -> Path:
    path = folder / name
    path.write_text(text)
    return path


def _checkout(folder: Path, *, git: bool = False) -> Path:
    """A folder that passes for a PyTorch checkout: it has native_functions.yaml."""
    yaml_file = folder / paths.NATIVE_YAML
    yaml_file.parent.mkdir(parents=True)
    yaml_file.write_text("- func: abs(Tensor self) -> Tensor\n")
    if git:
        subprocess.run(["git", "init", "-q", str(folder)], check=True)
    return folder


def test_a_key_is_written_as_its_dotted_name() -> None:
    # messages, `config`'s listing and the settings memo print keys: never "Key.TEST_KINDS"
    key = Key.TEST_KINDS
    assert (str(key), f"{key}", f"{key:<12}|", key.upper()) == (
        "test.kinds", "test.kinds", "test.kinds  |", "TEST.KINDS",
    )  # fmt: skip
    assert json.dumps({key: [key]}) == '{"test.kinds": ["test.kinds"]}'
    assert {"test.kinds": 1}[key] == 1 and Key("test.kinds") is key
    assert TYPES[key] == (list,) and env_var(key) == "MPS_PIPELINE_TEST_KINDS"


def test_packaged_defaults_cover_every_key_and_default_to_the_sandbox(tmp_path: Path) -> None:
    assert set(defaults()) == set(TYPES)
    settings = prepare(load_settings({"state_dir": str(tmp_path / "state")}, env={}, cwd=tmp_path))
    assert settings.is_sandbox
    assert settings.sources["root"].origin.startswith("default: no PyTorch checkout")
    assert settings.root == tmp_path / "state" / "sandbox"
    assert (settings.root / paths.NATIVE_YAML).is_file()
    assert settings.opinfo_table == settings.root / sandbox.OPINFO_TABLE
    assert settings.build_command[-1] == "torch_cpu"
    assert str(settings.build_dir) in settings.build_command
    # without state_dir, the sandbox's state lives in the user's state folder, never in the
    # current directory (issue 28: it is no checkout)
    home = tmp_path / "home"
    default = load_settings(env={"HOME": str(home)}, cwd=tmp_path)
    assert default.state_dir == home / ".local" / "state" / "mps-pipeline"
    assert default.sources["state_dir"].origin.startswith("default: the bundled sandbox's, ")
    xdg = tmp_path / "xdg"
    env = {"HOME": str(home), "XDG_STATE_HOME": str(xdg)}
    assert load_settings(env=env, cwd=tmp_path).state_dir == xdg / "mps-pipeline"
    # a relative XDG_STATE_HOME is ignored, as the XDG spec says
    relative = {"HOME": str(home), "XDG_STATE_HOME": "xdg"}
    assert load_settings(env=relative, cwd=tmp_path).state_dir == default.state_dir
    # the state_dir setting still wins over both
    named = {**env, "MPS_PIPELINE_STATE_DIR": "mine"}
    assert load_settings(env=named, cwd=tmp_path).state_dir == tmp_path / "mine"


def test_unknown_key_is_named_with_the_key_meant(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown config key 'rot'.*known keys: .*root"):
        read_file(_write(tmp_path, "rot: /x\n"))
    with pytest.raises(ConfigError, match=r"unknown config key 'test\.kind'") as raised:
        read_file(_write(tmp_path, "test:\n  kind: [output_match]\n"))
    assert str(raised.value).startswith(str(tmp_path))  # the file is named
    assert "(did you mean 'test.kinds'?)" in str(raised.value)


def test_wrong_type_bad_kind_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'test\.timeout' must be int or float, got str"):
        read_file(_write(tmp_path, "test:\n  timeout: soon\n"))
    with pytest.raises(ConfigError, match=r"'python' must be str or null, got int"):
        read_file(_write(tmp_path, "python: 3\n"))
    path = _write(tmp_path, "test:\n  kinds: [output_match, speed]\n")
    with pytest.raises(ConfigError, match=r"'test\.kinds' \(.*pipeline\.yaml\): 'speed'"):
        load_settings(config_path=path, env={}, cwd=tmp_path)
    with pytest.raises(ConfigError, match="not valid YAML"):
        read_file(_write(tmp_path, "root: [unclosed\n"))


def test_precedence_flag_env_file_checkout_sandbox(tmp_path: Path) -> None:
    """flag > environment > config file > the checkout containing cwd > the sandbox."""
    a, b, c = (_checkout(tmp_path / n) for n in "abc")
    standing_in = _checkout(tmp_path / "here") / "aten" / "src"
    path = _write(tmp_path, f"root: {a}\n")
    env = {"MPS_PIPELINE_ROOT": str(b)}

    def resolved(overrides: dict | None, env: dict, config: Path | None) -> tuple[Path, str]:
        s = load_settings(overrides, config_path=config, env=env, cwd=standing_in)
        return s.root, s.sources["root"].origin

    assert resolved({"root": str(c)}, env, path) == (c, "--root")
    assert resolved(None, env, path) == (b, "MPS_PIPELINE_ROOT")
    assert resolved(None, {}, path) == (a, str(path))
    here = tmp_path / "here"
    assert resolved(None, {}, None) == (
        here,
        "the PyTorch checkout containing the current directory",
    )
    outside = load_settings(env={}, cwd=tmp_path)
    assert outside.is_sandbox
    # a doit variable is named as one
    doit = load_settings({"root": str(c)}, via="doit", env={}, cwd=tmp_path)
    assert doit.sources["root"].origin == "root="
    # root=sandbox is the sandbox even when standing in a checkout
    assert load_settings({"root": "sandbox"}, env={}, cwd=standing_in).is_sandbox


def test_every_key_from_the_environment(tmp_path: Path) -> None:
    env = {
        "MPS_PIPELINE_GITHUB_API_URL": "http://127.0.0.1:9/api",
        "MPS_PIPELINE_TEST_KINDS": "output_match,output_grad_match",
        "MPS_PIPELINE_TEST_PYTEST_ARGS": "-x  --maxfail 2",
        "MPS_PIPELINE_RUNNERS": "macos-m1-14, macos-m4-26",
        "MPS_PIPELINE_LOCK_WAIT": "2.5",
        "MPS_PIPELINE_TEST_TIMEOUT": "60",
        "MPS_PIPELINE_BUILD_COMMAND": "make torch_cpu",
        "MPS_PIPELINE_PYTHON": "",  # empty: unset, as ${VAR:-default}
    }
    s = load_settings(env=env, cwd=tmp_path)
    assert s.github.api_url == "http://127.0.0.1:9/api"
    assert s.test_kinds == ("output_match", "output_grad_match")
    assert s.pytest_args == ("-x", "--maxfail", "2")
    assert s.runners == ("macos-m1-14", "macos-m4-26")
    assert s.lock_wait == 2.5 and s.test_timeout == 60
    assert s.build_command == ("make", "torch_cpu")
    assert s.sources["github.api_url"].origin == "MPS_PIPELINE_GITHUB_API_URL"
    assert s.sources["python"].origin.startswith("default")
    # every key has its variable, named by section and key
    assert {env_var(k) for k in TYPES} >= {"MPS_PIPELINE_ROOT", "MPS_PIPELINE_GITHUB_BOT_LOGIN"}
    with pytest.raises(ConfigError, match=r"MPS_PIPELINE_LOCK_WAIT='soon': 'lock_wait' must"):
        load_settings(env={"MPS_PIPELINE_LOCK_WAIT": "soon"}, cwd=tmp_path)
    with pytest.raises(ConfigError, match=r"'test.kinds' \(MPS_PIPELINE_TEST_KINDS\): 'x'"):
        load_settings(env={"MPS_PIPELINE_TEST_KINDS": "x"}, cwd=tmp_path)


def test_an_unknown_variable_is_a_warning_with_the_name_meant(tmp_path: Path) -> None:
    env = {"MPS_PIPELINE_TEST_KIND": "output_match", "MPS_PIPELINE_REF": "abc"}
    s = load_settings(env=env, cwd=tmp_path)
    assert s.warnings == (
        "MPS_PIPELINE_TEST_KIND is not an mps-pipeline setting "
        "(did you mean MPS_PIPELINE_TEST_KINDS?); it is ignored",
    )


def test_the_checkout_config_file_and_pyproject_table(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path / "pytorch")
    sub = checkout / "aten" / "src"
    _write(checkout, "github:\n  repo: me/pytorch\n", ".mps-pipeline.yaml")
    s = load_settings(env={}, cwd=sub)
    assert s.github.repo == "me/pytorch"
    assert s.sources["github.repo"].origin == str(checkout / ".mps-pipeline.yaml")
    assert s.state_dir == checkout / ".mps-pipeline"  # results stay with the tree

    (checkout / ".mps-pipeline.yaml").unlink()
    _write(
        checkout,
        '[project]\nname = "torch"\n[tool.mps-pipeline.test]\nkinds = ["output_grad_match"]\n',
        "pyproject.toml",
    )
    s = load_settings(env={}, cwd=sub)
    assert s.test_kinds == ("output_grad_match",)
    assert s.sources["test.kinds"].origin.endswith("pyproject.toml [tool.mps-pipeline]")

    _write(checkout, "lock_wait: 1\n", ".mps-pipeline.yaml")
    with pytest.raises(ConfigError, match="two config files"):
        load_settings(env={}, cwd=sub)
    # a file named by --config or MPS_PIPELINE_CONFIG replaces the checkout's
    other = _write(tmp_path, "lock_wait: 7\n")
    assert load_settings(config_path=other, env={}, cwd=sub).lock_wait == 7
    assert load_settings(env={"MPS_PIPELINE_CONFIG": str(other)}, cwd=sub).lock_wait == 7
    with pytest.raises(ConfigError, match=r"MPS_PIPELINE_CONFIG=.*nope.yaml: no such config"):
        load_settings(env={"MPS_PIPELINE_CONFIG": str(tmp_path / "nope.yaml")}, cwd=sub)


def test_relative_paths_are_relative_to_where_they_were_set(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path / "trees" / "pytorch")
    config = _write(tmp_path / "trees", "root: pytorch\nstate_dir: state\n")
    s = load_settings(config_path=config, env={}, cwd=tmp_path)
    assert s.root == checkout and s.state_dir == tmp_path / "trees" / "state"
    s = load_settings({"state_dir": "mine"}, config_path=config, env={}, cwd=tmp_path)
    assert s.state_dir == tmp_path / "mine"


def test_the_math_cache_defaults_to_the_users_and_may_be_named(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path / "trees" / "pytorch")
    home = tmp_path / "home"
    s = load_settings({"root": str(checkout)}, env={"HOME": str(home)}, cwd=tmp_path)
    # every checkout and state dir of the user shares it; op_db's dump stays in the state dir
    assert s.math_cache == home / ".cache/mps-pipeline/math" and s.tree.answers_cache is None
    assert s.math.cache is None and s.sources["math.cache"].value == str(s.math_cache)
    assert s.sources["math.cache"].origin.startswith("default: the user's cache, ")
    xdg = {"HOME": str(home), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    s = load_settings({"root": str(checkout)}, env=xdg, cwd=tmp_path)
    assert s.math_cache == tmp_path / "xdg/mps-pipeline/math"
    # a relative XDG_CACHE_HOME is ignored, as the XDG spec says
    relative = {"HOME": str(home), "XDG_CACHE_HOME": "xdg"}
    s = load_settings({"root": str(checkout)}, env=relative, cwd=tmp_path)
    assert s.math_cache == home / ".cache/mps-pipeline/math"
    config = _write(tmp_path / "trees", "root: pytorch\nmath:\n  cache: ~/shared\n")
    s = load_settings(config_path=config, env={}, cwd=tmp_path)
    assert s.math_cache == Path("~/shared").expanduser().resolve()
    config = _write(tmp_path / "trees", "root: pytorch\nmath:\n  cache: shared\n")
    s = load_settings(config_path=config, env={}, cwd=tmp_path)
    assert s.math_cache == tmp_path / "trees" / "shared"  # beside the file that set it
    s = load_settings(config_path=config, env={"MPS_PIPELINE_MATH_CACHE": "c"}, cwd=tmp_path)
    assert s.math_cache == tmp_path / "c"  # a variable is relative to the working directory
    assert s.tree.answers_cache == s.math_cache  # so named, op_db's dump is kept there too
    with pytest.raises(ConfigError, match="math.cache"):
        load_settings(config_path=_write(tmp_path, "math:\n  cache: 3\n"), env={}, cwd=tmp_path)


def test_a_root_that_is_not_a_checkout_says_so(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="point root= at a PyTorch checkout"):
        load_settings({"root": str(tmp_path / "nope")}, env={}, cwd=tmp_path)
    settings = load_settings(env={"MPS_PIPELINE_ROOT": str(tmp_path)}, cwd=tmp_path)
    with pytest.raises(
        ConfigError,
        match=rf"^{tmp_path} is not a PyTorch checkout: no aten/src/ATen/native/"
        r"native_functions.yaml \(set by MPS_PIPELINE_ROOT\)",
    ):
        prepare(settings)


def test_only_some_keys_can_be_overridden(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot override config key 'runners'"):
        load_settings({"runners": "x"}, env={}, cwd=tmp_path)


def test_the_state_dir_is_kept_out_of_git(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path / "pytorch", git=True)
    settings = prepare(load_settings(env={}, cwd=checkout))
    settings.state_dir.mkdir()
    (settings.state_dir / "doit.sqlite").write_text("x")
    exclude = checkout / ".git" / "info" / "exclude"
    assert "/.mps-pipeline/" in exclude.read_text().splitlines()
    status = subprocess.run(
        ["git", "-C", str(checkout), "status", "--porcelain"], capture_output=True, text=True
    ).stdout
    assert ".mps-pipeline" not in status and "aten/" in status
    # once only
    (settings.state_dir).rename(checkout / "moved")
    prepare(load_settings(env={}, cwd=checkout))
    assert exclude.read_text().count("/.mps-pipeline/") == 1


def test_config_command_lists_every_setting_with_its_origin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    checkout = _checkout(tmp_path / "pytorch")
    _write(checkout, "github:\n  repo: me/pytorch\n", ".mps-pipeline.yaml")
    monkeypatch.chdir(checkout / "aten")
    for var in [v for v in __import__("os").environ if v.startswith("MPS_PIPELINE_")]:
        monkeypatch.delenv(var)
    monkeypatch.setenv("MPS_PIPELINE_GITHUB_API_URL", "http://127.0.0.1:1")
    assert main(["config", "--json", "--python", "/opt/py"]) == 0
    out = json.loads(capsys.readouterr().out)
    settings = out["settings"]
    assert set(settings) == set(TYPES)
    assert settings["root"] == {
        "value": str(checkout),
        "origin": "the PyTorch checkout containing the current directory",
    }
    assert settings["github.repo"]["origin"] == str(checkout / ".mps-pipeline.yaml")
    assert settings["github.api_url"] == {
        "value": "http://127.0.0.1:1",
        "origin": "MPS_PIPELINE_GITHUB_API_URL",
    }
    assert settings["python"] == {"value": "/opt/py", "origin": "--python"}
    assert settings["test.kinds"] == {"value": ["output_match"], "origin": "default"}

    assert main(["config"]) == 0
    captured = capsys.readouterr()
    text = captured.out.splitlines()
    # on stderr, as every command says it (issue 19)
    assert captured.err.splitlines()[0] == (
        f"root: {checkout} (the PyTorch checkout containing the current directory)"
    )
    assert not any(line.startswith("root: ") for line in text)
    assert any(
        line.startswith("github.api_url") and "(MPS_PIPELINE_GITHUB_API_URL)" in line
        for line in text
    )


def test_every_command_says_which_tree_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MPS_PIPELINE_ROOT", raising=False)
    assert main(["audit", "atan2", "--json"]) in (0, 1)
    captured = capsys.readouterr()
    assert captured.err.splitlines()[0].startswith("root: the bundled sandbox, working copy")
    assert json.loads(captured.out)["op"] == "atan2"  # stdout stays JSON


def test_the_example_user_config_is_valid(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[1] / "configs" / "mps-pipeline.example.yaml"
    checkout = _checkout(tmp_path / "pytorch")
    (checkout / ".mps-pipeline.yaml").write_text(example.read_text())
    s = load_settings(env={"HOME": str(tmp_path)}, cwd=checkout)
    assert s.test_kinds == ("output_match", "output_grad_match")
    assert s.python == str(Path("~/pytorch/.venv/bin/python").expanduser())
    assert s.sources["python"].origin == str(checkout / ".mps-pipeline.yaml")


def test_runners_are_a_list_of_names_or_a_table_of_macos_versions(tmp_path: Path) -> None:
    s = load_settings(env={}, cwd=tmp_path)
    assert s.runners == ("macos-m1-14", "macos-m2-15", "macos-m2-26") and s.runner_macos == {}
    table = 'runners:\n  macos-m1-14: "14.7"\n  mac-mini-2: 15\n  studio: 26.0\n  beta: null\n'
    s = load_settings(config_path=_write(tmp_path, table), env={}, cwd=tmp_path)
    assert s.runners == ("macos-m1-14", "mac-mini-2", "studio", "beta")  # in the file's order
    assert s.runner_macos == {"macos-m1-14": (14, 7), "mac-mini-2": (15,), "studio": (26, 0)}
    env = {"MPS_PIPELINE_RUNNERS": "mini=15.5, macos-m2-26"}  # versions optional
    s = load_settings(env=env, cwd=tmp_path)
    assert s.runners == ("mini", "macos-m2-26") and s.runner_macos == {"mini": (15, 5)}
    bad = _write(tmp_path, "runners:\n  mini: fifteen\n")
    with pytest.raises(
        ConfigError,
        match=r"config key 'runners' \(.*pipeline\.yaml\): the macOS version of runner "
        r"'mini' must be a version such as \"15\.0\".*got 'fifteen'",
    ):
        load_settings(config_path=bad, env={}, cwd=tmp_path)
    with pytest.raises(ConfigError, match=r"'runners' must be list or dict, got str"):
        read_file(_write(tmp_path, "runners: macos-m1-14\n"))


def test_in_process_doit_runs_read_their_own_variables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two doit runs in one process: the second's state_dir= is its own, not the first's."""
    from pipeline.tasks import run_doit

    first, second = tmp_path / "first", tmp_path / "second"
    assert run_doit(["list", f"state_dir={first}"]) == 0
    assert run_doit(["list", f"state_dir={second}"]) == 0
    assert (second / "doit.sqlite").exists() or (second / "sandbox").is_dir()
    assert (
        capsys.readouterr()
        .err.splitlines()[-1]
        .startswith(f"root: the bundled sandbox, working copy {second / 'sandbox'}")
    )


def test_a_relative_config_file_is_relative_to_the_working_directory(tmp_path: Path) -> None:
    _write(tmp_path, "lock_wait: 9\n", "mine.yaml")
    assert load_settings(config_path=Path("mine.yaml"), env={}, cwd=tmp_path).lock_wait == 9
    env = {"MPS_PIPELINE_CONFIG": "mine.yaml"}
    assert load_settings(env=env, cwd=tmp_path).lock_wait == 9
