"""A real PostgreSQL server for the tests: initdb and pg_ctl in a temp folder, listening on
127.0.0.1 only (and a socket in that folder), password authentication (scram-sha-256), so
the URLs the tests pass carry a real password to keep out of the logs.

The binaries are found on PATH, else where ``pg_config --bindir`` says, else in Debian's
/usr/lib/postgresql/<version>/bin (the newest). PostgreSQL refuses to run as root: as root
(CI, this machine) the server runs as the ``postgres`` user Debian's package makes, its
folder given to that user. :func:`start` raises :class:`PostgresUnavailable` saying what is
missing; the ``pg_server`` fixture (tests/conftest.py) skips on it, and fails under CI.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

SUPERUSER = "mps_admin"
# a password with characters a URL must escape: what a redaction has to find either way
PASSWORD = "s3cr:et/pw@x"
RUN_AS = "postgres"  # as root: the user Debian's postgresql package makes


class PostgresUnavailable(Exception):
    """No server could be started; the message says why."""


def bindir() -> Path:
    """The folder holding initdb, pg_ctl and postgres."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=True)
        folder = Path(out.stdout.strip())
        if (folder / "initdb").is_file():
            return folder
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: [int(n) for n in re.findall(r"\d+", p.parent.parent.name)],
    )
    if versions:
        return versions[-1].parent
    raise PostgresUnavailable(
        "no initdb/pg_ctl on PATH, from pg_config --bindir or in /usr/lib/postgresql/*/bin "
        "(apt-get install postgresql)"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """A running server in ``folder``; :meth:`stop` ends it and removes the folder."""

    def __init__(self, bin_dir: Path, folder: Path, port: int, user: str | None) -> None:
        self.bin_dir, self.folder, self.port, self._user = bin_dir, folder, port, user
        self._databases = itertools.count(1)

    def url(self, database: str = "postgres", user: str = SUPERUSER, password: str = PASSWORD):
        return (
            f"postgresql://{quote(user, safe='')}:{quote(password, safe='')}"
            f"@127.0.0.1:{self.port}/{database}"
        )

    def admin(self, database: str = "postgres"):
        """An autocommit superuser connection."""
        import psycopg

        return psycopg.connect(self.url(database), autocommit=True)

    def new_database(self) -> str:
        """A fresh, empty database's URL (as the superuser)."""
        name = f"t{os.getpid()}_{next(self._databases)}"
        with self.admin() as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def pg_ctl(self, *args: str) -> subprocess.CompletedProcess:
        return _run(self._user, [str(self.bin_dir / "pg_ctl"), "-D", str(self.folder / "data"),
                                 *args])  # fmt: skip

    def stop(self) -> None:
        self.pg_ctl("-m", "immediate", "-w", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)


def _run(user: str | None, argv: list[str]) -> subprocess.CompletedProcess:
    extra = {}
    if user is not None:
        entry = pwd.getpwnam(user)
        extra = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, **extra)


def start() -> Server:
    """initdb, then pg_ctl start on a free port; PostgresUnavailable saying why not."""
    bin_dir = bindir()
    user = None
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(RUN_AS)
        except KeyError:
            raise PostgresUnavailable(
                f"running as root, and no {RUN_AS!r} user to run the server as "
                "(apt-get install postgresql makes it)"
            ) from None
        user = RUN_AS
    folder = Path(tempfile.mkdtemp(prefix="mps-pipeline-pg-"))
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(folder, entry.pw_uid, entry.pw_gid)
    (folder / "pw").write_text(PASSWORD + "\n")
    if user is not None:
        os.chown(folder / "pw", pwd.getpwnam(user).pw_uid, -1)
    made = _run(user, [str(bin_dir / "initdb"), "-D", str(folder / "data"), "-U", SUPERUSER,
                       f"--pwfile={folder / 'pw'}", "-A", "scram-sha-256", "-E", "UTF8",
                       "--locale=C", "--no-sync"])  # fmt: skip
    if made.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        raise PostgresUnavailable(f"initdb failed: {made.stderr.strip()[-500:]}")
    for _attempt in range(3):  # a port taken between the probe and the start: another
        server = Server(bin_dir, folder, _free_port(), user)
        options = (f"-c listen_addresses=127.0.0.1 -p {server.port} -c fsync=off "
                   f"-c unix_socket_directories={folder} -c max_connections=40")  # fmt: skip
        up = server.pg_ctl("-l", str(folder / "log"), "-w", "-t", "60", "-o", options, "start")
        if up.returncode == 0:
            return server
    log = (folder / "log").read_text(errors="replace")[-500:] if (folder / "log").exists() else ""
    shutil.rmtree(folder, ignore_errors=True)
    raise PostgresUnavailable(f"pg_ctl start failed: {up.stderr.strip()} {log}")


@contextlib.contextmanager
def running() -> Iterator[Server]:
    server = start()
    try:
        yield server
    finally:
        server.stop()
