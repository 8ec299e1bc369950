"""`pr-report`: targeted PR runs on a sandbox copy, posted to a GitHub emulated on 127.0.0.1."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer
from rich.console import Console
from werkzeug import Request, Response

from pipeline import sandbox, state
from pipeline.__main__ import build_parser
from pipeline.config import Settings, load_settings
from pipeline.errors import BuildError, GitHubError, PipelineError
from pipeline.flows import migrate as graph
from pipeline.flows import nightly as nightly_flow
from pipeline.flows import pr, stages
from pipeline.guide.backlog import backlog
from pipeline.report.clip import MAX_LINE_CHARS, MAX_LOG_CHARS
from pipeline.report.pr_comment import MARKER, commit_status_for
from pipeline.results import history
from pipeline.run.build import CompilerError, find_ninja
from pipeline.sandbox import backend
from pipeline.workspace import prepare
from tests.conftest import commit, git, settings_env
from tests.report.pr_samples import sample
from tests.results.nightly_runs import RUNNERS
from tests.sandbox.edits import (
    BINARY_KERNEL,
    BINARY_METAL,
    BINARY_OPS,
    add_atan2_stub,
    edit,
    line_of,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
REPO = "octo/pytorch"
TOKEN_ENV = "MPS_PIPELINE_TEST_TOKEN"
TOKEN = "ghp_PrReportT0kenThatMustNeverBePrinted42"
COMMON_MPS = "torch/testing/_internal/common_mps.py"
COMMENTS = re.compile(rf"^/repos/{REPO}/issues/7/comments$")
COMMENT = re.compile(rf"^/repos/{REPO}/issues/comments/(\d+)$")
STATUSES = re.compile(rf"^/repos/{REPO}/statuses/([0-9a-f]+)$")
SHA = "0123456789abcdef0123456789abcdef01234567"
TESTED = "fedcba9876543210fedcba9876543210fedcba98"  # the PR head the run tested


@dataclass
class FakeGitHub:
    """The endpoints pr-report uses, with state: PR #7's comments, statuses, its head."""

    server: HTTPServer
    head_sha: str = SHA
    page_size: int = 2  # GitHub pages at 100; 2 makes a few comments span pages
    comments: list[dict] = field(default_factory=list)
    statuses: list[dict] = field(default_factory=list)
    calls: list[tuple[str, str]] = field(default_factory=list)
    auth: set[str] = field(default_factory=set)
    next_id: int = 500

    def install(self) -> FakeGitHub:
        expect = self.server.expect_request
        expect(COMMENTS, method="GET").respond_with_handler(self._list)
        expect(COMMENTS, method="POST").respond_with_handler(self._create)
        expect(COMMENT, method="PATCH").respond_with_handler(self._update)
        expect(STATUSES, method="POST").respond_with_handler(self._status)
        expect(f"/repos/{REPO}/pulls/7", method="GET").respond_with_handler(self._pull)
        for text in ("first!", "LGTM once the int dtypes pass", "cc someone"):
            self._add(text, "reviewer")
        return self

    def _seen(self, request: Request) -> None:
        self.calls.append((request.method, request.full_path.rstrip("?")))
        self.auth.add(request.headers.get("Authorization", ""))

    def _add(self, body: str, user: str) -> dict:
        self.next_id += 1
        comment = {"id": self.next_id, "body": body, "user": {"login": user}, "html_url": ""}
        self.comments.append(comment)
        return comment

    def _list(self, request: Request) -> Response:
        self._seen(request)
        per_page = min(int(request.args.get("per_page", 30)), self.page_size)
        page = int(request.args.get("page", 1))
        headers = {}
        if page * per_page < len(self.comments):
            nxt = self.server.url_for(request.path) + f"?per_page={per_page}&page={page + 1}"
            headers["Link"] = f'<{nxt}>; rel="next"'
        chunk = self.comments[(page - 1) * per_page : page * per_page]
        return Response(json.dumps(chunk), 200, headers, content_type="application/json")

    def _create(self, request: Request) -> Response:
        self._seen(request)
        comment = self._add(request.get_json()["body"], "github-actions[bot]")
        return Response(json.dumps(comment), 201, content_type="application/json")

    def _update(self, request: Request) -> Response:
        self._seen(request)
        comment_id = int(COMMENT.match(request.path).group(1))
        comment = next(c for c in self.comments if c["id"] == comment_id)
        comment["body"] = request.get_json()["body"]
        return Response(json.dumps(comment), 200, content_type="application/json")

    def _status(self, request: Request) -> Response:
        self._seen(request)
        sha = STATUSES.match(request.path).group(1)
        self.statuses.append({"sha": sha, **request.get_json()})
        body = json.dumps({"id": len(self.statuses)})
        return Response(body, 201, content_type="application/json")

    def _pull(self, request: Request) -> Response:
        self._seen(request)
        body = json.dumps({"number": 7, "head": {"sha": self.head_sha}})
        return Response(body, 200, content_type="application/json")

    def marked(self) -> list[dict]:
        return [c for c in self.comments if MARKER in c["body"]]

    def count(self, method: str, pattern: str) -> int:
        return sum(1 for m, path in self.calls if m == method and re.search(pattern, path))


# -- fixtures and helpers -------------------------------------------------------------------


@pytest.fixture
def tree(sandbox_tree: Path) -> Path:
    """The committed sandbox copy, with the build.ninja a materialized sandbox has (ignored)."""
    (sandbox_tree / "build").mkdir()
    (sandbox_tree / "build" / "build.ninja").write_text(sandbox.build_ninja(sandbox_tree))
    return sandbox_tree


@pytest.fixture
def settings(tree: Path, tmp_path: Path, httpserver: HTTPServer) -> Settings:
    base = load_settings(
        {"root": str(tree), "state_dir": str(tmp_path / "state")}, env=settings_env()
    )
    github = replace(base.github, api_url=httpserver.url_for(""), repo=REPO, token_env=TOKEN_ENV)
    return replace(base, opinfo_table=tree / sandbox.OPINFO_TABLE, github=github)


@pytest.fixture
def github(httpserver: HTTPServer, tree: Path, monkeypatch: pytest.MonkeyPatch) -> FakeGitHub:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    for var in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"):
        monkeypatch.delenv(var, raising=False)
    return FakeGitHub(httpserver).install()


def cli(settings: Settings, *argv: str) -> int:
    """`python -m pipeline pr-report ARGV` with these settings (the fake GitHub's URL)."""
    args = build_parser("pr-report").parse_args(["pr-report", *argv])
    return args.module.run(args, settings)


def migrate_atan2(settings: Settings) -> str:
    """What `python -m pipeline migrate atan2 --stage edit` does, committed; the new HEAD."""
    stages.edit(graph.Request(settings, "atan2"), Console(file=io.StringIO()))
    return commit(settings.root, "atan2: MPSGraph -> Metal")


def build_now(root: Path) -> None:
    """Build the sandbox outside the pipeline (no build log, no stamp)."""
    subprocess.run([find_ninja(), "-C", "build", "torch_cpu"], cwd=root, check=True, text=True,
                   capture_output=True)  # fmt: skip


def results_only(settings: Settings, base: str, runners: pr.Runners) -> int:
    """`pr-report --pr 7 --base BASE --results-only`, built and tested by ``runners``."""
    return pr.report(settings, 7, base=base, results_only=True, runners=runners)


def results_json(settings: Settings) -> dict:
    return json.loads((settings.results_dir / "pr-7" / "results.json").read_text())


# -- end to end on the sandbox --------------------------------------------------------------


@pytest.mark.slow
def test_a_migration_gets_one_comment_updated_in_place_and_a_status(settings, github, capfd, tree):
    base = git(tree, "rev-parse", "HEAD")
    github.head_sha = migrate_atan2(settings)

    assert cli(settings, "--pr", "7", "--base", base) == 0
    [comment] = github.marked()
    body = comment["body"]
    assert body.startswith(MARKER + "\n")
    assert "| atan2 | ✓ | ✓ | ✓ | **XPASS** | **XPASS** |" in body
    assert "**Build:** ✅ succeeded" in body
    diff = body.split("### Expected failures that can go", 1)[1]
    assert '-            "atan2": [' in diff
    for dtype in ("int64", "int32", "int16", "int8", "uint8", "bool"):
        assert f"-                torch.{dtype}," in diff
    first = results_json(settings)
    check = first["build"].pop("check")
    assert first["build"] == {"needed": True, "ok": True, "error": None}
    # the build's shader check, from ninja's own data: the sandbox's shader steps were read
    assert check["status"] != "unknown" and len(check["artifacts"]) == 2, check
    assert "Build: shaders" in body and "Metal language" in body
    assert first["tests"]["selectors"] == ["test_output_match_atan2_mps_"]
    assert first["tests"]["counts"] == {"pass": 3, "xpass": 6}
    # check-math of the affected operator's functor: its table, rendered from results.json
    if importlib.util.find_spec("torch") is None:
        assert "cannot import torch" in first["math"]["skipped"]
    else:
        [functor] = first["math"]["functors"]
        assert functor["kernel"] == "atan2" and functor["dtypes"]
        assert {d["status"] for d in functor["dtypes"]} == {"ok"}, functor
        assert "#### Functor math on the host" in body and "| `atan2` | float32 |" in body
    state, description = commit_status_for(first["tests"]["counts"], True)
    assert github.statuses == [
        {"sha": github.head_sha, "state": state, "description": description,
         "context": "mps/targeted"}
    ]  # fmt: skip
    assert state == "failure"  # xfail_strict: the suite fails until the entries go

    # The contributor applies the proposed diff as it is; the same PR reports again.
    (tree / "xfails.diff").write_text(first["xfails"]["diff"])
    git(tree, "apply", "xfails.diff")
    (tree / "xfails.diff").unlink()
    github.head_sha = commit(tree, "drop the atan2 xfails")
    assert cli(settings, "--pr", "7", "--base", base) == 0

    assert [c["id"] for c in github.marked()] == [comment["id"]], "a second comment appeared"
    assert github.count("POST", "/comments$") == 1 and github.count("PATCH", "") == 1
    body = github.marked()[0]["body"]
    assert "| atan2 | ✓ | ✓ | ✓ | ✓ | ✓ | ✓ | ✓ | ✓ | ✓ |" in body
    assert "Expected failures that can go" not in body
    assert results_json(settings)["tests"]["counts"] == {"pass": 9}
    assert [(s["sha"], s["state"]) for s in github.statuses][-1] == (github.head_sha, "success")
    # the marked comment sat on the second page: pagination was followed
    assert github.count("GET", r"/comments\?per_page=2&page=2$") >= 1
    assert github.auth == {f"Bearer {TOKEN}"}

    out, err = capfd.readouterr()
    assert TOKEN not in out + err
    assert "comment updated" in out and "mps/targeted success" in out
    for path in settings.state_dir.rglob("*"):
        if path.is_file():
            assert TOKEN not in path.read_text(errors="replace"), path


@pytest.mark.slow
def test_a_build_failure_is_reported_with_its_first_error_and_no_tests(settings, github, tree):
    base = git(tree, "rev-parse", "HEAD")
    add_atan2_stub(tree, name="atan3")  # registers a Metal kernel that does not exist
    github.head_sha = commit(tree, "atan2 stub, misspelled")

    assert cli(settings, "--pr", "7", "--base", base) == 0
    line, _ = line_of(tree, BINARY_KERNEL, '"atan3"')
    error = f"{BINARY_KERNEL}:{line}: no Metal kernel named 'atan3' is registered"
    body = github.marked()[0]["body"]
    assert f"**Build:** ❌ failed: `{error}`" in body
    assert "_No tests ran: the build failed._" in body and "**Tests:**" not in body
    data = results_json(settings)
    assert data["build"] == {"needed": True, "ok": False, "error": error, "check": None}
    assert data["tests"]["run"] is None and data["tests"]["counts"] == {}
    assert [p.name for p in settings.results_dir.iterdir()] == ["pr-7"]  # pytest never ran
    assert [(s["state"], s["description"]) for s in github.statuses] == [
        commit_status_for({}, build_ok=False)
    ]
    assert github.statuses[0]["state"] == "failure"


@pytest.mark.slow
def test_dry_run_prints_the_body_and_posts_nothing(settings, httpserver, tree, capsys, monkeypatch):
    monkeypatch.delenv(TOKEN_ENV, raising=False)  # and needs no token
    base = git(tree, "rev-parse", "HEAD")
    migrate_atan2(settings)

    assert cli(settings, "--pr", "7", "--base", base, "--dry-run") == 0
    out = capsys.readouterr().out
    folder = settings.results_dir / "pr-7"
    assert out == (folder / "comment.md").read_text()
    assert out.startswith(MARKER) and "| atan2 |" in out and "```diff" in out
    assert results_json(settings)["pr"] == 7
    assert httpserver.log == []


@pytest.mark.slow
def test_a_python_only_change_selects_tests_without_ninja(settings, httpserver, tree):
    build_now(tree)
    artifact = backend.artifact_path(tree)
    built = artifact.stat().st_mtime_ns
    base = git(tree, "rev-parse", "HEAD")
    # common_mps.py: atan2's bool xfail goes although MPSGraph still cannot do it
    edit(tree, COMMON_MPS, "                torch.uint8,\n                torch.bool,\n",
         "                torch.uint8,\n")  # fmt: skip
    commit(tree, "expect atan2 bool to work")

    assert cli(settings, "--pr", "7", "--base", base, "--results-only") == 0
    data = results_json(settings)
    assert data["impact"]["build_needed"] is False
    assert [o["operator"] for o in data["impact"]["operators"]] == ["atan2"]
    assert data["tests"]["selectors"] == ["test_output_match_atan2_mps_"]
    assert data["tests"]["counts"] == {"pass": 3, "fail": 1, "xfail": 5}
    assert data["status"]["state"] == "failure"
    assert not state.build_log(settings).exists(), "ninja ran"
    assert not state.build_stamp(settings).exists()
    assert artifact.stat().st_mtime_ns == built
    assert httpserver.log == []


@pytest.mark.slow
def test_a_functor_with_swapped_arguments_shows_in_the_comments_math_table(settings, tree):
    pytest.importorskip("torch", reason="check-math's reference is torch on CPU")
    build_now(tree)
    base = git(tree, "rev-parse", "HEAD")
    edit(tree, BINARY_METAL, "precise::atan2(float(a), float(b))",
         "precise::atan2(float(b), float(a))", count=2)  # fmt: skip
    commit(tree, "atan2: a typo")

    assert cli(settings, "--pr", "7", "--base", base, "--results-only") == 0
    data = results_json(settings)
    [functor] = data["math"]["functors"]
    wrong = {d["dtype"]: d for d in functor["dtypes"] if d["status"] == "mismatch"}
    assert {"float32", "int32"} <= set(wrong), functor
    assert wrong["float32"]["counterexamples"] and wrong["float32"]["mismatched"] > 0
    comment = (settings.results_dir / "pr-7" / pr.COMMENT_MD).read_text()
    table = comment.split("#### Functor math on the host", 1)[1]
    assert "| `atan2` | float32 |" in table and "| mismatch |" in table
    assert "kernel `" in table and "torch `" in table  # the first counterexamples
    # --no-math leaves it out; the review's check-math still flags the changed functor
    assert cli(settings, "--pr", "7", "--base", base, "--results-only", "--no-math") == 0
    data = results_json(settings)
    assert data["math"] is None
    assert any(f["check"] == "check-math" for f in data["review"]["findings"])
    assert "Functor math" not in (settings.results_dir / "pr-7" / pr.COMMENT_MD).read_text()


@pytest.mark.slow
def test_a_change_to_test_mps_runs_the_whole_consistency_suite(settings, tree):
    build_now(tree)
    base = git(tree, "rev-parse", "HEAD")
    with (tree / "test" / "test_mps.py").open("a") as fh:
        fh.write("\n# a change every consistency test may see\n")
    commit(tree, "touch test_mps.py")

    assert cli(settings, "--pr", "7", "--base", base, "--results-only") == 0
    data = results_json(settings)
    assert data["impact"]["full_sweep"] and not data["impact"]["build_needed"]
    assert data["tests"]["selectors"] == ["test_output_match"]
    assert sum(data["tests"]["counts"].values()) == data["impact"]["total"] > 100
    assert data["title"].startswith("MPS consistency tests: full sweep")
    assert not state.build_log(settings).exists()


@pytest.mark.slow
def test_doit_pr_report_dry_run(tmp_path):
    state = tmp_path / "state"
    sandbox.materialize(state / "sandbox")
    settings = prepare(load_settings({"root": "sandbox", "state_dir": str(state)}, env={}))
    migrate_atan2(settings)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "MPS_PIPELINE"))}
    env.update(settings_env())
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "doit", "-f", str(REPO_ROOT / "dodo.py"), "-d", str(cwd),
         "pr_report", "pr=7", "dry_run=1", "root=sandbox", f"state_dir={state}", "base=HEAD~1"],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert MARKER in proc.stdout and "| atan2 |" in proc.stdout
    assert '-            "atan2": [' in proc.stdout
    assert json.loads((state / "results" / "pr-7" / "results.json").read_text())["pr"] == 7
    assert "build: ok" in proc.stderr


# -- posting and flags (no build, no tests) --------------------------------------------------


@pytest.mark.slow
def test_post_from_rebuilds_the_comment_and_links_the_run(settings, github, tmp_path, monkeypatch):
    results = sample()
    pr.write_results(results, tmp_path / "artifact" / "pr-7")
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.com")
    monkeypatch.setenv("GITHUB_REPOSITORY", REPO)
    monkeypatch.setenv("GITHUB_RUN_ID", "123")
    run = f"https://github.com/{REPO}/actions/runs/123"

    assert cli(settings, "--pr", "7", "--post-from", str(tmp_path / "artifact")) == 0
    assert github.marked()[0]["body"] == results.comment(footer=f"[workflow run]({run})")
    assert f"[workflow run]({run})" in github.marked()[0]["body"]
    state, description = results.status()
    assert github.statuses == [
        {"sha": SHA, "state": state, "description": description, "context": "mps/targeted",
         "target_url": run}
    ]  # fmt: skip
    assert github.count("GET", "/pulls/7$") == 1  # no --status-sha: the PR's head now
    assert not settings.results_dir.exists()  # nothing was collected locally
    with pytest.raises(PipelineError, match="not #8"):
        cli(settings, "--pr", "8", "--post-from", str(tmp_path / "artifact" / "pr-7"))


@pytest.mark.slow
def test_the_status_goes_on_the_tested_head_not_on_a_later_push(settings, github, tmp_path):
    """A push while the Mac ran moved the PR to SHA; the results are those of TESTED."""
    pr.write_results(sample(), tmp_path / "pr-7")
    argv = ("--pr", "7", "--post-from", str(tmp_path / "pr-7"))
    assert cli(settings, *argv, "--status-sha", TESTED.upper()) == 0
    assert [s["sha"] for s in github.statuses] == [TESTED]
    assert github.count("GET", "/pulls/") == 0
    for bad in ("HEAD", TESTED[:12], TESTED + "0", "g" * 40):
        with pytest.raises(PipelineError, match="full 40-hex commit id"):
            cli(settings, *argv, "--status-sha", bad)
    with pytest.raises(PipelineError, match="does not go with --results-only"):
        cli(settings, "--pr", "7", "--results-only", "--status-sha", TESTED)
    assert len(github.statuses) == 1


@pytest.mark.slow
def test_a_planted_marker_is_left_alone_and_bot_login_is_configurable(settings, github, tmp_path):
    """Only the configured bot's marked comment is edited; a user's copy of the marker never."""
    planted = github._add(f"{MARKER}\n**Build:** ✅ succeeded, all green", "mallory")
    planted_body = planted["body"]
    assert settings.github.bot_login == "github-actions[bot]"  # the configs/ default
    runs = {
        "one": sample(),
        "two": sample(build_ok=False, build_error="K.metal:3: error: x", table=None),
    }
    for name, results in runs.items():
        pr.write_results(results, tmp_path / name / "pr-7")

    def post(which: str, config: Settings = settings) -> None:
        argv = ("--post-from", str(tmp_path / which), "--status-sha", TESTED)
        assert cli(config, "--pr", "7", *argv) == 0

    post("one")
    [mine] = [c for c in github.marked() if c["user"]["login"] == "github-actions[bot]"]
    assert mine["body"] == runs["one"].comment() and planted["body"] == planted_body
    post("two")
    assert mine["body"] == runs["two"].comment() and planted["body"] == planted_body
    assert github.count("POST", "/comments$") == 1
    assert github.count("PATCH", rf"/comments/{mine['id']}$") == github.count("PATCH", "") == 1

    # posting as another account: its marked comment is the one to keep up to date
    app = replace(settings, github=replace(settings.github, bot_login="mps-ci[bot]"))
    theirs = github._add(f"{MARKER}\nold", "mps-ci[bot]")
    post("one", app)
    assert theirs["body"] == runs["one"].comment()
    assert mine["body"] == runs["two"].comment() and planted["body"] == planted_body
    assert github.count("POST", "/comments$") == 1


def test_a_failed_build_is_reported_from_the_error_it_raised(settings, tree, monkeypatch):
    """The BuildError carries the first compiler error: no build log is parsed (or removed)."""
    base = git(tree, "rev-parse", "HEAD")
    add_atan2_stub(tree)
    commit(tree, "atan2 stub")
    stale = state.build_log(settings)
    stale.parent.mkdir(parents=True)
    stale.write_text("old.mm:1:1: error: an earlier build's error\n")

    def fail(settings, console, error=None):
        raise BuildError("build failed: whatever\nfull log: x", first_error=error)

    def collect(build):
        runners = pr.Runners(build, stages.run_consistency_tests)
        return pr.collect(settings, 7, Console(file=io.StringIO()), base=base, runners=runners)

    error = CompilerError(str(tree / BINARY_KERNEL), 41, 3, "no member named 'atan3'")
    results = collect(lambda s, c: fail(s, c, error))
    assert not results.build_ok and results.selectors == () and results.table is None
    assert results.build_error == f"{BINARY_KERNEL}:41: no member named 'atan3'"
    assert stale.read_text() == "old.mm:1:1: error: an earlier build's error\n"

    assert collect(lambda s, c: fail(s, c)).build_error == "build failed: whatever"
    outside = CompilerError("/usr/include/math.h", 7, None, "oops")
    assert collect(lambda s, c: fail(s, c, outside)).build_error == "/usr/include/math.h:7: oops"


def test_post_from_dry_run_for_a_fork_prints_only(settings, github, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(TOKEN_ENV)
    pr.write_results(sample(), tmp_path / "pr-7")
    assert cli(settings, "--pr", "7", "--post-from", str(tmp_path / "pr-7"), "--dry-run") == 0
    assert capsys.readouterr().out == sample().comment()
    assert github.calls == []


def test_posting_without_a_token_fails_first_and_names_the_variable(
    settings, github, tmp_path, monkeypatch, capsys
):
    monkeypatch.delenv(TOKEN_ENV)
    with pytest.raises(GitHubError, match=f"\\${TOKEN_ENV} is not set") as info:
        cli(settings, "--pr", "7", "--base", "HEAD")
    assert "pull-requests: write and statuses: write; --dry-run prints the comment without one" in (
        str(info.value)
    )
    assert github.calls == [] and not settings.results_dir.exists()  # nothing was run


def test_flags(settings):
    parse = build_parser("pr-report").parse_args
    with pytest.raises(SystemExit):
        parse(["pr-report", "--pr", "7", "--results-only", "--post-from", "x"])
    with pytest.raises(SystemExit):
        parse(["pr-report", "--base", "HEAD~1"])  # --pr is required
    with pytest.raises(PipelineError, match="--base/--head do not go with --post-from"):
        cli(settings, "--pr", "7", "--base", "HEAD", "--post-from", "x", "--dry-run")
    with pytest.raises(PipelineError, match="positive"):
        cli(settings, "--pr", "0", "--dry-run")
    with pytest.raises(PipelineError, match="pr='seven'"):
        pr.pr_number("seven")


# -- huge output: capped in the log and in the comment ----------------------------------------

HUGE = "E   RuntimeError: " + "x" * 200_000  # one 200 kB line, as a test can print it


def _assert_capped(*outputs: str) -> None:
    for output in outputs:
        assert TOKEN not in output
        longest = max((len(line) for line in output.splitlines()), default=0)
        assert longest <= MAX_LINE_CHARS + 200, longest


@pytest.mark.slow
def test_a_200_kb_test_error_is_capped_when_posting(settings, github, tmp_path, capfd):
    pr.write_results(sample(test_error=f"{HUGE}\n  full log: x", table=None), tmp_path / "pr-7")
    assert cli(settings, "--pr", "7", "--post-from", str(tmp_path / "pr-7")) == 0
    out, err = capfd.readouterr()
    _assert_capped(out, err)
    assert len(out) + len(err) < 5_000
    assert out.startswith("PR #7: comment created") and "MPS tests could not run: E" in out
    [comment] = github.marked()
    _assert_capped(comment["body"])
    assert "more characters]" in comment["body"]
    assert len(github.statuses[0]["description"]) == 140


@pytest.mark.slow
def test_a_200_kb_build_or_test_error_is_capped_in_the_log(settings, tree, monkeypatch, capfd):
    """What the Mac job prints while collecting (the CI log) is capped per line and in all."""
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    base = git(tree, "rev-parse", "HEAD")
    add_atan2_stub(tree)
    commit(tree, "atan2 stub")

    def fail_tests(settings, selectors, label):
        raise PipelineError(f"pytest exited with status 1: {HUGE}\n{HUGE}\n  full log: x")

    assert results_only(settings, base, pr.Runners(lambda s, c: None, fail_tests)) == 0
    out, err = capfd.readouterr()
    _assert_capped(out, err)
    assert err.count("more characters]") == 2 and len(err) < 10_000
    assert "status to post: error: MPS tests could not run: pytest exited" in err
    assert results_json(settings)["tests"]["error"].count(HUGE) == 2  # the file keeps it all

    def fail_build(settings, console):
        raise BuildError(f"build failed: {HUGE}\n" + "\n".join([HUGE] * 5))

    assert results_only(settings, base, pr.Runners(fail_build, fail_tests)) == 0
    out, err = capfd.readouterr()
    _assert_capped(out, err)
    assert len(err) < MAX_LOG_CHARS
    assert results_json(settings)["build"]["error"].startswith("build failed: E   Runtime")


def test_the_log_cap_holds_for_many_long_lines(settings, tree, monkeypatch, capfd):
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    base = git(tree, "rev-parse", "HEAD")
    add_atan2_stub(tree)
    commit(tree, "atan2 stub")

    def fail_build(settings, console):
        raise BuildError("\n".join([HUGE[:5_000]] * 500))  # 2.5 MB of compiler output

    runners = pr.Runners(fail_build, stages.run_consistency_tests)
    assert results_only(settings, base, runners) == 0
    out, err = capfd.readouterr()
    _assert_capped(out, err)
    assert MAX_LOG_CHARS < len(err) < MAX_LOG_CHARS + 10_000
    assert "this run prints at most 200000 characters of build and test output" in err


# -- the nightly baseline: new failures, already failing on main, flaky ---------------------

# The nightly's sweep, cut to the two operators the PRs below touch (18 tests).
SWEEP = ("test_output_match_atan2_mps_", "test_output_match_copysign_mps_")
ATAN2_BOOL_XFAIL = "                torch.uint8,\n                torch.bool,\n"
COPYSIGN_INTS = "REGISTER_INT2FLOAT_BINARY_OP(copysign);\n"
# copysign's integer registrations without int64 (the macro registers long, int, ... bool)
COPYSIGN_NO_INT64 = "".join(
    f"REGISTER_BINARY_OP(copysign, {t}, float);\n"
    for t in ("int", "short", "uchar", "char", "bool")
)
ATAN2_MESSAGE = '"MPS does not support atan2 op with integer input"'
BOOL = "test_output_match_atan2_mps_bool"
INT64 = "test_output_match_copysign_mps_int64"


def main_red_on_atan2_bool(tree: Path) -> str:
    """main expects atan2 bool to work, which MPSGraph cannot do: main fails that test."""
    edit(tree, COMMON_MPS, ATAN2_BOOL_XFAIL, "                torch.uint8,\n")
    return commit(tree, "main: expect atan2 bool to work")


def touch_atan2(tree: Path) -> None:
    """A change to atan2's MPSGraph implementation that selects its tests, outcomes alike."""
    edit(tree, BINARY_OPS, ATAN2_MESSAGE, '"MPS does not support atan2 with integer inputs"')


def sweep(settings: Settings, label: str) -> Path:
    """A real nightly sweep (cut to SWEEP) of the tree as checked out: its JUnit report."""
    build_now(settings.root)
    own = replace(settings, state_dir=settings.state_dir.parent / f"sweep-{label}")
    junit_path, _ = stages.run_consistency_tests(own, SWEEP, label)
    return junit_path


def record_nights(settings: Settings, db: Path, nights: list[dict[str, Path]], sha: str) -> None:
    """Record each night's runner -> JUnit report as `nightly` does, on 2026-03-01, -02..."""
    for day, reports in enumerate(nights, 1):
        results = settings.state_dir.parent / f"nightly-{db.stem}-{day}"
        for runner, report in reports.items():
            (results / runner).mkdir(parents=True)
            (results / runner / "shard-1.xml").write_bytes(report.read_bytes())
        nightly_flow.run_nightly(
            settings, results, history_at=db, commit=sha, source=f"night-{day}",
            started=history.timestamp(f"2026-03-{day:02d}T03:17:00Z"), backlog_of=backlog,
            dashboard_dir=results.with_name(results.name + "-dashboard"),
        )  # fmt: skip


def classes(data: dict) -> dict[str, str]:
    return {case["test"]: case["class"] for case in data["baseline"]["cases"]}


@pytest.mark.slow
def test_new_failures_lead_the_comment_and_alone_fail_the_status(settings, github, tree, capfd):
    main_sha = main_red_on_atan2_bool(tree)
    # the nightly of main, recorded where pr-report looks by default
    report = sweep(settings, "main")
    default = settings.state_dir / state.HISTORY
    record_nights(settings, default, [dict.fromkeys(RUNNERS, report)], main_sha)

    # the PR breaks copysign int64 (it passed on main) and touches atan2 (bool fails on main)
    edit(tree, BINARY_METAL, COPYSIGN_INTS, COPYSIGN_NO_INT64)
    touch_atan2(tree)
    github.head_sha = commit(tree, "copysign: registrations spelled out; atan2 message")
    assert cli(settings, "--pr", "7", "--base", main_sha) == 0

    data = results_json(settings)
    assert data["tests"]["counts"] == {"pass": 11, "fail": 2, "xfail": 5}
    assert classes(data) == {BOOL: "already_failing", INT64: "new"}
    night = {"started": "2026-03-01T03:17:00.000000Z", "commit": main_sha, "runners": [*RUNNERS]}
    assert data["baseline"]["nightly"] == night and data["baseline"]["runner"] is None
    runners = ", ".join(RUNNERS)
    reason = {case["test"]: case["reason"] for case in data["baseline"]["cases"]}
    assert reason == {
        INT64: f"passed on {runners} in the nightly of 2026-03-01",
        BOOL: f"failed on {runners} in the nightly of 2026-03-01 (commit {main_sha[:12]})",
    }
    body = github.marked()[0]["body"]
    new = body.index("### ❌ New failures (1)")
    old = body.index("### Already failing on main (1)")
    assert body.index("**Tests:**") < new < old < body.index("### Operators selected")
    assert f"- `{INT64}` (failed): passed on {runners} in the nightly of 2026-03-01" in body
    assert f"main too, in the nightly of 2026-03-01, commit `{main_sha[:12]}` ({runners}):" in body
    assert f"- `{BOOL}` (failed): failed on {runners}" in body.split("Already failing", 1)[1]
    assert "No nightly baseline" not in body
    assert data["status"] == {
        "state": "failure",
        "description": "1 new failure (1 already failing on main): 2 failed, 11 passed, 5 xfailed",
    }
    assert [(s["sha"], s["state"], s["description"]) for s in github.statuses] == [
        (github.head_sha, "failure", data["status"]["description"])
    ]
    assert "baseline: the nightly of 2026-03-01" in capfd.readouterr().err

    # The author puts copysign back: what still fails fails on main too; the status is green.
    edit(tree, BINARY_METAL, COPYSIGN_NO_INT64, COPYSIGN_INTS)
    github.head_sha = commit(tree, "copysign: int64 back")
    assert cli(settings, "--pr", "7", "--base", main_sha) == 0
    data = results_json(settings)
    assert classes(data) == {BOOL: "already_failing"}
    [comment] = github.marked()
    body = comment["body"]
    assert "New failures" not in body and "**No new failures:**" in body
    assert body.index("**No new failures:**") < body.index("### Already failing on main (1)")
    assert github.statuses[-1] == {
        "sha": github.head_sha,
        "state": "success",
        "description": "no new failures (1 already failing on main): 1 failed, 3 passed, 5 xfailed",
        "context": "mps/targeted",
    }
    assert github.count("POST", "/comments$") == 1 and github.count("PATCH", "") == 1


@pytest.mark.slow
def test_the_posting_job_classifies_with_the_history_it_is_given(settings, github, tree, tmp_path):
    """The Mac job has no history (every failure new); the report job has the nightly's:
    atan2 bool flipped between fail and xfail night after night, and one Mac configuration
    xfails it: flaky, and per runner what that runner did."""
    xfailing = sweep(settings, "old")  # main before it dropped atan2 bool's xfail
    main_sha = main_red_on_atan2_bool(tree)
    failing = sweep(settings, "new")
    flipping = tmp_path / "posting-job" / "flipping.sqlite"
    record_nights(settings, flipping, [dict.fromkeys(RUNNERS, r) for r in
                                       (failing, xfailing, failing)], main_sha)  # fmt: skip
    mixed = tmp_path / "posting-job" / "mixed.sqlite"
    nights = [{RUNNERS[0]: failing, RUNNERS[1]: xfailing}]
    record_nights(settings, mixed, nights, main_sha)
    touch_atan2(tree)
    commit(tree, "atan2 message")

    assert cli(settings, "--pr", "7", "--base", main_sha, "--results-only") == 0
    data = results_json(settings)
    assert classes(data) == {BOOL: "new"} and data["baseline"]["nightly"] is None
    assert data["baseline"]["note"] == "no nightly baseline"
    assert data["status"] == {"state": "failure", "description": "1 failed, 3 passed, 5 xfailed"}
    folder = settings.results_dir / "pr-7"
    post = ("--pr", "7", "--post-from", str(folder), "--status-sha", TESTED)

    # no history where the comment is posted: the Mac job's classes stand
    assert cli(settings, *post) == 0
    body = github.marked()[0]["body"]
    assert "_No nightly baseline. Every failing test counts as new._" in body
    assert f"### ❌ New failures (1)\n\n- `{BOOL}` (failed)\n" in body
    assert github.statuses[-1]["state"] == "failure"

    assert cli(settings, *post, "--history", str(flipping)) == 0
    body = github.marked()[0]["body"]
    assert "### Flaky (1)" in body and "**No new failures:**" in body
    flips = " → ".join(["fail", "xfail", "fail"])
    reason = f"its outcome flipped over the last 3 nightlies on {RUNNERS[0]} ({flips})"
    assert f"- `{BOOL}` (failed): {reason}" in body
    assert (github.statuses[-1]["state"], github.statuses[-1]["description"]) == (
        "success", "no new failures (1 flaky): 1 failed, 3 passed, 5 xfailed"
    )  # fmt: skip

    def classified(*argv: str) -> tuple[str, str]:
        assert cli(settings, *post, "--history", str(mixed), *argv) == 0
        return github.statuses[-1]["state"], github.marked()[0]["body"]

    # one configuration failed it, the other xfailed it: which one the PR ran on decides
    state, body = classified("--runner", RUNNERS[1])
    assert state == "failure"
    assert f"- `{BOOL}` (failed): xfailed on {RUNNERS[1]} in the nightly of 2026-03-01" in body
    state, body = classified("--runner", RUNNERS[0])
    assert state == "success" and f"- `{BOOL}` (failed): failed on {RUNNERS[0]} in" in body
    state, body = classified()  # unknown: failing on any runner is failing on main
    assert state == "success"
    assert f"failed on {RUNNERS[0]}; xfailed" not in body and f"failed on {RUNNERS[0]} in" in body
    state, body = classified("--runner", RUNNERS[2])
    assert state == "success"
    assert f"_The nightly history has no run of {RUNNERS[2]}: compared with every runner" in body


def test_a_missing_history_file_is_an_error_before_anything_runs(settings, github, tmp_path):
    missing = tmp_path / "nowhere" / "nightly.sqlite"
    with pytest.raises(PipelineError, match="--history .*no such file") as info:
        cli(settings, "--pr", "7", "--base", "HEAD", "--history", str(missing))
    assert info.value.exit_code == 2
    assert github.calls == [] and not settings.results_dir.exists() and not missing.exists()
    with pytest.raises(PipelineError, match="no such file"):
        cli(settings, "--pr", "7", "--post-from", str(tmp_path), "--history", str(missing))
    broken = tmp_path / "broken.sqlite"
    broken.write_text("not a database")
    with pytest.raises(PipelineError, match="not a valid mps-pipeline history"):
        cli(settings, "--pr", "7", "--base", "HEAD", "--history", str(broken))
    assert github.calls == [] and not settings.results_dir.exists()
