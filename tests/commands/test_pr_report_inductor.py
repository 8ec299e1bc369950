"""pr-report runs the Inductor MPS tests a c10/metal change selects, each file whole, and
shows them in their own section; a failing one fails the status, a missing one is listed as
not run. The real flow and pytest on a private copy of the sandbox (its build stubbed)."""

from __future__ import annotations

import json

import pytest

from pipeline.flows import pr, stages
from pipeline.report.pr import PrResults
from tests.commands.test_pr_report import (  # noqa: F401 (fixtures)
    results_json,
    results_only,
    settings,
    tree,
)
from tests.conftest import FIXTURES, commit, git
from tests.test_machine_output import assert_valid

HEADER = "c10/metal/unused_ish.h"
BASIC = "test/inductor/test_mps_basic.py"
# our own stand-in for an Inductor test file: two pass, one fails
BASIC_TEXT = """\
class TestMPSBasic:
    def test_add(self):
        assert 1 + 1 == 2

    def test_erfinv(self):
        assert round(0.5 * 0.886226925, 3) == 0.443

    def test_remainder(self):
        assert 7 % 3 == 2, "a stand-in for a kernel that broke"
"""


@pytest.mark.slow
def test_a_c10_metal_change_runs_the_inductor_tests(settings, tree, monkeypatch) -> None:  # noqa: F811
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    (tree / "c10" / "metal").mkdir(parents=True)
    (tree / HEADER).write_text((FIXTURES / "impact" / "tree" / HEADER).read_text())
    (tree / BASIC).parent.mkdir(parents=True)
    (tree / BASIC).write_text(BASIC_TEXT)
    commit(tree, "a c10/metal header no functor includes, and an Inductor test file")
    base = git(tree, "rev-parse", "HEAD")
    text = (tree / HEADER).read_text()
    (tree / HEADER).write_text(text.replace("4294967296.0f", "4294967295.0f"))
    commit(tree, "edit its helper")

    runners = pr.Runners(lambda s, c: None, stages.run_consistency_tests)
    assert results_only(settings, base, runners) == 0
    doc = results_json(settings)
    assert_valid("pr-report results.json", doc)  # as docs/machine-output.md documents it
    assert doc["impact"]["operators"] == [] and doc["tests"]["selectors"] == []
    assert doc["impact"]["inductor_tests"][0] == BASIC
    assert any("no functor includes c10/metal/unused_ish.h" in r
               for r in doc["impact"]["inductor_reasons"])  # fmt: skip
    inductor = doc["inductor"]
    assert inductor["files"] == [BASIC]
    assert inductor["missing"] == doc["impact"]["inductor_tests"][1:]
    assert inductor["counts"] == {"pass": 2, "fail": 1}
    assert inductor["failed"] == ["test.inductor.test_mps_basic.TestMPSBasic::test_remainder"]
    assert inductor["error"] is None
    assert (settings.results_dir / inductor["run"] / "junit.xml").is_file()
    assert doc["status"]["state"] == "failure"
    assert doc["status"]["description"].startswith("Inductor MPS tests: pass 2, fail 1")

    results = PrResults.from_json(json.loads(json.dumps(doc)), 7)
    assert results.inductor is not None and results.inductor.failed == tuple(inductor["failed"])
    comment = results.comment()
    section = comment[comment.index("#### Inductor MPS tests") :]
    assert "Selected because:" in section
    assert f"Ran `{BASIC}`: pass 2, fail 1; not in the tree, not run: " in section
    assert "- `test.inductor.test_mps_basic.TestMPSBasic::test_remainder`" in section
    assert (settings.results_dir / "pr-7" / "comment.md").read_text().count(
        "#### Inductor MPS tests"
    ) == 1
