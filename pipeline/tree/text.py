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
import re
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


# one line of a file as stored: its text, then its own line end (the last may have none)
_RAW_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def encode_like(original: bytes | None, before: str, after: str) -> bytes:
    """``after`` as the bytes of a file that held ``original`` (read as ``before``): each line
    kept from ``before`` keeps its own line end (``\\r\\n``, ``\\r`` or ``\\n``), a new line
    takes the file's most common one, and a UTF-8 byte-order mark stays.

    The editors work on :func:`read_text`'s ``\\n`` text; this is how their result is
    written back without turning a CRLF (or mixed) file into an LF one.
    """
    if not original or (b"\r" not in original and not original.startswith(codecs.BOM_UTF8)):
        return after.encode("utf-8")
    bom = original.startswith(codecs.BOM_UTF8)
    raw = original[len(codecs.BOM_UTF8) :] if bom else original
    try:
        stored = raw.decode("utf-8")
    except UnicodeDecodeError:  # not what ``before`` was read from: nothing to keep
        return after.encode("utf-8")
    ends = [line[len(line.rstrip("\r\n")) :] for line in _RAW_LINE.findall(stored)]
    old = before.split("\n")
    new = after.split("\n")
    body = [e for e in ends if e]
    usual = max(set(body), key=body.count) if body else "\n"
    if len(old) - 1 != len(body):  # ``before`` is not this file's text
        ends, body = [], []
    chosen: list[str] = [usual] * (len(new) - 1)
    if body:
        import difflib  # only for an edit: doit's start-up imports this module

        matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
                for k in range(j2 - j1):
                    if j1 + k < len(chosen) and i1 + k < len(body):
                        chosen[j1 + k] = body[i1 + k]
    out = "".join(line + end for line, end in zip(new, chosen, strict=False)) + new[-1]
    return (codecs.BOM_UTF8 if bom else b"") + out.encode("utf-8")
