"""The files of released torch wheels, laid out as a PyTorch tree, for the real-data tests.

A contributor works on today's main, so the parsers are checked against the newest release
as well as an older one. Each wheel is fetched once with ``pip download --no-deps`` into a
cache outside the repository, and only the files the tool reads are unpacked from it:

- ``aten/src/ATen/native/native_functions.yaml`` (torchgen/packaged/...),
- ``aten/src/ATen/native/*.h``, the headers declaring the stubs (torch/include/ATen/native),
- ``torch/testing/_internal/common_mps.py``,
- ``c10/metal/*.h`` (torch/include/c10/metal), so ``<release>`` is itself an include root.

The next release is a one-line change: NEWEST.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# The newest release: the real-data tier reads its files beside OLDEST's.
NEWEST = "2.15.0"
# The release `nox -s tests` installs (its op_db and torchgen are imported, not only read)
OLDEST = "2.13.0"
# Every release whose files the tests read; the middle one is the "release before" NEWEST.
RELEASES = (OLDEST, "2.14.1", NEWEST)
CACHE_ENV = "MPS_PIPELINE_WHEEL_CACHE"

# wheel path -> path in the tree, by prefix; headers are taken one level deep only
_LAYOUT = (
    ("torchgen/packaged/ATen/native/native_functions.yaml",
     "aten/src/ATen/native/native_functions.yaml"),
    ("torch/testing/_internal/common_mps.py", "torch/testing/_internal/common_mps.py"),
    ("torch/include/ATen/native/", "aten/src/ATen/native/"),
    ("torch/include/c10/metal/", "c10/metal/"),
)  # fmt: skip


class WheelUnavailable(Exception):
    """The release's wheel could not be fetched (no network, no index): tests skip, saying so."""


def cache_dir() -> Path:
    """Where wheels and their unpacked files live: outside any checkout, kept across runs."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mps-pipeline" / "torch-wheels"


def _target(name: str) -> str | None:
    for prefix, dest in _LAYOUT:
        if name == prefix and not name.endswith("/"):
            return dest
        if prefix.endswith("/") and name.startswith(prefix) and name.endswith(".h"):
            rest = name[len(prefix) :]
            if "/" not in rest:
                return dest + rest
    return None


def _download(version: str, into: Path) -> Path:
    found = [*sorted(into.glob(f"torch-{version}-*.whl")), *into.glob(f"torch-{version}+*.whl")]
    if found:
        return found[0]
    # This machine's pip configuration caps torch below the newest release with a
    # constraints file: an empty one lifts the cap for this download alone.
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as empty:
        pass
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", f"torch=={version}",
             "-d", str(into)],
            capture_output=True, text=True, env={**os.environ, "PIP_CONSTRAINT": empty.name},
        )  # fmt: skip
    finally:
        os.unlink(empty.name)
    found = sorted(into.glob(f"torch-{version}*.whl"))
    if proc.returncode != 0 or not found:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise WheelUnavailable(f"pip download torch=={version} failed: {tail[0]}")
    return found[0]


def release_tree(version: str) -> Path:
    """The folder holding ``version``'s files in the tree layout above (fetched on first use).

    Unpacked into a temporary sibling and renamed into place, so two test processes asking
    at once both end with a whole folder.
    """
    base = cache_dir()
    tree = base / f"torch-{version}"
    if (tree / ".complete").exists():
        return tree
    base.mkdir(parents=True, exist_ok=True)
    wheel = _download(version, base)
    scratch = Path(tempfile.mkdtemp(prefix=f".torch-{version}-", dir=base))
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            dest = _target(name)
            if dest is not None:
                path = scratch / dest
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(archive.read(name))
    (scratch / ".complete").write_text(wheel.name + "\n")
    try:
        scratch.rename(tree)
    except OSError:  # another process got there first: its folder is as good as ours
        subprocess.run(["rm", "-rf", str(scratch)], check=False)
    return tree


def main() -> int:
    """``python -m tests.releases``: fetch every release's files (what nox -s tests runs first)."""
    for version in RELEASES:
        try:
            print(f"torch {version}: {release_tree(version)}")
        except WheelUnavailable as exc:
            print(f"torch {version}: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
