"""The host compiler runner: finding the compiler, the per-functor cache, error mapping."""

from __future__ import annotations

import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from pipeline.errors import EXIT_INPUT, NoCompilerError
from pipeline.run import cxx
from tests.flows.math_helpers import FIXTURES


def test_no_compiler_is_an_input_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(NoCompilerError) as info:
        cxx.find_compiler(None)
    assert info.value.exit_code == EXIT_INPUT
    assert "install clang or g++" in str(info.value)
    with pytest.raises(NoCompilerError, match="math.cxx='my-cxx'"):
        cxx.find_compiler("my-cxx")


def test_depfile() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        dep = Path(tmp) / "x.d"
        dep.write_text("out.so: a.cpp /x/b.h \\\n  /y/c.h\n")
        assert cxx.read_depfile(dep) == [Path("a.cpp"), Path("/x/b.h"), Path("/y/c.h")]


def test_a_manifest_is_kept_while_every_file_it_lists_is_the_same(tmp_path: Path) -> None:
    from pipeline.errors import CompilerError
    from pipeline.run.kernel_decls import KernelDecl, Param
    from pipeline.run.kernel_record import KernelBuild, Manifest, _KernelTable

    header = tmp_path / "a.h"
    header.write_text("int a;\n")
    decl = KernelDecl("k_float", "k", "float", (Param("device float*", "x", "buffer", 0),), 3, "64")
    kernels = (KernelBuild(decl, 0), KernelBuild(decl, error=CompilerError("a.metal", 3, 7, "no")))
    built = Manifest(
        {str(header): cxx.file_digest(header)}, ("part",), True, _KernelTable.of(kernels),
        {"Args": "no member named 'n'"},
    )  # fmt: skip
    path = tmp_path / "m.json"
    cxx.write_manifest(path, built)
    kept = cxx.read_manifest(path, Manifest)
    assert kept == built and kept.kernels.builds() == kernels  # one parameter list, kept once
    assert len(kept.kernels.signatures) == 1
    header.write_text("int b;\n")  # a file it was built from changed: built again
    assert cxx.read_manifest(path, Manifest) is None
    plain = cxx.Manifest({str(header): cxx.file_digest(header)})
    cxx.write_manifest(path, plain)
    assert cxx.read_manifest(path, cxx.Manifest) == plain
    path.write_text('{"deps": {"a.h": 1}}')  # damaged: built again, never an error
    assert cxx.read_manifest(path, cxx.Manifest) is None
    assert cxx.read_manifest(tmp_path / "none.json", cxx.Manifest) is None


@pytest.mark.slow
@pytest.mark.realdata
def test_build_is_cached_by_every_file_it_reads(
    tmp_path: Path, host_cxx: cxx.Compiler, real_c10_include: Path
) -> None:
    root = tmp_path / "tree"
    shutil.copytree(FIXTURES, root)
    headers = cxx.Headers(real_c10_include, "wheel")
    builder = cxx.Builder(host_cxx, headers, root, tmp_path / "c")
    metal = root / "right.metal"
    # two runs sharing the cache (the user's) build one object at once: neither reads the
    # other's files, and what each wrote for itself alone is gone
    other = cxx.Builder(host_cxx, headers, root, tmp_path / "c")
    with ThreadPoolExecutor(2) as pool:
        first, also = pool.map(lambda b: b.build(metal, "atan2"), (builder, other))
    assert first.error is None and not first.cached and first.library.is_file()
    assert also.error is None and also.library == first.library
    assert sorted(p.suffix for p in (tmp_path / "c").iterdir()) == [".cpp", ".json", ".so"]
    again = builder.build(metal, "atan2")
    assert again.cached and again.library == first.library
    # a change to any file the compiler read (here the .metal itself) builds again
    text = metal.read_text()
    metal.write_text(
        text.replace(
            "precise::atan2(float(a), float(b));\n  }\n};",
            "precise::atan2(float(a), float(b));\n  }\n};\n// touched",
            1,
        )
    )
    assert not builder.build(metal, "atan2").cached
    regs = cxx.list_registrations(builder.driver(), first.library)
    assert [(r.kernel, r.input, r.output, r.result) for r in regs] == [
        ("atan2", "float", "float", "float"),
        ("atan2", "half", "half", "half"),
        ("atan2", "bfloat", "bfloat", "bfloat"),
        ("atan2", "int", "float", "float"),
        ("atan2", "long", "float", "float"),
    ]
    assert os.access(builder.driver(), os.X_OK)
