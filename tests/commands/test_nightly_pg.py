"""`nightly`, `shards`, `config` against a real history server (the session's PostgreSQL):
the URL from the setting's variable, its password in no output, and the faults a server
brings (gone mid-night, a lock another job holds, a newer schema): exit 2, one line, and
nothing half-recorded."""

from __future__ import annotations

import json

import psycopg
import pytest

from pipeline.__main__ import main
from pipeline.config import env_var, load_settings
from pipeline.flows import nightly as nightly_flow
from pipeline.results import history_pg
from pipeline.results.history_schema import SCHEMA_VERSION
from pipeline.workspace import prepare
from tests.postgres import PASSWORD

URL_ENV = env_var("history.url")
SECRETS = (PASSWORD, "s3cr%3Aet%2Fpw%40x", "s3cr:et")


@pytest.fixture
def server(pg_url, tmp_path, monkeypatch):
    """The history.url setting naming a fresh database; the state folder's own."""
    monkeypatch.setenv(URL_ENV, pg_url)
    monkeypatch.setenv(env_var("state_dir"), str(tmp_path / "state"))
    monkeypatch.setenv(env_var("lock_wait"), "0.5")
    prepare(load_settings({}))
    return pg_url


def _nights(url: str) -> int:
    with psycopg.connect(url) as raw:
        return raw.execute("SELECT COUNT(DISTINCT started) FROM runs").fetchone()[0]


def _said(capsys) -> str:
    out = capsys.readouterr()
    said = out.out + out.err
    for secret in SECRETS:
        assert secret not in said
    return said


def _error(capsys) -> str:
    """The one error line a failed command said (the root line comes before it)."""
    lines = _said(capsys).strip().splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    assert errors == lines[-1:], lines
    return errors[0]


def test_the_nightly_records_on_the_server_and_says_so_without_the_password(
    server, nights, capsys, tmp_path
):
    assert main(["nightly", "--results", str(nights.results()), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert len(summary["runners"]) == 3 and _nights(server) == 1
    assert not (tmp_path / "state" / "history").exists()  # no SQLite file beside it
    assert main(["nightly", "--check-history"]) == 0
    said = _said(capsys)
    assert "1 nightlies" in said and "postgresql://mps_admin:***@127.0.0.1" in said
    assert main(["config"]) == 0
    assert "postgresql://mps_admin:***@" in _said(capsys)
    assert main(["shards", "--num-shards", "2"]) == 0
    assert "nightlies of postgresql://mps_admin:***@" in _said(capsys)


def test_a_server_gone_mid_night_records_nothing(server, nights, capsys, monkeypatch):
    assert main(["nightly", "--results", str(nights.results())]) == 0
    real = nightly_flow.find_regressions

    def server_goes(db, night, cases):  # between the night's record and its commit
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                "application_name = 'mps-pipeline' AND datname = current_database()"
            )
        return real(db, night, cases)

    monkeypatch.setattr(nightly_flow, "find_regressions", server_goes)
    capsys.readouterr()
    assert main(["nightly", "--results", str(nights.results(macos_m1_14="bad"))]) == 2
    said = _error(capsys)
    assert said.startswith("error: postgresql://mps_admin:***@")
    assert "terminating connection" in said
    assert _nights(server) == 1


def test_a_lock_held_by_another_job_is_exit_2(server, nights, capsys):
    assert main(["nightly", "--results", str(nights.results())]) == 0
    with psycopg.connect(server) as holder:
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (history_pg.WRITE_LOCK,))
        capsys.readouterr()
        assert main(["nightly", "--results", str(nights.results())]) == 2
    said = _said(capsys)
    assert "waiting up to 0.5 s for the history's write lock" in said
    last = said.strip().splitlines()[-1]
    assert last.startswith("error: postgresql://mps_admin:***@") and "locked by another job" in last
    assert _nights(server) == 1


def test_a_newer_schema_on_the_server_is_exit_2(server, nights, capsys):
    assert main(["nightly", "--results", str(nights.results())]) == 0
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute("UPDATE schema_version SET version = %s", (SCHEMA_VERSION + 1,))
    capsys.readouterr()
    assert main(["nightly", "--results", str(nights.results())]) == 2
    assert f"schema version {SCHEMA_VERSION + 1} is newer" in _error(capsys)
    assert _nights(server) == 1
