"""pipeline/run/build.py: pure parsers, and real ninja runs on a tiny build.ninja."""

from __future__ import annotations

import os
import shlex
import sys
import time
from pathlib import Path

import pytest

from pipeline.errors import BuildError
from pipeline.run import build
from pipeline.run.build import BuildRequest, CompilerError, first_compiler_error, parse_progress
from tests.run.procs import gone

# One build step: writes its output, or prints a compiler-style error and fails, or records
# its pid and sleeps (for the timeout test).
STEP = """\
import os, sys, time
out, mode = sys.argv[1], sys.argv[2]
if mode == "fail":
    print("In file included from src/Foo.mm:3:")
    print("src/Foo.h:7:1: warning: unused variable 'y' [-Wunused-variable]")
    print("src/Foo.mm:12:5: error: use of undeclared identifier 'x'")
    print("src/Foo.mm:20:1: error: expected ';' after expression")
    print("2 errors generated.")
    sys.exit(1)
if mode == "sleep":
    open("sleeper.pid", "w").write(str(os.getpid()))
    time.sleep(60)
open(out, "w").write(mode)
"""


def write_build(tmp_path: Path) -> Path:
    """A build dir whose `torch_cpu` has three real steps; `broken` and `slow` fail / hang."""
    build_dir = tmp_path / "build"
    build_dir.mkdir()
    (build_dir / "step.py").write_text(STEP)
    python = shlex.quote(sys.executable)
    (build_dir / "build.ninja").write_text(
        f"rule step\n  command = {python} step.py $out $mode\n  description = STEP $out\n"
        "build shaders.metallib: step\n  mode = ok\n"
        "build Foo.mm.o: step\n  mode = ok\n"
        "build libtorch_cpu.so: step | shaders.metallib Foo.mm.o\n  mode = ok\n"
        "build torch_cpu: phony libtorch_cpu.so\n"
        "build broken.o: step\n  mode = fail\n"
        "build broken: phony broken.o\n"
        "build slow.o: step\n  mode = sleep\n"
        "build slow: phony slow.o\n"
    )
    return build_dir


def request(tmp_path: Path, *target: str, timeout: float | None = None) -> BuildRequest:
    return BuildRequest(
        command=("ninja", "-C", "build", *target),
        cwd=tmp_path,
        log_path=tmp_path / "logs" / "build.log",
        timeout=timeout,
    )


# -- pure parsers ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("[1/3] STEP shaders.metallib", (1, 3, "STEP shaders.metallib")),
        (
            "[2417/6012] Building CXX object caffe2/CMakeFiles/torch_cpu.dir/Foo.mm.o",
            (2417, 6012, "Building CXX object caffe2/CMakeFiles/torch_cpu.dir/Foo.mm.o"),
        ),
        (
            "\x1b[32m[5/9]\x1b[0m Linking CXX shared library lib/libtorch_cpu.dylib",
            (5, 9, "Linking CXX shared library lib/libtorch_cpu.dylib"),
        ),
        ("[7/7]", (7, 7, "")),
        ("ninja: no work to do.", None),
        ("FAILED: [code=1] broken.o", None),
        ("  [1/2] indented is not a status line", None),
        ("", None),
    ],
)
def test_parse_progress(line: str, expected: tuple[int, int, str] | None) -> None:
    assert parse_progress(line) == expected


def test_first_compiler_error_clang_with_column_skips_notes_and_warnings() -> None:
    lines = [
        "[3/4] Building OBJCXX object Foo.mm.o",
        "FAILED: [code=1] Foo.mm.o",
        "clang++ -c src/Foo.mm -o Foo.mm.o",
        "In file included from src/Foo.mm:3:",
        "src/Foo.h:7:1: warning: unused variable 'y' [-Wunused-variable]",
        "src/Foo.h:2:1: note: declared here",
        "src/Foo.mm:12:5: error: use of undeclared identifier 'x'",
        "src/Foo.mm:20:1: error: expected ';'",
    ]
    error = first_compiler_error(lines)
    assert error == CompilerError("src/Foo.mm", 12, 5, "use of undeclared identifier 'x'")
    assert str(error) == "src/Foo.mm:12: use of undeclared identifier 'x'"


def test_first_compiler_error_gcc_without_column_and_fatal() -> None:
    assert first_compiler_error(["a.cpp:4: error: expected unqualified-id"]) == CompilerError(
        "a.cpp", 4, None, "expected unqualified-id"
    )
    fatal = first_compiler_error(["x.cpp:1:10: fatal error: 'ATen/ops/atan2_native.h' not found"])
    assert fatal == CompilerError("x.cpp", 1, 10, "'ATen/ops/atan2_native.h' not found")


def test_first_compiler_error_metal_absolute_path_with_colour_codes() -> None:
    line = (
        "\x1b[1m/Users/me/pytorch/aten/src/ATen/native/mps/kernels/BinaryKernel.metal:88:14: "
        "\x1b[0m\x1b[0;1;31merror: \x1b[0m\x1b[1mno member named 'atan3' in namespace 'c10::metal'"
        "\x1b[0m"
    )
    error = first_compiler_error([line])
    assert error is not None
    assert error.path.endswith("kernels/BinaryKernel.metal")
    assert (error.line, error.column) == (88, 14)
    assert error.message == "no member named 'atan3' in namespace 'c10::metal'"


def test_first_compiler_error_ignores_the_echoed_command_line() -> None:
    # ninja echoes the failing command, which can quote an error-shaped string
    lines = [
        "FAILED: gen.stamp",
        "python gen.py --fake 'a.yaml:1:2: error: not really'",
        "real.yaml:9:3: error: the real one",
    ]
    assert first_compiler_error(lines) == CompilerError("real.yaml", 9, 3, "the real one")


def test_first_compiler_error_cmake() -> None:
    lines = [
        "-- Configuring",
        "CMake Error at cmake/Metal.cmake:41 (message):",
        "",
        "  metal compiler not found: install Xcode",
        "-- Configuring incomplete, errors occurred!",
    ]
    assert first_compiler_error(lines) == CompilerError(
        "cmake/Metal.cmake", 41, None, "metal compiler not found: install Xcode"
    )


def test_first_compiler_error_none_when_no_error() -> None:
    lines = ["[1/1] Linking", "src/a.cpp:3:1: warning: something", "clang: error: linker failed"]
    assert first_compiler_error(lines) is None


def test_find_ninja_without_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    found = build.find_ninja()
    assert found is not None and os.access(found, os.X_OK)


# -- real ninja -----------------------------------------------------------------------------


def test_build_then_no_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_build(tmp_path)
    first = build.run(request(tmp_path, "torch_cpu"), progress=False)
    assert first.ok and first.returncode == 0 and first.first_error is None
    assert (first.steps_done, first.steps_total) == (3, 3)
    assert not first.no_work
    assert (tmp_path / "build" / "libtorch_cpu.so").read_text() == "ok"
    log = first.log_path.read_text()
    assert log.startswith("$ ") and "[3/3] STEP libtorch_cpu.so" in log
    assert capsys.readouterr().err == ""  # progress=False is silent

    second = build.run(request(tmp_path, "torch_cpu"), progress=True)
    assert second.ok and second.no_work
    assert (second.steps_done, second.steps_total) == (0, 0)
    assert "no work to do" in second.message
    assert second.check() is second


def test_progress_lines_when_not_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_build(tmp_path)
    result = build.run(request(tmp_path, "torch_cpu"), progress=True)
    assert result.ok
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith("build: 100% (3/3)")
    assert len(err) == 3  # one line per step crosses a tenth here


def test_ninja_status_is_forced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NINJA_STATUS", "%p ")  # a user's own format must not break parsing
    write_build(tmp_path)
    assert build.run(request(tmp_path, "torch_cpu"), progress=False).steps_done == 3


def test_compiler_error(tmp_path: Path) -> None:
    write_build(tmp_path)
    result = build.run(request(tmp_path, "broken"), progress=False)
    assert not result.ok and result.returncode != 0
    assert result.first_error == CompilerError(
        "src/Foo.mm", 12, 5, "use of undeclared identifier 'x'"
    )
    assert result.failed_target == "broken.o"
    assert "src/Foo.mm:12: use of undeclared identifier 'x'" in result.message
    assert str(result.log_path) in result.message
    log = result.log_path.read_text()
    assert "src/Foo.mm:20:1: error: expected ';'" in log and "2 errors generated." in log
    with pytest.raises(BuildError, match="undeclared identifier") as raised:
        result.check()
    # the caller gets the parsed error itself, not only a message to parse again
    assert raised.value.first_error == result.first_error
    assert str(raised.value) == result.message


def test_missing_build_ninja(tmp_path: Path) -> None:
    (tmp_path / "build").mkdir()
    result = build.run(request(tmp_path, "torch_cpu"), progress=False)
    assert not result.ok and result.first_error is None
    assert "has no build.ninja" in result.message
    assert "python setup.py develop" in result.message
    with pytest.raises(BuildError, match="has no build.ninja") as raised:
        result.check()
    assert raised.value.first_error is None


def test_missing_build_dir(tmp_path: Path) -> None:
    result = build.run(request(tmp_path, "torch_cpu"), progress=False)
    assert not result.ok
    assert "does not exist" in result.message and "python setup.py develop" in result.message


def test_unknown_target(tmp_path: Path) -> None:
    write_build(tmp_path)
    result = build.run(request(tmp_path, "torch_cpux"), progress=False)
    assert not result.ok
    assert "no target 'torch_cpux'" in result.message
    assert "did you mean 'torch_cpu'" in result.message


def test_missing_ninja(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build, "find_ninja", lambda: None)
    with pytest.raises(BuildError, match="ninja not found.*pip install ninja"):
        build.run(request(tmp_path, "torch_cpu"), progress=False)


def test_missing_build_command(tmp_path: Path) -> None:
    req = BuildRequest(("no-such-build-tool-4711",), tmp_path, tmp_path / "build.log")
    with pytest.raises(BuildError, match="no-such-build-tool-4711.*not found"):
        build.run(req, progress=False)


@pytest.mark.slow
def test_timeout_stops_ninja_and_its_commands(tmp_path: Path) -> None:
    build_dir = write_build(tmp_path)
    started = time.monotonic()
    result = build.run(request(tmp_path, "slow", timeout=1.0), progress=False)
    assert time.monotonic() - started < 10
    assert result.timed_out and not result.ok
    assert "timed out after 1s" in result.message
    # ninja runs each command in its own process group: the sleeper must be gone too.
    pid = int((build_dir / "sleeper.pid").read_text())
    assert gone(pid)
