"""Fuzzing the tree readers: random bytes, truncations and corruptions of the sandbox's real
files go through ``read_text`` and every reader's ``parse``, and through ``load_index`` on a
tree holding them. The only exception ever allowed is the pipeline's input error
(:class:`~pipeline.errors.PipelineError`) naming the file: no ``UnicodeDecodeError``,
``IndexError``, ``RecursionError``...

Bounded and derandomized: the same 50 examples a test, in CI as on a laptop.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline import sandbox
from pipeline.errors import PipelineError
from pipeline.guide.checklist import checklist
from pipeline.tree import common_mps, dispatch, metal, native_yaml, objc, paths
from pipeline.tree.index import load_index
from pipeline.tree.source import TreeSource
from pipeline.tree.text import decode

FUZZ = settings(
    max_examples=50,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# reader -> a real sandbox file it reads
READERS: dict[str, tuple[Callable[[str, str], object], str]] = {
    "native_yaml": (native_yaml.parse, paths.NATIVE_YAML),
    "metal": (metal.parse, f"{paths.KERNELS_DIR}/BinaryKernel.metal"),
    "objc": (objc.parse, f"{paths.OPERATIONS_DIR}/BinaryOps.mm"),
    "dispatch": (dispatch.parse, f"{paths.NATIVE_DIR}/BinaryOps.h"),
    "common_mps": (common_mps.parse, paths.COMMON_MPS),
}


def damaged(original: bytes) -> st.SearchStrategy[bytes]:
    """Random bytes; the file cut anywhere (a multi-byte character too); the file with a run
    of random bytes written over it or inserted into it."""
    size = len(original)
    cut = st.integers(0, size).map(lambda n: original[:n])
    overwrite = st.tuples(st.integers(0, size), st.binary(min_size=1, max_size=16)).map(
        lambda a: original[: a[0]] + a[1] + original[a[0] + len(a[1]) :]
    )
    insert = st.tuples(st.integers(0, size), st.binary(min_size=1, max_size=16)).map(
        lambda a: original[: a[0]] + a[1] + original[a[0] :]
    )
    # cuts at line ends: a file that stops short of its closing brackets, still valid UTF-8
    lines = original.splitlines(keepends=True)
    by_line = st.integers(0, len(lines)).map(lambda n: b"".join(lines[:n]))
    return st.one_of(st.binary(max_size=512), cut, overwrite, insert, by_line)


def assert_named(exc: PipelineError, rel: str) -> None:
    assert rel in str(exc), f"{type(exc).__name__} does not name {rel}: {exc}"
    assert "\n" not in str(exc).strip(), f"not one line: {exc}"


def parse_bytes(reader: str, data: bytes) -> None:
    parse, rel = READERS[reader]
    try:
        parse(decode(data, rel), rel)
    except PipelineError as exc:
        assert_named(exc, rel)


@pytest.mark.parametrize("reader", READERS)
def test_every_reader_survives_damaged_bytes(reader: str) -> None:
    original = (sandbox.TREE / READERS[reader][1]).read_bytes()

    @FUZZ
    @given(damaged(original))
    def check(data: bytes) -> None:
        parse_bytes(reader, data)

    check()


@pytest.mark.slow
@pytest.mark.parametrize("reader", READERS)
def test_every_reader_survives_random_text(reader: str) -> None:
    parse, rel = READERS[reader]

    @FUZZ
    @given(st.text(max_size=400))
    def check(text: str) -> None:
        try:
            parse(text, rel)
        except PipelineError as exc:
            assert_named(exc, rel)

    check()


@pytest.fixture(scope="module")
def fuzz_tree(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fuzz") / "pytorch"
    shutil.copytree(sandbox.TREE, root)
    return root


@pytest.mark.slow
@pytest.mark.parametrize("reader", READERS)
def test_load_index_survives_a_damaged_file(reader: str, fuzz_tree: Path) -> None:
    """The whole read, cache included: a damaged file is a one-line input error naming it,
    or a warning (a kernel, host or header file is skipped); the checklist is judged."""
    rel = READERS[reader][1]
    path = fuzz_tree / rel
    original = path.read_bytes()
    counter = iter(range(10**6))

    @FUZZ
    @given(damaged(original))
    def check(data: bytes) -> None:
        source = TreeSource(
            root=fuzz_tree,
            cache_dir=fuzz_tree.parent / f"cache-{reader}-{next(counter)}",
            python="python3",
            opinfo_table=fuzz_tree / paths.OPINFO_TABLE,
        )
        path.write_bytes(data)
        try:
            index = load_index(source)
            for op in ("atan2", "copysign"):
                checklist(index.record(op))
        except PipelineError as exc:
            assert_named(exc, rel)
        finally:
            path.write_bytes(original)

    check()
