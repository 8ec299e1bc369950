from __future__ import annotations

import subprocess
import sys

from pipeline.tree import dispatch, files, metal, native_yaml, objc, paths


def test_build_patterns_cover_the_build_readers_then_the_shared_sources():
    readers = (native_yaml, metal, objc, dispatch)
    assert (
        *(p for r in readers for p in r.PATTERNS),
        paths.NATIVE_SOURCES,
    ) == paths.BUILD_PATTERNS


def test_files_keeps_pattern_then_path_order_and_skips_directories(tmp_path):
    (tmp_path / "b.txt").write_text("")
    (tmp_path / "a.txt").write_text("")
    (tmp_path / "c.md").write_text("")
    (tmp_path / "d.txt").mkdir()
    assert files(tmp_path, ("*.md", "*.txt")) == [
        tmp_path / "c.md",
        tmp_path / "a.txt",
        tmp_path / "b.txt",
    ]


def test_doit_start_up_imports_no_reader():
    readers = ("cpp", "metal", "objc", "dispatch", "native_yaml", "common_mps")
    code = (
        "import sys, pipeline.tasks; "
        f"print(sorted(m for m in {readers!r} if 'pipeline.tree.' + m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
