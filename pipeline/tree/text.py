"""The one way the pipeline reads a tree file as text: strict UTF-8, errors that name the file.

Every reader, the index, the editors and the sandbox's compiler read through
:func:`read_text`, so a stray latin-1 byte, a UTF-16 file or a binary named ``*.metal`` is
one line naming the file (``...UnaryKernel.metal: not UTF-8: byte 0xe9 at line 12, column
8``), never a ``UnicodeDecodeError`` traceback. Whether that is fatal is the caller's policy
(:func:`pipeline.tree.parse_each` skips such a kernel or host file with a warning; the core
files are input errors).

A UTF-8 byte-order mark is accepted and dropped, as compilers and Python do. Line ends are
read as :meth:`pathlib.Path.read_text` reads them (``\\r\\n`` and ``\\r`` become ``\\n``),
so spans and edits see what they always saw.
"""

from __future__ import annotations

import codecs
from pathlib import Path

from pipeline.errors import UnreadableFileError

_RESAVE = "re-save the file as UTF-8"
# checked in order: UTF-32 LE's mark starts with UTF-16 LE's
_OTHER_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


def read_text(path: Path, rel: str) -> str:
    """The text of ``path``; :class:`~pipeline.errors.UnreadableFileError` naming ``rel``
    (the path relative to the tree, as messages show it) when it cannot be read or decoded."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UnreadableFileError(rel, "not found") from None
    except IsADirectoryError:
        raise UnreadableFileError(rel, "is a directory, not a file") from None
    except OSError as exc:
        raise UnreadableFileError(rel, f"cannot be read: {exc.strerror or exc}") from None
    return decode(data, rel)


def decode(data: bytes, rel: str) -> str:
    """``data`` (the bytes of the file ``rel``) as text, under :func:`read_text`'s rules."""
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    else:
        for bom, name in _OTHER_BOMS:
            if data.startswith(bom):
                marks = " ".join(f"{b:02X}" for b in bom)
                raise UnreadableFileError(
                    rel, f"a {name} file (byte-order mark {marks}), not UTF-8; {_RESAVE}"
                )
    nul = data.find(b"\0")
    if nul >= 0:
        raise UnreadableFileError(rel, f"not a text file (NUL byte at offset {nul})")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # lines as read_text counts them: \r\n, \r and \n each end one
        head = data[: exc.start].replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        start = exc.start - (len(head) - head.rfind(b"\n") - 1)
        line = head.count(b"\n") + 1
        # everything before the first bad byte decodes: the column counts characters
        column = len(data[start : exc.start].decode("utf-8")) + 1
        raise UnreadableFileError(
            rel,
            f"not UTF-8: byte 0x{data[exc.start]:02x} at line {line}, column {column}; {_RESAVE}",
            line,
            column,
        ) from None
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text
