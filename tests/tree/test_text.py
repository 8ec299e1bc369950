"""pipeline.tree.text.read_text: the one way tree files are read, and its one-line errors."""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest

from pipeline.errors import EXIT_INPUT, ParseError, UnreadableFileError
from pipeline.tree.text import decode, read_text
from tests.conftest import deny_read

REL = "aten/src/ATen/native/mps/kernels/UnaryKernel.metal"


def _error(data: bytes) -> UnreadableFileError:
    with pytest.raises(UnreadableFileError) as info:
        decode(data, REL)
    assert info.value.exit_code == EXIT_INPUT and isinstance(info.value, ParseError)
    assert info.value.path == REL
    return info.value


def test_utf8_text_is_returned_as_is() -> None:
    assert decode("kernel void f() {} // café\n".encode(), REL) == "kernel void f() {} // café\n"


def test_a_latin1_byte_names_line_column_and_byte() -> None:
    data = b"line one\n" * 11 + b"// caf\xe9 au lait\n"
    exc = _error(data)
    assert str(exc) == (
        f"{REL}: not UTF-8: byte 0xe9 at line 12, column 7; re-save the file as UTF-8"
    )
    assert (exc.line, exc.column) == (12, 7)


def test_the_column_counts_characters_not_bytes() -> None:
    exc = _error("é€x".encode() + b"\xff\n")
    assert (exc.line, exc.column) == (1, 4) and "byte 0xff" in str(exc)


def test_a_truncated_multibyte_character_at_the_end() -> None:
    exc = _error("ok\n€".encode()[:-1])
    assert (exc.line, exc.column) == (2, 1) and "byte 0xe2" in str(exc)


@pytest.mark.parametrize(
    ("bom", "what"),
    [
        (codecs.BOM_UTF16_LE, "a UTF-16 file (byte-order mark FF FE)"),
        (codecs.BOM_UTF16_BE, "a UTF-16 file (byte-order mark FE FF)"),
        (codecs.BOM_UTF32_LE, "a UTF-32 file (byte-order mark FF FE 00 00)"),
    ],
)
def test_utf16_and_utf32_files_say_so(bom: bytes, what: str) -> None:
    codec = {2: "utf-16", 4: "utf-32"}[len(bom)]
    data = "x = 1\n".encode(codec)  # Python's codec writes the native mark
    exc = _error(bom + data[len(bom) :])
    assert str(exc) == f"{REL}: {what}, not UTF-8; re-save the file as UTF-8"


def test_nul_bytes_are_not_text() -> None:
    exc = _error(b"\xcf\xfa\xed\xfe" + b"abc\0def")
    assert str(exc).startswith(f"{REL}: not a text file (NUL byte at offset 7)")


def test_a_utf16_file_without_mark_is_not_text() -> None:
    assert "NUL byte at offset 1" in str(_error("x = 1\n".encode("utf-16-le")))


def test_a_utf8_byte_order_mark_is_dropped() -> None:
    # as clang, the Metal compiler and Python accept it
    text = "#include <metal_stdlib>\n"
    assert decode(codecs.BOM_UTF8 + text.encode(), REL) == text


def test_line_ends_are_read_as_path_read_text_reads_them(tmp_path: Path) -> None:
    path = tmp_path / "f.mm"
    path.write_bytes(b"a\r\nb\rc\n")
    assert read_text(path, "f.mm") == path.read_text(encoding="utf-8") == "a\nb\nc\n"


def test_os_errors_name_the_file(tmp_path: Path, monkeypatch) -> None:
    with pytest.raises(UnreadableFileError, match=r"^gone\.metal: not found$"):
        read_text(tmp_path / "gone.metal", "gone.metal")
    (tmp_path / "d.metal").mkdir()
    with pytest.raises(UnreadableFileError, match=r"^d\.metal: is a directory, not a file$"):
        read_text(tmp_path / "d.metal", "d.metal")
    locked = tmp_path / "locked.metal"
    locked.write_text("x")
    deny_read(locked, monkeypatch)
    with pytest.raises(
        UnreadableFileError, match=r"^locked\.metal: cannot be read: Permission denied$"
    ):
        read_text(locked, "locked.metal")


def test_the_line_of_a_bad_byte_counts_every_line_end() -> None:
    for ending in (b"\n", b"\r\n", b"\r"):
        data = ending.join([b"a", b"b", b"cd\xe9"])
        with pytest.raises(UnreadableFileError, match="byte 0xe9 at line 3, column 3"):
            decode(data, "f.metal")
