"""What changed: files with both texts and the line ranges git reports for each side.

``changed_files`` asks git; ``changes_from_list`` builds the same records from a list of
paths and line ranges (a PR's file list, an editor's selection). Analysis never calls git:
it works on these records only.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import PipelineError, UnreadableFileError

Range = tuple[int, int]  # 1-based, inclusive

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass(frozen=True)
class ChangedFile:
    """One changed file. ``status`` is "A" (added), "M" (modified) or "D" (deleted).

    ``old_text`` is None when the previous version is unknown (a file list without a base):
    analysis then attributes the ``new_ranges`` instead of comparing versions. ``new_text``
    is None for a deleted file. Ranges are 1-based inclusive line ranges in that version.
    """

    path: str
    status: str
    old_text: str | None
    new_text: str | None
    old_ranges: tuple[Range, ...]
    new_ranges: tuple[Range, ...]


def parse_hunk_ranges(patch: str) -> tuple[tuple[Range, ...], tuple[Range, ...]]:
    """Old and new line ranges of every ``@@`` hunk header in one file's ``--unified=0`` patch.

    A side with a zero line count (pure insertion or deletion) contributes no range.
    """
    old: list[Range] = []
    new: list[Range] = []
    for line in patch.splitlines():
        match = _HUNK.match(line)
        if not match:
            continue
        o_start, o_count, n_start, n_count = match.groups()
        o_len = 1 if o_count is None else int(o_count)
        n_len = 1 if n_count is None else int(n_count)
        if o_len:
            old.append((int(o_start), int(o_start) + o_len - 1))
        if n_len:
            new.append((int(n_start), int(n_start) + n_len - 1))
    return tuple(old), tuple(new)


def _git(root: Path, *args: str, stdin: bytes | None = None) -> bytes:
    proc = subprocess.run(
        ["git", "-C", str(root), "-c", "core.quotePath=false", *args],
        input=stdin,
        capture_output=True,
        check=False,
    )
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip()
        raise PipelineError(
            f"git {' '.join(args[:2])} failed in {root}: {err or 'exit ' + str(proc.returncode)}; "
            "check that the root is a git checkout and the revisions exist (git rev-parse REV)"
        )
    return proc.stdout


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def read_revision(root: Path, rev: str, paths: Sequence[str]) -> dict[str, str | None]:
    """The text of each path at ``rev`` (None where the path does not exist there).

    One ``git cat-file --batch`` process serves all paths, so reading a whole source tree
    at a revision costs one subprocess, not one per file.
    """
    if not paths:
        return {}
    request = "".join(f"{rev}:{p}\n" for p in paths).encode()
    out = _git(root, "cat-file", "--batch", stdin=request)
    texts: dict[str, str | None] = {}
    pos = 0
    for path in paths:
        eol = out.index(b"\n", pos)
        header = out[pos:eol].decode(errors="replace")
        pos = eol + 1
        if header.endswith(" missing") or header.endswith(" ambiguous"):
            texts[path] = None
            continue
        size = int(header.rsplit(" ", 1)[1])
        kind = header.split(" ")[1]
        body = out[pos : pos + size]
        pos += size + 1  # the object is followed by a newline
        texts[path] = _decode(body) if kind == "blob" else None
    return texts


def list_revision(root: Path, rev: str | None, prefixes: Sequence[str]) -> tuple[str, ...]:
    """Tracked files under ``prefixes`` at ``rev``, or in the work tree when ``rev`` is None."""
    if rev is None:
        out = _git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--")
        names = [n for n in _decode(out).split("\0") if n]
        return tuple(sorted(n for n in set(names) if n.startswith(tuple(prefixes))))
    out = _git(root, "ls-tree", "-r", "-z", "--name-only", rev, "--", *prefixes)
    return tuple(n for n in _decode(out).split("\0") if n)


def _split_patch(patch: str) -> list[str]:
    blocks: list[str] = []
    for line in patch.splitlines(keepends=True):
        if line.startswith("diff --git "):
            blocks.append(line)
        elif blocks:
            blocks[-1] += line
    return blocks


def changed_files(root: Path, base: str, head: str | None = None) -> tuple[ChangedFile, ...]:
    """Files that differ between ``base`` and ``head`` (the work tree when ``head`` is None).

    Uses ``git diff --unified=0 --no-renames`` (a rename is a deletion plus an addition, so
    both paths are analysed); untracked, non-ignored files count as added when comparing
    against the work tree. Both versions of every file are read.
    """
    spec = [base] if head is None else [f"{base}..{head}"]
    common = ["--no-renames", "--no-ext-diff", "--no-color", "--no-textconv"]
    names = _decode(_git(root, "diff", "-z", "--name-status", *common, *spec, "--"))
    fields = [f for f in names.split("\0") if f]
    entries = [(fields[i][0], fields[i + 1]) for i in range(0, len(fields), 2)]
    # git writes file blocks in the same (sorted) order in both formats
    blocks = _split_patch(_decode(_git(root, "diff", "--unified=0", *common, *spec, "--")))
    if len(blocks) != len(entries):
        raise PipelineError(
            f"git diff listed {len(entries)} files but wrote {len(blocks)} patches; "
            "is a diff driver or external diff configured for this repository?"
        )
    untracked: list[str] = []
    if head is None:
        out = _git(root, "ls-files", "-z", "--others", "--exclude-standard")
        untracked = [n for n in _decode(out).split("\0") if n]

    old_texts = read_revision(root, base, [p for s, p in entries if s != "A"])
    new_paths = [p for s, p in entries if s != "D"]
    if head is None:
        new_texts = {p: _read_disk(root, p) for p in [*new_paths, *untracked]}
    else:
        new_texts = read_revision(root, head, new_paths)

    result: list[ChangedFile] = []
    for (status, path), block in zip(entries, blocks, strict=True):
        old_ranges, new_ranges = parse_hunk_ranges(block)
        result.append(
            ChangedFile(
                path=path,
                status=status if status in "AMD" else "M",
                old_text="" if status == "A" else old_texts.get(path),
                new_text=None if status == "D" else new_texts.get(path),
                old_ranges=old_ranges,
                new_ranges=new_ranges,
            )
        )
    for path in untracked:
        text = new_texts[path] or ""
        result.append(ChangedFile(path, "A", "", text, (), _whole(text)))
    return tuple(sorted(result, key=lambda c: c.path))


def _read_disk(root: Path, path: str) -> str | None:
    # Lenient decoding: a diff's analysis reads what it can of a file that is not UTF-8
    # (the readers refuse it when they parse it).
    try:
        return (root / path).read_bytes().decode("utf-8", errors="replace")
    except (FileNotFoundError, IsADirectoryError):
        return None
    except OSError as exc:
        raise UnreadableFileError(path, f"cannot be read: {exc.strerror or exc}") from None


def _whole(text: str | None) -> tuple[Range, ...]:
    count = len(text.splitlines()) if text else 0
    return ((1, count),) if count else ()


def changes_from_list(
    root: Path, files: Iterable[tuple[str, Sequence[Range]]]
) -> tuple[ChangedFile, ...]:
    """Changed files from ``[(path, [(start, end), ...]), ...]`` with ranges in the current
    version on disk under ``root``.

    An empty range list means the whole file. The previous version is unknown
    (``old_text`` None), so analysis attributes the given lines instead of comparing
    versions; a path missing on disk is a deletion whose contents are unknown.
    """
    result: list[ChangedFile] = []
    for path, ranges in files:
        text = _read_disk(root, path)
        if text is None:
            result.append(ChangedFile(path, "D", None, None, (), ()))
            continue
        spans = tuple((int(a), int(b)) for a, b in ranges) or _whole(text)
        result.append(ChangedFile(path, "M", None, text, (), spans))
    return tuple(result)


_RANGES = re.compile(r"\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*")
# what a line suffix is made of: a path ending in ":12-" is a typo, not a file name
_RANGE_CHARS = re.compile(r"[\d,\-]*")


def parse_changed(spec: str) -> tuple[str, list[Range]]:
    """``path[:A-B,C,...]`` -> (path, [(A, B), (C, C)]); no ranges means the whole file.

    The suffix is what follows the last ``:`` when it is made of digits, commas and dashes
    only (or is empty), so ``a:b/c.mm:3`` is ``a:b/c.mm`` line 3 and ``c.mm:x`` is a path.
    Such a suffix that is not a list of ranges (``c.mm:``, ``c.mm:3-``, ``c.mm:5-2``,
    ``c.mm:0``) is an error, not part of the path.
    """
    suffix: str | None
    path, colon, suffix = spec.rpartition(":")
    if not colon or not _RANGE_CHARS.fullmatch(suffix):
        path, suffix = spec, None
    if not path or (suffix is not None and not _RANGES.fullmatch(suffix)):
        raise _bad_changed(spec)
    ranges: list[Range] = []
    for part in suffix.split(",") if suffix else ():
        start, _, end = part.partition("-")
        first, last = int(start), int(end or start)
        if not 1 <= first <= last:
            raise _bad_changed(spec)
        ranges.append((first, last))
    return path, ranges


def _bad_changed(spec: str) -> PipelineError:
    return PipelineError(
        f"--changed {spec!r}: expected PATH or PATH:START-END[,START-END...] with "
        "1 <= START <= END (line numbers of the file on disk)"
    )


def _under(path: Path, roots: Sequence[Path]) -> str | None:
    """``path`` relative to the first of ``roots`` it lies under (POSIX), or None.

    Compared as written (``..`` folded) and with its directories' symlinks resolved; the
    last component is not resolved, so a symlink in the tree keeps its own name.
    """
    lexical = Path(os.path.abspath(path))
    real = Path(os.path.realpath(lexical.parent)) / lexical.name
    for candidate in (lexical, real):
        for root in roots:
            if candidate.is_relative_to(root):
                return candidate.relative_to(root).as_posix()
    return None


def tree_path(root: Path, path: str, cwd: Path | None = None) -> tuple[str | None, str | None]:
    """Where ``path``, as given to ``--changed``, is in the tree: ``(root-relative POSIX
    path, None)``, or ``(None, why not)``.

    An absolute path must lie under ``root`` (symlinks of either resolved). A relative path
    is taken from ``cwd`` (default: the current directory) when that names a file under
    ``root``, else from ``root``. The file must exist: a listed path has no previous
    version, so a deleted file has nothing to analyse (``--base REV`` sees deletions).
    """
    given = Path(path)
    cwd = Path.cwd() if cwd is None else cwd
    real_root = root.resolve()
    roots = list(dict.fromkeys([Path(os.path.abspath(root)), real_root]))
    candidates = [given] if given.is_absolute() else [cwd / given, real_root / given]
    inside: list[str] = []
    for candidate in candidates:
        rel = _under(candidate, roots)
        if rel is None or rel in inside:
            continue
        if rel != "." and (real_root / rel).is_file():
            return rel, None
        inside.append(rel)
    if any(rel == "." or (real_root / rel).is_dir() for rel in inside):
        return None, f"a directory, not a file, in the tree {real_root}"
    outside = [c for c in candidates if _under(c, roots) is None]
    if not inside or any(os.path.lexists(c) for c in outside):
        return None, f"outside the tree {real_root}"
    looked = ", ".join(inside)
    return None, (
        f"no such file in the tree {real_root} (looked for {looked}); "
        "a deleted file is analysed from a diff: --base REV"
    )
