"""The shader check after `ninja torch_cpu` (pytorch#196202), with real ninja.

The sandbox's build writes, per .metal file, a header embedding the shader (as CMake does
with only the Command Line Tools); ``ShaderDeps`` says whether that step depends on the
c10/metal headers (correct) or on the shader alone (the bug). The headers are our own tiny
stand-ins, written into the test's sandbox copy.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pipeline import sandbox
from pipeline.errors import EXIT_WORK_LEFT, StaleShaderError, StaleShaderReason
from pipeline.fields import dump, read
from pipeline.run import shaders
from pipeline.run.build import find_ninja
from pipeline.run.ninja_data import LogEntry, NinjaData, parse_deps, parse_query, read_log
from pipeline.run.shaders import (
    BUILD_CHECK,
    CheckStatus,
    ShaderCheck,
    ShaderForm,
    Toolchain,
    ToolchainKind,
)

UNARY_HEADER = "aten/src/ATen/native/mps/UnaryKernel_metallib.h"
UTILS = "c10/metal/utils.h"
XCODE = "/Applications/Xcode.app/Contents/Developer\n"
CLT = "/Library/Developer/CommandLineTools\n"
# the shape of the commands ninja reports for upstream's two shader steps (cmake/Metal.cmake)
METAL_TO_AIR = (
    "cd /src/build && xcrun metal -c /src/aten/src/ATen/native/mps/kernels/Unary.metal "
    "-I /src -I /src/aten/src -o Unary.air -std=metal3.1 -Wall -Wextra -fno-fast-math"
)
METALLIB_H = (
    "cd /src/build/aten/src/ATen && /usr/bin/python3 /src/scripts/write_metallib_headers.py "
    "/src/aten/src/ATen/native/mps/kernels/Unary.metal native/mps/Unary_metallib.h"
)


def ninja_build(root: Path) -> str:
    ninja = find_ninja()
    assert ninja is not None
    done = subprocess.run(
        [ninja, "-C", str(root / "build"), "torch_cpu"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def data(root: Path) -> NinjaData:
    ninja = find_ninja()
    assert ninja is not None
    return NinjaData(ninja, root / "build")


def edit(path: Path, line: str) -> None:
    path.write_text(path.read_text() + line)
    # a later mtime than anything the last build wrote, on any file system's clock
    stamp = path.stat().st_mtime_ns + 2_000_000_000
    os.utime(path, ns=(stamp, stamp))


def sandbox_with_headers(tmp_path: Path, deps: sandbox.ShaderDeps) -> Path:
    """A sandbox copy with two c10/metal headers its shaders include, configured (the
    build.ninja CMake would write) and built once."""
    root = sandbox.materialize(tmp_path / "sandbox")
    (root / "c10/metal").mkdir(parents=True)
    (root / "c10/metal/utils.h").write_text("#pragma once\n// helpers v1\n")
    (root / "c10/metal/indexing.h").write_text('#pragma once\n#include "c10/metal/utils.h"\n')
    (root / "c10/metal/special_math.h").write_text("#pragma once\n")
    (root / "build/build.ninja").write_text(sandbox.build_ninja(root, shader_deps=deps))
    ninja_build(root)
    return root


def check(root: Path, before: dict[str, LogEntry]) -> ShaderCheck:
    return shaders.check(root, data(root), before, "torch_cpu")


@pytest.mark.slow
def test_a_header_edit_with_correct_deps_rebuilds_and_passes(tmp_path: Path) -> None:
    root = sandbox_with_headers(tmp_path, sandbox.ShaderDeps.HEADERS)
    before = read_log(root / "build")
    assert check(root, before).status is CheckStatus.NO_CHANGE

    edit(root / UTILS, "// helpers v2\n")
    out = ninja_build(root)
    result = check(root, before)
    assert "Generating metallib wrapper header" in out
    assert result.status is CheckStatus.FRESH
    assert (UTILS, UNARY_HEADER) in result.checked
    assert result.library == sandbox.TARGET_OUTPUT
    assert "helpers v2" in (root / "build" / UNARY_HEADER).read_text()
    assert result.toolchain.shader_form is ShaderForm.EMBEDDED
    assert ShaderCheck.from_dict(result.to_dict()).to_dict() == result.to_dict()


@pytest.mark.slow
def test_a_header_edit_without_the_edge_is_the_stale_shader_bug(tmp_path: Path) -> None:
    root = sandbox_with_headers(tmp_path, sandbox.ShaderDeps.SHADER_ONLY)
    before = read_log(root / "build")
    edit(root / UTILS, "// helpers v2\n")
    assert "no work to do" in ninja_build(root)  # ninja cannot know
    assert "helpers v2" not in (root / "build" / UNARY_HEADER).read_text()

    with pytest.raises(StaleShaderError) as caught:
        check(root, before)
    error = caught.value
    assert error.exit_code == EXIT_WORK_LEFT
    no_edge = [f for f in error.findings if f.reason is StaleShaderReason.NO_EDGE]
    assert {(f.source, f.artifact) for f in no_edge} >= {(UTILS, UNARY_HEADER)}
    assert str(error).startswith(f"stale shader: {UTILS} changed, but {no_edge[0].artifact} is")
    assert f"force the rebuild with `{no_edge[0].force}`" in str(error)
    assert "METAL_HEADER_DEPS" in str(error)

    # the message's command forces the rebuild: the edit reaches the shader and the library
    force = next(f.force for f in no_edge if f.artifact == UNARY_HEADER)
    before = read_log(root / "build")
    subprocess.run(force, shell=True, check=True, capture_output=True)
    assert "helpers v2" in (root / "build" / UNARY_HEADER).read_text()
    assert read_log(root / "build")[sandbox.TARGET_OUTPUT] != before[sandbox.TARGET_OUTPUT]


@pytest.mark.slow
def test_a_shader_edit_and_the_first_build(tmp_path: Path) -> None:
    root = sandbox.materialize(tmp_path / "sandbox")
    ninja_build(root)
    assert check(root, {}).status is CheckStatus.FIRST_BUILD
    before = read_log(root / "build")
    edit(root / "aten/src/ATen/native/mps/kernels/UnaryKernel.metal", "// edited\n")
    ninja_build(root)
    result = check(root, before)
    assert result.status is CheckStatus.FRESH
    assert result.checked == (("aten/src/ATen/native/mps/kernels/UnaryKernel.metal", UNARY_HEADER),)


LINK_ORDER_ONLY = """\
rule cp
  command = cat $in > $out
build gen/Unary_metallib.h: cp ../aten/src/ATen/native/mps/kernels/Unary.metal
build lib/libtorch_cpu.so: cp ../host.mm || gen/Unary_metallib.h
build torch_cpu: phony lib/libtorch_cpu.so
"""


def test_an_artifact_reaching_the_library_only_order_only_is_not_linked(tmp_path: Path) -> None:
    kernels = tmp_path / "aten/src/ATen/native/mps/kernels"
    kernels.mkdir(parents=True)
    (kernels / "Unary.metal").write_text("// v1\n")
    (tmp_path / "host.mm").write_text("// host\n")
    (tmp_path / "build").mkdir()
    (tmp_path / "build/build.ninja").write_text(LINK_ORDER_ONLY)
    ninja_build(tmp_path)
    before = read_log(tmp_path / "build")
    edit(kernels / "Unary.metal", "// v2\n")
    ninja_build(tmp_path)
    with pytest.raises(StaleShaderError) as caught:
        check(tmp_path, before)
    (finding,) = caught.value.findings
    assert finding.reason is StaleShaderReason.NOT_LINKED
    assert (finding.artifact, finding.step) == ("gen/Unary_metallib.h", "lib/libtorch_cpu.so")


def test_check_build_without_a_ninja_graph_is_unknown_never_passed(tmp_path: Path) -> None:
    result = shaders.check_build(tmp_path, tmp_path / "build", {}, find_ninja())
    assert result.status is CheckStatus.UNKNOWN
    assert "no build.ninja" in result.describe()


@pytest.mark.parametrize(
    ("xcode_select", "command", "expected"),
    [
        (XCODE, METAL_TO_AIR, (ToolchainKind.XCODE, ShaderForm.METALLIB, "metal3.1")),
        (
            CLT,
            METALLIB_H,
            (ToolchainKind.COMMAND_LINE_TOOLS, ShaderForm.EMBEDDED, "chosen at run time"),
        ),
        (None, None, (ToolchainKind.UNKNOWN, ShaderForm.UNKNOWN, "unknown")),
    ],
)
def test_toolchain_from_recorded_outputs(
    xcode_select: str | None, command: str | None, expected: tuple[object, ...]
) -> None:
    toolchain = Toolchain.read(xcode_select, command)
    assert (toolchain.kind, toolchain.shader_form, toolchain.metal_std) == expected
    assert read(Toolchain, dump(toolchain), BUILD_CHECK) == toolchain


def test_query_and_deps_output_parse() -> None:
    nodes = parse_query(
        "lib.so:\n  input: link\n    a.o\n    | gen.h\n    || order\n  outputs:\n    all\n"
        "a.metal:\n  outputs:\n    gen.h\n"
    )
    assert nodes["lib.so"].explicit == ("a.o",) and nodes["lib.so"].order_only == ("order",)
    assert nodes["lib.so"].rebuilds_on("gen.h") and not nodes["lib.so"].rebuilds_on("order")
    assert nodes["a.metal"].rule is None and nodes["a.metal"].consumers == ("gen.h",)
    deps = parse_deps("a.o: #deps 2, deps mtime 12 (VALID)\n    a.mm\n    gen.h\n\n")
    assert deps == {"a.o": ("a.mm", "gen.h")}


def test_a_ninja_log_of_an_unknown_version_reads_as_empty(tmp_path: Path) -> None:
    (tmp_path / ".ninja_log").write_text("# ninja log v4\n1\t2\t3\tout\tabc\n")
    assert read_log(tmp_path) == {}
    (tmp_path / ".ninja_log").write_text("# ninja log v5\n1\t2\t3\tout\tabc\n4\t5\t6\tout\tdef\n")
    assert read_log(tmp_path) == {"out": LogEntry("out", 4, 5, 6, "def")}


def test_a_recorded_check_reads_back_whole_or_is_refused_naming_the_field() -> None:
    toolchain = Toolchain(
        ToolchainKind.XCODE, "/Applications/Xcode.app", ShaderForm.METALLIB, "3.1"
    )
    made = ShaderCheck(CheckStatus.FRESH, ("a.metallib",), (("k.metal", "a.metallib"),),
                       "lib/libtorch_cpu.so", toolchain, 1.25)  # fmt: skip
    assert ShaderCheck.from_dict(made.to_dict()) == made
    for change, said in [
        ({"status": "fine"}, "status is 'fine', not one of"),
        ({"checked": [{"source": "k.metal"}]}, r"checked\[0\]\.artifact must be str"),
        ({"toolchain": {**dump(toolchain), "sdk": "x"}}, r"toolchain has unknown key"),
        ({"seconds": "1.25"}, "seconds must be float or int, got str"),
    ]:
        with pytest.raises(ValueError, match=f"not a shader check record: {said}"):
            ShaderCheck.from_dict({**made.to_dict(), **change})
