"""The files of released torch wheels, laid out as a PyTorch tree, for the real-data tests.

A contributor works on today's main, so the parsers are checked against the newest release
as well as an older one. Each wheel is fetched once with ``pip download --no-deps`` into a
cache outside the repository, and only the files the tool reads are unpacked from it:

- ``aten/src/ATen/native/native_functions.yaml`` and its ``tags.yaml`` (torchgen/packaged/...),
- ``aten/src/ATen/native/*.h``, the headers declaring the stubs (torch/include/ATen/native),
- ``torch/testing/_internal/common_mps.py``, ``common_methods_invocations.py`` and
  ``opinfo/definitions/*.py``,
- ``c10/metal/*.h`` (torch/include/c10/metal), so ``<release>`` is itself an include root.

The next release is a one-line change: NEWEST.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

# The newest release: the real-data tier reads its files beside OLDEST's.
NEWEST = "2.15.0"
# The release `nox -s tests` installs (its op_db and torchgen are imported, not only read)
OLDEST = "2.13.0"
# Every release whose files the tests read; the middle one is the "release before" NEWEST.
RELEASES = (OLDEST, "2.14.1", NEWEST)
CACHE_ENV = "MPS_PIPELINE_WHEEL_CACHE"
# The user's cache home as it was before a test session gave its tests one of their own
# (tests/conftest.py): the wheels stay where they are kept across sessions.
USER_CACHE_HOME_ENV = "MPSP_TEST_USER_CACHE_HOME"

# wheel path -> path in the tree: a file, or a folder's files ending so ("*.h" one level deep,
# "**.py" at any depth)
_NATIVE = "aten/src/ATen/native/"
_PACKAGED = "torchgen/packaged/ATen/native/"
_TESTING = "torch/testing/_internal/"
_LAYOUT = (
    (_PACKAGED + "native_functions.yaml", _NATIVE + "native_functions.yaml"),
    (_PACKAGED + "tags.yaml", _NATIVE + "tags.yaml"),
    (_TESTING + "common_mps.py", _TESTING + "common_mps.py"),
    (_TESTING + "common_methods_invocations.py", _TESTING + "common_methods_invocations.py"),
    # the OpInfos defined outside it, with their MPS DecorateInfos (issue 31)
    (_TESTING + "opinfo/definitions/*.py", _TESTING + "opinfo/definitions/"),
    ("torch/include/ATen/native/*.h", _NATIVE),
    ("torch/include/c10/metal/*.h", "c10/metal/"),
    # inductor's Metal codegen, whose c10::metal calls check-math's audit counts
    ("torch/_inductor/codegen/mps.py", "torch/_inductor/codegen/mps.py"),
    # the release's own torchgen, the reference its yaml is checked against (a checkout
    # has it at its root too); the installed one is OLDEST's and refuses newer yaml
    ("torchgen/**.py", "torchgen/"),
)
# Written into a tree's .complete: a folder unpacked with another layout is unpacked again
# (from the cached wheel), so adding a file to the layout needs no cache to be cleared by hand.
_LAYOUT_ID = hashlib.sha256(repr(_LAYOUT).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Release:
    """One release's files, where the tests find them (a tree laid out as upstream's)."""

    version: str
    root: Path

    @property
    def native_yaml(self) -> Path:
        return self.root / _NATIVE / "native_functions.yaml"

    @property
    def common_mps(self) -> Path:
        return self.root / _TESTING / "common_mps.py"

    @property
    def stub_headers(self) -> Path:
        """The folder of the headers declaring the stubs (DECLARE_DISPATCH)."""
        return self.root / _NATIVE

    @property
    def c10_include(self) -> Path:
        """An include root holding ``c10/metal/*.h``."""
        return self.root

    def torchgen_mps(self, yaml: Path | None = None) -> dict[str, str]:
        """The MPS kernel of every operator, as this release's own torchgen reads ``yaml``
        (default: the release's), with the release's tags.yaml. In a child process: the
        installed torchgen is OLDEST's, and a newer yaml fails its checks."""
        proc = subprocess.run(
            [sys.executable, "-c", _TORCHGEN_MPS, str(self.root), str(yaml or self.native_yaml),
             str(self.native_yaml.with_name("tags.yaml"))],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            raise RuntimeError(f"torchgen {self.version}: {proc.stderr.strip()[-2000:]}")
        kernels: dict[str, str] = json.loads(proc.stdout)
        return kernels


_TORCHGEN_MPS = """
import json, sys
root, yaml, tags = sys.argv[1:]
sys.path.insert(0, root)
import torchgen
assert torchgen.__file__.startswith(root), torchgen.__file__
from torchgen.gen import parse_native_yaml
from torchgen.model import DispatchKey
index = parse_native_yaml(yaml, tags).backend_indices[DispatchKey.MPS].index
print(json.dumps({str(name): meta.kernel for name, meta in index.items()}))
"""


class WheelUnavailable(Exception):
    """The release's wheel could not be fetched (no network, no index): tests skip, saying so."""


def cache_dir() -> Path:
    """Where wheels and their unpacked files live: outside any checkout, kept across runs."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured)
    base = (
        os.environ.get(USER_CACHE_HOME_ENV)
        or os.environ.get("XDG_CACHE_HOME")
        or str(Path.home() / ".cache")
    )
    return Path(base) / "mps-pipeline" / "torch-wheels"


def _target(name: str) -> str | None:
    for source, dest in _LAYOUT:
        if name == source:
            return dest
        folder, star, suffix = source.partition("*")
        if not star or not name.startswith(folder) or not name.endswith(suffix.lstrip("*")):
            continue
        rest = name[len(folder) :]
        if suffix.startswith("*") or "/" not in rest:
            return dest + rest
    return None


def _download(version: str, into: Path) -> Path:
    found = [
        *sorted(into.glob(f"torch-{version}-*.whl")),
        *sorted(into.glob(f"torch-{version}+*.whl")),
    ]
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
    if _complete(tree):
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
    (scratch / ".complete").write_text(f"{wheel.name} {_LAYOUT_ID}\n")
    _install(scratch, tree)
    return tree


def _complete(tree: Path) -> bool:
    """``tree`` was unpacked whole, with today's layout."""
    try:
        return _LAYOUT_ID in (tree / ".complete").read_text().split()
    except OSError:
        return False


def _install(scratch: Path, tree: Path) -> None:
    """Rename ``scratch`` to ``tree``; an older layout's folder there is moved aside first."""
    aside = None
    if tree.exists() and not _complete(tree):
        aside = Path(tempfile.mkdtemp(prefix=f".{tree.name}-old-", dir=tree.parent))
        with contextlib.suppress(OSError):  # another process moved it first
            tree.rename(aside / tree.name)
    try:
        scratch.rename(tree)
    except OSError:  # another process got there first: its folder is as good as ours
        subprocess.run(["rm", "-rf", str(scratch)], check=False)
    if aside is not None:
        subprocess.run(["rm", "-rf", str(aside)], check=False)


def release(version: str) -> Release:
    """``version``'s files (fetched on first use; WheelUnavailable when they cannot be)."""
    return Release(version, release_tree(version))


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
