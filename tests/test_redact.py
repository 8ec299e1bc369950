"""pipeline.redact: the secrets of a connection URL, hidden wherever it is shown."""

from __future__ import annotations

from pipeline.redact import redact, scrub, secrets_of
from pipeline.results.history_db import HistoryLocation


def test_the_password_and_credential_parameters_are_hidden():
    url = "postgresql://nightly:p%40ss:w@db.example:5432/mps?sslmode=require&password=two&token=t0k"
    shown = redact(url)
    assert shown == (
        "postgresql://nightly:***@db.example:5432/mps?sslmode=require&password=***&token=***"
    )
    assert redact("postgresql://nightly@db.example/mps") == "postgresql://nightly@db.example/mps"
    assert redact("/var/lib/history/nightly.sqlite") == "/var/lib/history/nightly.sqlite"


def test_a_drivers_message_is_scrubbed_of_the_decoded_password_too():
    url = "postgresql://u:s3cr%3Aet@h/db"
    assert set(secrets_of(url)) >= {"s3cr%3Aet", "s3cr:et"}
    said = 'connection to "h" failed: password "s3cr:et" rejected for postgresql://u:s3cr%3Aet@h/db'
    out = scrub(said, url)
    assert "s3cr" not in out and out.count("***") == 2


def test_a_location_never_shows_its_url_whole():
    at = HistoryLocation.parse("postgresql://u:hunter2@h/db")
    assert "hunter2" not in repr(at) and "hunter2" not in str(at) and at.is_server
    assert str(HistoryLocation.parse("x.sqlite")) == "x.sqlite"
