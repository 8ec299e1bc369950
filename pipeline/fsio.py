"""Writing files so that a reader (or a crash) never sees half of one; and telling, from
their status alone, whether paths are as they were (what a warm audit's replay and the
settings' memo are keyed on: :mod:`pipeline.flows.audit_replay`, :mod:`pipeline.workspace`).

Light on purpose: the warm CLI audit imports this before anything else of the pipeline.
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False  # typing's own costs a warm audit's replay 3 ms (mypy reads it alike)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from pathlib import Path
    from typing import Any

# A path whose status changed less than this before it was looked at may change again with
# the same status: a few ticks of the coarse clock file systems stamp times with (Linux:
# 1-10 ms). A file system stamping coarser times (whole seconds: HFS+, ext3; FAT's 2 s)
# shows it in the times themselves, and twice their step is waited for instead.
RACY_NS = 50_000_000
_PACKAGE = os.path.dirname(os.path.abspath(__file__))


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write via a temporary file in the same directory and rename: never half-written."""
    import tempfile  # here: most importers of this module only read

    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # text is written as its UTF-8 bytes, untranslated: what mode "w" with newline=""
        # would write, through one file type
        with os.fdopen(fd, "wb") as fh:
            fh.write(data if isinstance(data, bytes) else data.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


def status(path: str) -> list[int] | None:
    """What changes whenever ``path`` is created, removed, replaced, written or re-pointed
    (a symlink: its own status and its target's); None when nothing is there."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    own = [st.st_mode, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
    if stat.S_ISLNK(st.st_mode):
        try:
            to = os.stat(path)
        except OSError:
            return [*own, -1]
        own += [to.st_mode, to.st_dev, to.st_ino, to.st_size, to.st_mtime_ns, to.st_ctime_ns]
    return own


def kind(path: str) -> list[int] | None:
    """What is at ``path``, by file type only (a symlink: and its target's)."""
    found = status(path)
    return None if found is None else [stat.S_IFMT(m) for m in found[::6]]


def _step(ns: int) -> int:
    """The coarsest power of ten (up to a second) that a time stamp ``ns`` is a multiple of:
    the step its file system stamps times in, or a finer one."""
    step = 1
    while step < 1_000_000_000 and ns % (step * 10) == 0:
        step *= 10
    return step


def racy(found: list[int], looked: int) -> bool:
    """Whether a :func:`status` taken at ``looked`` (ns since the epoch) is too recent a
    change to trust: another change could follow with the same status."""
    for at in range(0, len(found) - 5, 6):  # its own and, for a symlink, its target's
        mtime, ctime = found[at + 4], found[at + 5]
        margin = max(RACY_NS, 2 * max(_step(mtime), _step(ctime)))
        if ctime > looked - margin:
            return True
    return False


def statuses(paths: Iterable[str], looked: int) -> dict[str, list[int] | None] | None:
    """The :func:`status` of each path, taken at ``looked`` (ns since the epoch), or None
    when one is too recent a change to trust (:func:`racy`)."""
    found = {path: status(path) for path in paths}
    if any(st is not None and racy(st, looked) for st in found.values()):
        return None
    return found


def holds(entries: Any, now: Callable[[str], object]) -> bool:
    """Every ``[path, what]`` of ``entries`` (read back from JSON) is still ``now(path)``."""
    return isinstance(entries, list) and all(
        isinstance(entry, list) and len(entry) == 2 and now(entry[0]) == entry[1]
        for entry in entries
    )


SANDBOX_STATE = "mps-pipeline"  # the bundled sandbox's state folder, in the user's state home
USER_CACHE = "mps-pipeline"  # ours in the user's cache home
# the variables a default path is read from: a ~ in a path setting, the user's state and
# cache homes (what the settings' memo and the warm audit's replay are keyed on, with ours)
HOME_VARIABLES = ("HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME")


def _xdg_home(env: Mapping[str, str], variable: str, *default: str) -> str:
    """``$variable``, else ``~/<default>`` (``env``'s HOME, else the user's). A relative
    value is ignored, as the XDG spec says."""
    home = env.get(variable) or ""
    if os.path.isabs(home):
        return home
    return os.path.join(env.get("HOME") or os.path.expanduser("~"), *default)


def sandbox_state_dir(env: Mapping[str, str]) -> str:
    """The default state folder of a run on the bundled sandbox: ``$XDG_STATE_HOME/
    mps-pipeline``, else ``~/.local/state/mps-pipeline``.

    Never the current directory: a folder that is no checkout gets nothing of ours. Here,
    not in the settings' modules, because the settings' memo and the warm audit's replay
    look for it before any settings are resolved."""
    return os.path.join(_xdg_home(env, "XDG_STATE_HOME", ".local", "state"), SANDBOX_STATE)


def user_cache_dir(env: Mapping[str, str]) -> str:
    """The user's cache folder of ours: ``$XDG_CACHE_HOME/mps-pipeline``, else
    ``~/.cache/mps-pipeline``. What is in it is named by digests of what made it, so every
    checkout and state folder of the user may share it, and deleting it loses only time."""
    return os.path.join(_xdg_home(env, "XDG_CACHE_HOME", ".cache"), USER_CACHE)


def package_files() -> list[str]:
    """Every module and data file of mps-pipeline (the bundled sandbox's tree aside: it is
    only copied, once): a new mps-pipeline may resolve or print differently."""
    found = []
    sandbox_tree = os.path.join(_PACKAGE, "sandbox", "tree")
    for folder, subfolders, names in os.walk(_PACKAGE):
        subfolders[:] = sorted(
            d for d in subfolders
            if d != "__pycache__" and os.path.join(folder, d) != sandbox_tree
        )  # fmt: skip
        found += [os.path.join(folder, n) for n in sorted(names) if n.endswith((".py", ".yaml"))]
    return found
