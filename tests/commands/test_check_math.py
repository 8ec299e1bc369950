"""`check-math`: the command on the bundled sandbox (what CI runs here), its exits, config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.__main__ import main
from pipeline.config import load_settings
from pipeline.errors import ConfigError


def _cli(
    capsys, state: Path, *argv: str, env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    code = main([*argv, "--state-dir", str(state)])
    out, err = capsys.readouterr()
    return code, out, err


def test_usage_errors_exit_2(capsys, tmp_path: Path) -> None:
    code, _, err = _cli(capsys, tmp_path / "s", "check-math")
    assert code == 2 and "one of OP, --file FILE or --all" in err
    code, _, err = _cli(capsys, tmp_path / "s", "check-math", "atan2", "--all")
    assert code == 2
    code, _, err = _cli(capsys, tmp_path / "s", "check-math", "--file", "Nope.metal")
    assert code == 2 and "Nope.metal: no such .metal kernel file" in err
    assert "BinaryKernel.metal" in err


def test_no_compiler_exits_2(capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPS_PIPELINE_MATH_CXX", "no-such-c++")
    code, _, err = _cli(capsys, tmp_path / "s", "check-math", "atan2")
    assert code == 2
    assert "install clang or g++" in err and err.count("\n") == 2  # the root line + one


@pytest.mark.slow
@pytest.mark.realdata
def test_sandbox_kernels_through_the_checker(capsys, tmp_path: Path, host_cxx) -> None:
    """Every functor of the sandbox's .metal files: the findings are the real ones."""
    code, out, err = _cli(capsys, tmp_path / "s", "check-math", "--all", "--json")
    assert code == 1, err
    doc = json.loads(out)
    by_kernel = {f["kernel"]: f for f in doc["functors"]}
    assert set(by_kernel) == {
        "copysign", "maximum", "hypot", "atan2", "fmod", "div_true", "div_floor",
        "div_trunc", "lt", "erfinv", "exp2", "sinc",
    }  # fmt: skip
    assert all(f["compile_error"] is None for f in doc["functors"])

    def status(kernel: str) -> dict[str, str]:
        return {d["dtype"]: d["status"] for d in by_kernel[kernel]["dtypes"]}

    for kernel in ("copysign", "maximum", "atan2", "div_trunc", "lt", "erfinv", "exp2", "sinc"):
        assert set(status(kernel).values()) == {"ok"}, kernel
    # the naive hypot overflows where torch's does not, and loses hypot(inf, nan) == inf
    hypot = {d["dtype"]: d for d in by_kernel["hypot"]["dtypes"]}
    assert hypot["float32"]["status"] == "mismatch"
    assert hypot["float32"]["counterexamples"][0]["kernel"] == "inf"
    assert any(c["inputs"] == ["inf", "nan"] for c in hypot["float16"]["counterexamples"])
    # INT_MIN / -1 traps on the host: a crash with its input, the other dtypes still checked
    floor = {d["dtype"]: d for d in by_kernel["div_floor"]["dtypes"]}
    assert floor["int64"]["crashes"] == 1
    assert floor["int64"]["counterexamples"][0]["inputs"] == ["-9223372036854775808", "-1"]
    assert floor["float32"]["status"] == "ok"
    # integer division by zero is refused by torch too: not a finding
    assert floor["int16"]["status"] == "ok" and floor["int16"]["refused"] > 0
    # complex division by an infinite divisor: worth confirming on a Mac
    assert status("div_true")["complex64"] == "mismatch"
    assert by_kernel["div_true"]["skipped_dtypes"] == ["complex32"]


@pytest.mark.slow
@pytest.mark.realdata
def test_known_deviation_from_the_config_passes(capsys, tmp_path: Path, host_cxx) -> None:
    config = tmp_path / "math.yaml"
    config.write_text(
        "math:\n  known:\n"
        "    - {op: hypot, dtype: '*', reason: 'naive sqrt(a*a + b*b): tracked upstream'}\n"
    )
    code, out, _ = _cli(capsys, tmp_path / "s", "check-math", "hypot", "--config", str(config))
    assert code == 0
    assert "known: naive sqrt(a*a + b*b): tracked upstream" in out
    assert "Not covered: subnormal flushing on the GPU" in out


@pytest.mark.slow  # over 0.5 CPU-s: out of the fast tier
@pytest.mark.realdata
def test_math_cache_keeps_objects_and_answers_where_it_says(
    capsys, tmp_path: Path, host_cxx, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "shared"
    monkeypatch.setenv("MPS_PIPELINE_MATH_CACHE", str(shared))
    answers = []
    for state in ("one", "two"):  # two state dirs, one cache
        code, out, _ = _cli(capsys, tmp_path / state, "check-math", "atan2", "--json")
        assert code == 0 and json.loads(out)["ok"]
        assert not list((tmp_path / state).rglob("*.so")), "an object outside math.cache"
        answers.append({p: p.stat().st_mtime_ns for p in shared.glob("reference-*.json")})
    assert answers[0] and answers[1] == answers[0]  # torch was asked once, by the first
    assert len(list(shared.glob("atan2-*.so"))) == 2  # one per tree: objects see its headers


def test_math_settings_are_checked(tmp_path: Path) -> None:
    def load(text: str):
        path = tmp_path / "c.yaml"
        path.write_text(text)
        return load_settings(
            {"root": "sandbox", "state_dir": str(tmp_path)}, config_path=path, env={}
        )

    s = load("math:\n  known: [{op: div, dtype: half, reason: r}]\n  references: {erfcx: none}\n")
    assert s.math.known[0].dtype == "float16"
    # a file's references add to the packaged ones
    assert s.math.references["erfcx"] == "none"
    assert s.math.references["div_floor"] == "div.floor_rounding"
    with pytest.raises(ConfigError, match="'reason' must say why"):
        load("math:\n  known: [{op: div, dtype: half}]\n")
    with pytest.raises(ConfigError, match="'halfy' is not a dtype"):
        load("math:\n  known: [{op: div, dtype: halfy, reason: r}]\n")
    with pytest.raises(ConfigError, match="did you mean 'math.known'"):
        load("math:\n  knwon: []\n")
    env = load_settings(
        {"root": "sandbox", "state_dir": str(tmp_path)},
        env={"MPS_PIPELINE_MATH_MAX_SAMPLES": "12", "MPS_PIPELINE_MATH_CXX": "clang++"},
    )
    assert env.math.max_samples == 12 and env.math.cxx == "clang++"


def _no_torch_python(tmp_path: Path) -> Path:
    """An interpreter that cannot import torch (it fails whatever it is asked)."""
    fake = tmp_path / "python-without-torch"
    fake.write_text("#!/bin/sh\necho 'ModuleNotFoundError: No module named torch' >&2\nexit 1\n")
    fake.chmod(0o755)
    return fake


def test_without_torch_the_command_exits_2(capsys, tmp_path: Path) -> None:
    fake = _no_torch_python(tmp_path)
    code, _, err = _cli(capsys, tmp_path / "s", "check-math", "atan2", "--python", str(fake))
    assert code == 2 and "cannot import torch, which check-math needs" in err


@pytest.mark.slow  # over 0.5 CPU-s: out of the fast tier
def test_without_torch_the_migrate_stage_skips_saying_so(tmp_path: Path) -> None:
    from tests.doit_runs import doit

    fake = _no_torch_python(tmp_path)
    state = tmp_path / "state"
    result = doit(state, "check_math", "op=atan2", f"python={fake}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "check-math skipped: python=" in result.stdout
    assert "skipped" in json.loads((state / "ops/atan2/math.json").read_text())
