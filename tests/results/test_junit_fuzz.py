"""Fuzzing the JUnit reader: random bytes and damaged real reports never make it raise.

Bounded (50 examples a test, a fixed seed), so the run is short and the same every time.
The one exception allowed is the pipeline's own input error naming the file; the reader
gives none today (every damage is a warning), and a warning must name the file too.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.errors import PipelineError
from pipeline.results.junit import merge_reports, parse_report, parse_reports

FIXTURES = Path(__file__).parent.parent / "fixtures" / "junit"
REAL = {path.name: path.read_bytes() for path in sorted(FIXTURES.glob("*.xml"))}
BOUNDED = settings(max_examples=50, deadline=None, derandomize=True)


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def ingest(work: Path, data: bytes) -> None:
    """Everything the nightly does with a report: parse it, with others, and merge it."""
    path = work / "runner" / "shard-1.xml"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    try:
        report = parse_report(path)
        together = parse_reports([FIXTURES / "outcomes.xml", path])
        warnings = merge_reports([path, FIXTURES / "outcomes.xml"], work / "merged.xml")
    except PipelineError as exc:
        assert str(path) in str(exc)
        return
    assert all(str(path) in w for w in report.warnings)
    assert report.skipped in ((), (str(path),))
    assert not report.skipped or report.cases == ()
    assert len(together.cases) >= 10  # the intact report is never lost
    assert all(str(path) in w for w in warnings)
    # the merged file is well formed and reads back without a warning
    ET.parse(work / "merged.xml")
    assert parse_report(work / "merged.xml").warnings == ()


@pytest.mark.slow  # over 0.5 CPU-s: out of the fast tier
@BOUNDED
@given(data=st.binary(max_size=4096))
def test_random_bytes(work: Path, data: bytes) -> None:
    ingest(work, data)


@BOUNDED
@given(name=st.sampled_from(sorted(REAL)), cut=st.floats(0, 1))
def test_truncated_real_reports(work: Path, name: str, cut: float) -> None:
    real = REAL[name]
    ingest(work, real[: int(len(real) * cut)])


@BOUNDED
@given(
    name=st.sampled_from(sorted(REAL)),
    where=st.floats(0, 1),
    replace=st.integers(0, 16),
    junk=st.binary(min_size=1, max_size=64)
    | st.sampled_from([b"<", b"&", b"]]>", b"<!DOCTYPE x [<!ENTITY e 'e'>]>", b"&e;", b"\x00"]),
)
def test_real_reports_with_junk_spliced_in(
    work: Path, name: str, where: float, replace: int, junk: bytes
) -> None:
    real = REAL[name]
    at = int(len(real) * where)
    ingest(work, real[:at] + junk + real[at + replace :])


@BOUNDED
@given(
    name=st.sampled_from(sorted(REAL)),
    encoding=st.sampled_from(["foo", "shift_jis", "utf-7", "idna", "rot13", "utf-16", "cp1252"])
    | st.text("abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1, max_size=12),
)
def test_real_reports_declaring_any_encoding(work: Path, name: str, encoding: str) -> None:
    body = REAL[name].split(b"?>", 1)[-1]
    ingest(work, f'<?xml version="1.0" encoding="{encoding}"?>'.encode() + body)
