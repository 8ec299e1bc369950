"""pipeline/results/junit_plain.py: the fast reader reads a report as expat does, or declines.

Each report is read twice: by parse_report (which takes the scanner's answer when it gives
one) and by the expat reader alone (``junit._parse(path, plain=False)``). Whenever the
scanner accepts, the two must be equal: the same results, walls and warnings (so a file
expat finds damaged must be declined). Tests also check that the shapes pytest writes are
accepted, so that the fast path cannot silently become the slow one.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.synthetic import make_report
from pipeline.results import junit, junit_plain
from pipeline.results.junit import ParsedReport, parse_report
from pipeline.results.junit_limits import MAX_DEPTH

FIXTURES = Path(__file__).parent.parent / "fixtures" / "junit"
# the fixtures as pytest writes them: without the comments that explain them
PLAIN = {
    path.name: re.sub(rb"\s*<!--.*?-->", b"", path.read_bytes(), flags=re.S)
    for path in sorted(FIXTURES.glob("*.xml"))
    if path.name != "truncated.xml"
}
BOUNDED = settings(max_examples=60, deadline=None, derandomize=True)
HEAD = '<?xml version="1.0" encoding="utf-8"?>\n'


def write(path: Path, data: bytes | str) -> Path:
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def scanned(path: Path) -> bool:
    """Whether the scanner reads ``path`` (rather than declining it)."""
    read = junit._Read()
    with open(path, "rb") as file:
        return junit_plain.scan(file, junit._collector(read, str(path))) is not None


def agree(path: Path) -> ParsedReport:
    """parse_report's answer, checked against expat's alone."""
    fast = parse_report(path)
    assert fast == junit._parse(path, plain=False)
    return fast


def case(name: str, body: str = "", classname: str = "test_mps.TestConsistencyMPS") -> str:
    head = f'<testcase classname="{classname}" name="{name}" time="0.125"'
    return f"{head}>{body}</testcase>" if body else f"{head} />"


def suites(*cases: str, time: str = "2.500") -> str:
    return (
        f'{HEAD}<testsuites name="pytest tests"><testsuite name="pytest" time="{time}">'
        + "".join(cases)
        + "</testsuite></testsuites>\n"
    )


@pytest.mark.parametrize("name", sorted(PLAIN))
def test_the_fixtures_as_pytest_writes_them_are_scanned_as_expat_reads_them(
    tmp_path: Path, name: str
) -> None:
    path = write(tmp_path / name, PLAIN[name])
    assert scanned(path)
    assert agree(path).cases


def test_with_their_comments_they_are_declined_and_read_by_expat() -> None:
    for path in sorted(FIXTURES.glob("*.xml")):
        if b"<!--" in path.read_bytes():
            assert not scanned(path)
            agree(path)


@pytest.mark.parametrize(("cases", "start"), [(3_000, 0), (20_000, 7)])
def test_generated_reports_across_chunks_are_scanned_as_expat_reads_them(
    tmp_path: Path, cases: int, start: int
) -> None:
    """20,000 cases are 2.6 MB: three chunks, cut before a testcase each time."""
    path = write(tmp_path / "big.xml", make_report(cases, start=start, suite_time=12.5))
    assert scanned(path)
    report = agree(path)
    assert len(report.cases) == cases and report.walls[0].seconds == 12.5


def test_an_indented_report_is_scanned_as_expat_reads_it(tmp_path: Path) -> None:
    """ElementTree's indent: whitespace between testcases and around their results."""
    tree = ET.ElementTree(ET.fromstring(make_report(2_000)))
    ET.indent(tree)
    path = tmp_path / "indented.xml"
    tree.write(path, encoding="utf-8", xml_declaration=True)
    assert b"\n      <failure" in path.read_bytes()
    assert scanned(path)
    assert len(agree(path).cases) == 2_000


@pytest.mark.parametrize(
    "text",
    [
        # values as expat gives them: references replaced, tab and newline in attributes
        # turned into spaces (but a referenced newline kept), non-ASCII kept
        suites(
            case("test_a&amp;b&lt;c&gt;&quot;&apos;"),
            case("test_output_match_atan2_mps_float32", classname="K&#233;&#x1F600;"),
            case("test_tab\there", '<failure message="line one&#10;line\ttwo\nthree" />'),
            case("test_nbsp\u00a0é", '<skipped type="pytest.skip">a &lt;b&gt;\n c</skipped>'),
        ),
        # the shapes of a testcase's contents: one result element, several, none, nested
        suites(
            case("test_empty_body", ""),
            '<testcase classname="c" name="test_open_close" time="1"></testcase>',
            case("test_output_match_a_mps_float16", '<skipped type="pytest.xfail" message=""/>'),
            case(
                "test_out", "<system-out>printed</system-out><failure>Unexpected success</failure>"
            ),
            case(
                "test_reruns", '<rerun message="m1">t</rerun><rerun>t2</rerun><error message="e"/>'
            ),
            case("test_nested", "<failure><detail>deep <b>text</b></detail> tail</failure>"),
            case("test_reruns", ""),
        ),
        # pytest's other attributes, PyTorch's order, a testcase as the root
        suites(
            '<testcase classname="c" name="test_file" file="test_mps.py" line="12" time="0.5"/>',
            '<testcase classname="c" name="test_x" time="0.5" timestamp="2026" file="f"/>',
            '<testcase classname="c" name="test_no_time"/>',
            '<testcase classname="c" name="test_bad_time" time="nan"/>',
        ),
        f'{HEAD}<testcase classname="c" name="test_alone" time="3"/>\n',
        # containers: properties, suites side by side, a bare testsuite root, whitespace
        f'{HEAD}<testsuites time="9">\n  <testsuite name="a" time="1">\n    <properties>'
        '<property name="p" value="v"/></properties>\n    ' + case("test_1") + "\n  </testsuite>"
        '\n  <testsuite name="b" time="2">' + case("test_1") + "</testsuite>\n</testsuites>\n",
        f'<testsuite name="bare" time="4"><system-out>x</system-out>{case("test_b")}</testsuite>',
        "\ufeff" + suites(case("test_bom")),
    ],
)
def test_what_the_scanner_reads_it_reads_as_expat_does(tmp_path: Path, text: str) -> None:
    path = write(tmp_path / "report.xml", text)
    assert scanned(path), "this shape is meant for the fast path"
    assert agree(path).cases


@pytest.mark.parametrize(
    "text",
    [
        suites(case("test_a") + "<!-- a comment -->"),
        suites(case("test_a", "<failure><![CDATA[<raw>]]></failure>")),
        '<?xml version="1.0"?><!DOCTYPE testsuites>' + suites(case("test_a"))[len(HEAD) :],
        suites(case("test_a")).replace("\n", "\r\n"),
        '<?xml version="1.0" encoding="latin-1"?>' + suites(case("test_a"))[len(HEAD) :],
        suites("<testcase classname='c' name='test_single_quotes' time='1'/>"),
        suites('<testcase name="test_name_first" classname="c" time="1"/>'),
        suites('<testcase classname="c" name="test_dup" time="1" time="2"/>'),
        suites(case("test_a", "<failure message='m'/>")),
        suites(case("test_a&bogus;")),
        suites(case("test_a&#0;")),
        suites(case("test_a<b")),
        suites('<testcase classname="c" name="test_x" file="a<b" line="1" time="1"/>'),
        suites(case("test_a", "<failure>]]></failure>")),
        suites(case("test_a", "<failure>\x01</failure>")),
        suites(case("test_a", "<failure>\ufffe</failure>")),
        suites(case("test_a", "<testcase/>")),
        suites(case("test_a")) + "<trailing/>",
        suites(case("test_a"))[:-30],
        suites(case("test_a")).replace("</testsuite>", "</testsuitx>"),
        "text before the root" + suites(case("test_a"))[len(HEAD) :],
        suites(case("test_a")).encode("utf-16"),
        suites(case("test_a")).encode("utf-8") + b"\xff",
    ],
)
def test_what_the_scanner_declines_expat_reads(tmp_path: Path, text: str | bytes) -> None:
    path = write(tmp_path / "report.xml", text)
    assert not scanned(path)
    agree(path)


@pytest.mark.parametrize("depth", [MAX_DEPTH - 2, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1])
@pytest.mark.parametrize(
    ("body", "below"),
    [('<failure message="m"/>', 0), ("<system-out><b>x</b></system-out>", 1)],
    ids=["simple", "nested"],
)
def test_the_depth_limit_is_expats(tmp_path: Path, depth: int, body: str, below: int) -> None:
    """A testcase whose contents reach ``depth`` (+ ``below``): read up to MAX_DEPTH, else
    the whole file is skipped (the scanner declines, and expat says so)."""
    opening = "".join(f'<testsuite name="s{level}">' for level in range(depth - 2))
    closing = "</testsuite>" * (depth - 2)
    text = HEAD + opening + case("test_deep", body) + closing
    report = agree(write(tmp_path / "deep.xml", text))
    assert bool(report.cases) == (depth + below <= MAX_DEPTH)


JUNK = st.sampled_from(
    [b"<", b">", b"&", b'"', b"'", b"\t", b"\n", b"\r", b"]]>", b"<!-- c -->", b"<a>", b"</a>",
     b"<a/>", b"&amp;", b"&#10;", b"&#0;", b"\x00", b"\xef\xbf\xbe", b"\xc3\xa9", b"\xff",
     b' time="2"', b"</testcase>", b'<testcase classname="c" name="test_j" time="1"/>',
     b"<failure/>", b"<![CDATA[x]]>", b"<?pi?>"]
) | st.binary(min_size=1, max_size=8)  # fmt: skip
SMALL = {**PLAIN, "synthetic.xml": make_report(40, start=150).encode()}


@BOUNDED
@given(name=st.sampled_from(sorted(SMALL)), cut=st.floats(0, 1))
def test_truncated_reports_agree(tmp_path_factory, name: str, cut: float) -> None:
    data = SMALL[name]
    agree(write(tmp_path_factory.mktemp("cut") / name, data[: int(len(data) * cut)]))


@BOUNDED
@given(
    name=st.sampled_from(sorted(SMALL)),
    where=st.lists(st.floats(0, 1), min_size=1, max_size=3),
    replace=st.integers(0, 4),
    junk=JUNK,
)
def test_damaged_reports_agree(
    tmp_path_factory, name: str, where: list[float], replace: int, junk: bytes
) -> None:
    data = SMALL[name]
    for at in sorted((int(len(data) * w) for w in where), reverse=True):
        data = data[:at] + junk + data[at + replace :]
    agree(write(tmp_path_factory.mktemp("junk") / name, data))


VALUE = st.lists(
    st.sampled_from(list("ab_-.:9é\u00a0\t\n ") + ["&amp;", "&lt;", "&#10;", "&#x41;"]),
    max_size=6,
).map("".join)
RESULT = st.tuples(
    st.sampled_from(["failure", "error", "skipped", "rerun", "flakyFailure", "system-out"]),
    st.none() | VALUE,
    st.none() | st.sampled_from(["pytest.xfail", "pytest.skip", "AssertionError"]),
    st.none() | VALUE,
)


def _result(tag: str, message: str | None, kind: str | None, text: str | None) -> str:
    attributes = (f' type="{kind}"' if kind is not None else "") + (
        f' message="{message}"' if message is not None else ""
    )
    return f"<{tag}{attributes}>{text}</{tag}>" if text is not None else f"<{tag}{attributes}/>"


@BOUNDED
@given(
    tests=st.lists(
        st.tuples(
            st.sampled_from(
                [
                    "test_output_match_a_mps_float32",
                    "test_b",
                    "test_output_match_c_mps_bool",
                    "test_output_grad_match_d_mps_int8",
                ]
            ),
            st.sampled_from(["c", "K"]),
            st.lists(RESULT, max_size=3),
        ),
        min_size=1,
        max_size=12,
    ),
    split=st.integers(0, 12),
    indent=st.sampled_from(["", "\n  ", " \t"]),
)
@pytest.mark.slow  # over 0.5 CPU-s: out of the fast tier
def test_generated_pytest_reports_are_scanned_as_expat_reads_them(
    tmp_path_factory, tests: list, split: int, indent: str
) -> None:
    """pytest's shape, with any mix of ids (repeated ones are reruns), classnames, result
    elements and values, in one testsuite or two."""
    written = [case(name, indent.join(_result(*r) for r in results), classname)
               for name, classname, results in tests]  # fmt: skip
    text = (
        f'{HEAD}<testsuites><testsuite name="a" time="1">{indent.join(written[:split])}'
        f'</testsuite><testsuite name="b" time="2">{indent.join(written[split:])}</testsuite>'
        "</testsuites>"
    )
    path = write(tmp_path_factory.mktemp("gen") / "report.xml", text)
    assert scanned(path)
    agree(path)
