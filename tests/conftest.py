"""Shared fixtures: the real files of released torch wheels (tests/releases.py), and private
sandbox copies."""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import itertools
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from tests.releases import (
    NEWEST,
    OLDEST,
    USER_CACHE_HOME_ENV,
    Release,
    WheelUnavailable,
    release,
)

T = TypeVar("T")
FIXTURES = Path(__file__).parent / "fixtures"
# the fixtures are PyTorch-shaped trees, whose test/*.py files are data, not our tests
collect_ignore = ["fixtures"]
MATH_CACHE_ENV = "MPS_PIPELINE_MATH_CACHE"
STATE_HOME_ENV = "XDG_STATE_HOME"
# the session's own state home, once made (xdist workers inherit the controller's)
SESSION_STATE_ENV = "MPSP_TEST_STATE_HOME"  # no MPS_PIPELINE_: that would be a setting


def pytest_configure(config: pytest.Config) -> None:
    # The bundled sandbox's default state folder is the user's ($XDG_STATE_HOME/mps-pipeline):
    # never this machine's real one, whatever a test or a session fixture runs (each test
    # then gets its own, `_own_sandbox_state`).
    if not os.environ.get(SESSION_STATE_ENV):
        homes = tempfile.mkdtemp(prefix="mps-pipeline-test-state-")
        os.environ[SESSION_STATE_ENV] = os.environ[STATE_HOME_ENV] = homes
        config.add_cleanup(lambda: shutil.rmtree(homes, ignore_errors=True))
    # The user's cache home is the session's own: check-math's cache is there by default
    # (math.cache), and a command run without our variables, as a user runs it, must never
    # fill this machine's real one. The released wheels stay in the real one (releases.py).
    if USER_CACHE_HOME_ENV not in os.environ:
        os.environ[USER_CACHE_HOME_ENV] = os.environ.get("XDG_CACHE_HOME") or str(
            Path.home() / ".cache"
        )
        cache_home = tempfile.mkdtemp(prefix="mps-pipeline-test-cache-")
        os.environ["XDG_CACHE_HOME"] = cache_home
        config.add_cleanup(lambda: shutil.rmtree(cache_home, ignore_errors=True))
    # One check-math cache (math.cache) for the session's command runs, which inherit the
    # variable, xdist workers included: torch's answers for the sandbox's functors cost
    # seconds of torch import each and are the same in every test's private tree. Entries
    # are named by digests, so sharing cannot give a test another tree's answer. Named, not
    # left to the default it is: so set, op_db's dump is shared too (not in each state dir).
    if MATH_CACHE_ENV not in os.environ:
        from pipeline import config as settings_config
        from pipeline import fsio

        default = Path(fsio.user_cache_dir(os.environ)) / settings_config.MATH_CACHE_NAME
        os.environ[MATH_CACHE_ENV] = str(default)
    # The pytest runs the tests start (the sandbox's test_mps.py, copies of it as checkouts)
    # need no third-party plugin, and loading the dev venv's seven doubled each one's
    # start-up (0.70 -> 0.35 s; hypothesis alone is 0.13 s); a test that wants one passes
    # `-p NAME`. Set once this process has loaded its own, and never in an xdist
    # controller, whose workers must still load theirs.
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", None):
        from pipeline.sandbox import TEST_ENV

        for name, value in TEST_ENV.items():
            os.environ.setdefault(name, value)


_state_homes = itertools.count()


@pytest.fixture(autouse=True)
def _own_sandbox_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's own state home: a run outside any checkout keeps the bundled sandbox's
    working copy there, and one test's migration must not be another's starting tree."""
    home = Path(os.environ[SESSION_STATE_ENV]) / f"{os.getpid()}-{next(_state_homes)}"
    monkeypatch.setenv(STATE_HOME_ENV, str(home))


def math_cache() -> Path:
    """The session's shared check-math cache (see pytest_configure)."""
    return Path(os.environ[MATH_CACHE_ENV])


def settings_env() -> dict[str, str]:
    """The environment for settings loaded in process: only the session's check-math cache
    (see pytest_configure), nothing else of the caller's."""
    return {MATH_CACHE_ENV: os.environ[MATH_CACHE_ENV]}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The modules with slow tests first, each kept whole (its module fixtures are made once)
    # and in its order: xdist hands out tests in collection order, and a two-minute test
    # handed out last would run alone at the end
    slow = {item.path for item in items if "slow" in item.keywords}
    items.sort(key=lambda item: item.path not in slow)
    # `realdata` tests read released wheels' files, and many import the installed torch
    # (op_db, torchgen, the CPU reference): without torch they skip, saying so
    if importlib.util.find_spec("torch") is not None:
        return
    reason = f"needs torch=={OLDEST}, the CPU wheel (nox -s tests installs it)"
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "realdata" in item.keywords:
            item.add_marker(skip)


def in_ci() -> bool:
    """Under CI (``nox -s tests`` sets MPS_PIPELINE_CI=1; hosted runners set CI=true)."""
    return os.environ.get("MPS_PIPELINE_CI") == "1" or os.environ.get("CI", "").lower() == "true"


def fetched(version: str) -> Release:
    """``version``'s files; a skip saying why when they cannot be fetched, a failure in CI
    (a skip there would hide that the newest release was never read)."""
    try:
        return release(version)
    except WheelUnavailable as exc:
        message = f"torch {version}'s files are not cached and could not be fetched: {exc}"
        if in_ci():
            pytest.fail(message + " (CI must read them: python -m tests.releases)", pytrace=False)
        pytest.skip(message)


# Every file fixture below comes from `real_release`: a test taking one runs once per
# release, ids torch-2.13.0 and torch-2.15.0. A test that must read the installed wheel's
# files (beside its op_db or torchgen) narrows it with `oldest_only`.
@pytest.fixture(scope="session", params=(OLDEST, NEWEST), ids=lambda v: f"torch-{v}")
def real_release(request: pytest.FixtureRequest) -> Release:
    """The files of OLDEST (the installed wheel) and of NEWEST (tests/releases.py)."""
    return fetched(request.param)


oldest_only = pytest.mark.parametrize(
    "real_release", [OLDEST], indirect=True, ids=lambda v: f"torch-{v}"
)


def per_release(table: dict[str, T], release: Release) -> T:
    """``table``'s expectation for ``release``: figures read from that release's own files.
    A new NEWEST has none until someone reads its files and adds them."""
    if release.version not in table:
        pytest.fail(
            f"no expectation for torch {release.version}: read its files "
            f"({release.root}) and add its row",
            pytrace=False,
        )
    return table[release.version]


@pytest.fixture(scope="session")
def real_native_yaml(real_release: Release) -> Path:
    """The release's native_functions.yaml, its tags.yaml beside it."""
    return real_release.native_yaml


@pytest.fixture(scope="session")
def real_common_mps(real_release: Release) -> Path:
    """The release's torch/testing/_internal/common_mps.py (read as text, never imported),
    common_methods_invocations.py beside it."""
    return real_release.common_mps


@pytest.fixture(scope="session")
def real_c10_include(real_release: Release) -> Path:
    """An include root holding the release's c10/metal/*.h (compiled, never copied)."""
    return real_release.c10_include


@pytest.fixture(scope="session")
def real_stub_headers(real_release: Release) -> Path:
    """The folder of the release's ATen/native/*.h, the headers declaring the stubs."""
    return real_release.stub_headers


@pytest.fixture(scope="session")
def host_cxx():
    """The host C++ compiler check-math uses (clang++ or g++)."""
    from pipeline.errors import ConfigError
    from pipeline.run import cxx

    try:
        return cxx.find_compiler(None)
    except ConfigError:
        pytest.skip("no clang++ or g++ on PATH")


@pytest.fixture(scope="session")
def host_clang():
    """A clang++ that can build the shim (>= 15: Debian 12's default clang 14 has no
    _Float16). Absent, the test skips, except under CI, which installs clang-19."""
    from pipeline.errors import ConfigError
    from pipeline.run import cxx

    for name in ("clang++", *(f"clang++-{v}" for v in range(25, 14, -1))):
        try:
            return cxx.find_compiler(name)
        except ConfigError:
            continue
    if os.environ.get("CI"):
        pytest.fail("no clang++ >= 15 on PATH: CI installs clang-19 (see .ci/run)")
    pytest.skip("no clang++ >= 15 on PATH (apt-get install clang-19)")


def git_init(path: Path) -> None:
    """Make ``path`` a git work tree with everything committed (edits then show as dirty)."""
    run = lambda *a: subprocess.run(["git", "-C", str(path), *a], check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    run("-c", "user.email=t@t", "-c", "user.name=t", "add", "-A")
    run("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "base")


def git(root: Path, *args: str) -> str:
    """``git args`` in ``root`` as a fixed test identity; its stripped output."""
    identity = ["-c", "user.email=t@t", "-c", "user.name=t", "-c", "commit.gpgsign=false"]
    proc = subprocess.run(
        ["git", "-C", str(root), *identity, *args], capture_output=True, text=True, check=True
    )
    return proc.stdout.strip()


def commit(root: Path, message: str) -> str:
    """Commit everything in ``root``; the new HEAD."""
    git(root, "add", "-A")
    git(root, "commit", "-qm", message)
    return git(root, "rev-parse", "HEAD")


# what `import torch` finds in this interpreter's site-packages: torch, torchgen, functorch
# and their dist-info folders
_TORCH_ENTRIES = ("torch", "functorch")


def site_without_torch(dest: Path) -> Path:
    """``dest``: a folder of links to everything in this interpreter's site-packages but
    torch (pytest and every dependency of mps-pipeline included): what a venv holds after a
    plain ``pip install mps-pipeline``. A venv names it in a ``.pth`` path line (which runs
    none of the ``.pth`` files inside it: this checkout's editable install stays out)."""
    dest.mkdir(parents=True)
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.startswith(_TORCH_ENTRIES):
            (dest / entry.name).symlink_to(entry)
    return dest


def venv_with(venv: Path, *folders: Path) -> Path:
    """A fresh venv (no pip, no system site-packages) whose site-packages adds ``folders``
    through a ``.pth`` file; its interpreter."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "_dependencies.pth").write_text("".join(f"{folder}\n" for folder in folders))
    return venv / "bin" / "python"


# What the tool's wheel is built from: anything else in the checkout must not matter.
WHEEL_SOURCES = ("pyproject.toml", "README.md", "pipeline")


def _sources_digest(repo: Path) -> str:
    """A digest of WHEEL_SOURCES' files (names and bytes): what the wheel is made of."""
    digest = hashlib.sha256()
    for name in WHEEL_SOURCES:
        top = repo / name
        files = sorted(top.rglob("*")) if top.is_dir() else [top]
        for path in files:
            if path.is_file() and not {"__pycache__", ".pytest_cache"} & set(path.parts):
                digest.update(path.relative_to(repo).as_posix().encode() + b"\0")
                digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def session_shared(
    tmp_path_factory: pytest.TempPathFactory, key: str, make: Callable[[Path], object]
) -> Path:
    """``make(folder)``'s folder, made once for the whole session, xdist workers included:
    the first worker to ask makes it, in place (a venv cannot move), under a file lock; the
    others wait for it and reuse it. ``key`` must name everything the result depends on;
    what is made must be read-only for the tests that use it."""
    base = tmp_path_factory.getbasetemp()
    # each xdist worker's basetemp is a folder of the session's (pytest-N/popen-gwK)
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared"
    shared.mkdir(exist_ok=True)
    done = shared / key
    with open(shared / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # made only when the marker is there: a worker that failed half-way left a folder
        if not (shared / f"{key}.made").exists():
            shutil.rmtree(done, ignore_errors=True)
            done.mkdir()
            make(done)
            (shared / f"{key}.made").touch()
    return done


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tool's wheel (``pip wheel --no-deps``), built once a session (shared by the xdist
    workers) from a copy of WHEEL_SOURCES (building in the checkout would leave build/
    there), for every test of the installed tool (tests/test_install.py,
    tests/test_first_hour.py)."""
    repo = Path(__file__).resolve().parents[1]

    def build(dist: Path) -> None:
        src = tmp_path_factory.mktemp("wheel-src")
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
        for name in WHEEL_SOURCES:
            if (repo / name).is_dir():
                shutil.copytree(repo / name, src / name, ignore=ignore)
            else:
                shutil.copy2(repo / name, src / name)
        # setuptools in this interpreter builds it; with none, pip fetches it (build isolation)
        isolation = ["--no-build-isolation"] if importlib.util.find_spec("setuptools") else []
        pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
        subprocess.run(
            [*pip, "wheel", "--no-deps", *isolation, "-w", str(dist), str(src)],
            check=True,
            timeout=600,
        )

    dist = session_shared(tmp_path_factory, f"wheel-{_sources_digest(repo)}", build)
    (built,) = dist.glob("mps_pipeline-*.whl")
    return built


def wheel_key(wheel: Path) -> str:
    """A short digest of ``wheel``'s bytes, for the keys of what is made from it."""
    return hashlib.sha256(wheel.read_bytes()).hexdigest()[:16]


@pytest.fixture(scope="session")
def python_without_torch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An interpreter that has pytest and mps-pipeline (this checkout) but no torch: the
    sandbox's tests run in it, check-math cannot."""
    base = tmp_path_factory.mktemp("no-torch")
    repo = Path(__file__).resolve().parents[1]
    python = venv_with(base / "venv", site_without_torch(base / "site-packages"), repo)
    found = subprocess.run([str(python), "-c", "import torch"], capture_output=True)
    assert found.returncode != 0, "torch is still importable"
    return python


@pytest.fixture
def sandbox_tree(tmp_path: Path) -> Path:
    """A fresh, git-committed copy of the bundled sandbox tree."""
    from pipeline import sandbox

    dest = tmp_path / "pytorch"
    shutil.copytree(sandbox.TREE, dest)
    git_init(dest)
    return dest


@pytest.fixture
def sandbox_settings(tmp_path: Path):
    """Settings on a private, freshly materialized sandbox (its own state dir)."""
    from pipeline.config import load_settings
    from pipeline.workspace import prepare

    return prepare(
        load_settings({"state_dir": str(tmp_path / "state")}, env=settings_env(), cwd=tmp_path)
    )


@pytest.fixture(scope="session")
def nightly_reports(tmp_path_factory) -> dict[str, tuple[Path, ...]]:
    """JUnit files of real pytest runs by scenario (tests.results.nightly_runs.tiny_reports),
    run once a session, the xdist workers sharing them (every test copies or reads them)."""
    from tests.results import nightly_runs

    # keyed by the module that writes and runs them: the same file runs the same way
    key = hashlib.sha256(Path(nightly_runs.__file__).read_bytes()).hexdigest()[:16]
    work = session_shared(tmp_path_factory, f"tiny-{key}", nightly_runs.tiny_reports)
    return nightly_runs.reports_in(work)


@pytest.fixture
def nights(tmp_path: Path, nightly_reports):
    """Night after night of results/<runner>/shard-<n>.xml, as the nightly workflow lays out."""
    from tests.results.nightly_runs import Nights

    return Nights(tmp_path / "results", nightly_reports)


def deny_read(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``path`` unreadable: mode 000, and (as root reads anything) reading it raise the
    PermissionError a user would get."""
    path.chmod(0)
    if os.access(path, os.R_OK):
        original = Path.read_bytes

        def denied(self: Path) -> bytes:
            if self == path:
                raise PermissionError(13, "Permission denied", str(self))
            return original(self)

        monkeypatch.setattr(Path, "read_bytes", denied)


def outside_a_checkout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[Path, Path]:
    """A current folder inside no checkout, no MPS_PIPELINE_* variable, and a state home of
    the test's own (XDG_STATE_HOME): where a sandbox run keeps its state. (here, home)."""
    for name in [k for k in os.environ if k.startswith("MPS_PIPELINE_")]:
        monkeypatch.delenv(name)
    here, home = tmp_path / "here", tmp_path / "state-home"
    here.mkdir()
    monkeypatch.chdir(here)
    monkeypatch.setenv("XDG_STATE_HOME", str(home))
    return here, home


@pytest.fixture(scope="session")
def pg_server():
    """A real PostgreSQL server of the session's own (tests/postgres.py), on 127.0.0.1.
    Absent binaries skip the tests that need it, except under CI, whose .ci/run installs
    Debian's postgresql."""
    from tests.postgres import PostgresUnavailable, start

    try:
        server = start()
    except PostgresUnavailable as exc:
        if in_ci():
            pytest.fail(f"no PostgreSQL server for the tests: {exc} (see .ci/run)", pytrace=False)
        pytest.skip(f"no PostgreSQL server for the tests: {exc}")
    yield server
    server.stop()


@pytest.fixture
def pg_url(pg_server) -> str:
    """A fresh, empty database on the session's server: its URL (as the superuser)."""
    return pg_server.new_database()
