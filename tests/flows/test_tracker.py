"""The migration tracker against a local GitHub (pytest-httpserver): real HTTP, the sandbox's
real backlog, many PRs over several pages, ETags and 304s, rate limits, a request budget."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.errors import GitHubError
from pipeline.flows.tracker import Cache, KnownPull, client_for, find_claims, update_tracker
from pipeline.github import Cached
from pipeline.guide.claims import ClaimState, patch_words
from pipeline.report.tracker import END, START
from pipeline.state import tracker_cache
from tests.conftest import settings_env
from tests.flows.github_fake import REPO, FakeTrackerGitHub

TOKEN = "ghp_TrackerTokenNeverPrinted0123456789"
ISSUE = 187455
ISSUE_URI = f"/repos/{REPO}/issues/{ISSUE}"
ATAN2_MM = """@@ -40,12 +40,0 @@
-TORCH_IMPL_FUNC(atan2_out_mps)(const Tensor& self, const Tensor& other, const Tensor& out) {
-  mps::binaryOpTensor(self, other, out, "atan2", ^BinaryOpFn(cachedGraph, primary, secondary) {
"""
YAML_TWO = """@@ -10,3 +10,3 @@
-    MPS: exp2_out_mps
+    CPU, CUDA, MPS: exp2_out
@@ -30,3 +30,3 @@
-    MPS: fmod_mps_out
+    CPU, CUDA, MPS: fmod_out
"""
LOGIT_MM = "@@ -1,1 +1,1 @@\n-Tensor& logit_out_mps(const Tensor& self) {\n"
DOCS = "@@ -1 +1 @@\n-Old words about the add and where functions.\n+New words.\n"


def _many(github: FakeTrackerGitHub, extra: int = 200) -> None:
    github.add_pull(10, "[MPS] Migrate atan2 to Metal", {"aten/.../BinaryOps.mm": ATAN2_MM})
    github.add_pull(11, "[MPS] fold exp2 and fmod dispatch",
                    {"aten/src/ATen/native/native_functions.yaml": YAML_TWO})  # fmt: skip
    github.add_pull(12, "Port atan2 MPS kernel", {"BinaryKernel.metal": "@@ -1 +1 @@\n+x\n"})
    github.add_pull(13, "[MPS] logit to Metal", {"UnaryOps.mm": LOGIT_MM}, state="closed")
    for n in range(100, 100 + extra):
        github.add_pull(n, f"Docs fix {n}", {"docs/source/notes.rst": DOCS})


@pytest.fixture
def github(httpserver) -> FakeTrackerGitHub:
    fake = FakeTrackerGitHub(httpserver).install()
    fake.issues[ISSUE] = "Tracking the MPSGraph → Metal migration.\n\nMaintainers' notes stay.\n"
    return fake


@pytest.fixture
def settings(sandbox_settings, httpserver):
    return dataclasses.replace(
        sandbox_settings,
        github=dataclasses.replace(
            sandbox_settings.github, api_url=httpserver.url_for(""), repo=REPO
        ),
    )


def _run(settings, *, dry_run: bool = False, sleeps: list | None = None, **kw):
    cache = Cache.load(tracker_cache(settings))
    sleep = sleeps.append if sleeps is not None else lambda s: None
    client = client_for(settings, TOKEN, cache, sleep=sleep, **kw)
    return update_tracker(settings, client, cache, ISSUE, dry_run=dry_run)


@pytest.mark.slow
def test_first_run_then_an_unchanged_night_costs_304s_only(settings, github):
    _many(github)
    first = _run(settings)
    assert first.outcome == "updated"
    # 203 open PRs: 3 search pages, 203 file lists, the issue, one PATCH
    assert first.requests == 3 + 203 + 1 + 1 == github.count()
    body = github.issues[ISSUE]
    assert body.startswith("Tracking the MPSGraph → Metal migration.\n\nMaintainers' notes stay.")
    assert body.count(START) == 1 and body.count(END) == 1
    by_op = {c.op: c for c in first.found.claims}
    assert by_op["atan2"].state is ClaimState.DUPLICATE and by_op["atan2"].prs == (10, 12)
    # one PR touching two operators claims both
    assert by_op["exp2"].prs == (11,) and by_op["fmod"].prs == (11,)
    # the closed duplicate claims nothing
    assert by_op["logit"].state is ClaimState.UNCLAIMED
    assert "| `atan2` | migrate |" in body and "⚠️ duplicate | #10 (`dev10`), #12 (`dev12`)" in body
    # the docs PRs mention `add` and `where` in prose: no claim
    assert all(c.prs == () or c.op in {"atan2", "exp2", "fmod"} for c in first.found.claims)

    calls = len(github.calls)
    second = _run(settings)
    assert second.outcome == "unchanged"
    assert second.requests <= 5
    new = github.calls[calls:]
    assert [m for m, _, _ in new] == ["GET"] * len(new)  # no PATCH
    # the issue changed with our PATCH, so its GET is a 200 once; the search pages are 304s
    assert sum(s == 304 for _, _, s in new) >= 3
    third = _run(settings)
    assert third.requests == 4 and third.not_modified == 4
    assert github.issues[ISSUE] == body


def test_the_cache_reads_back_as_written_and_a_damaged_one_as_none(tmp_path: Path) -> None:
    path = tmp_path / "tracker.json"
    cache = Cache(
        {"https://x/a": Cached('"v1"', {"items": []}, None),
         "https://x/b": Cached('"v2"', [1], "https://x/b?page=2")},
        {"7": KnownPull("2026-12-01T08:00:00Z", ("a.mm",), ("atan2",))},
    )  # fmt: skip
    cache.save(path)
    saved = json.loads(path.read_text())
    assert saved["prs"] == {"7": {"updated_at": "2026-12-01T08:00:00Z", "files": ["a.mm"],
                                  "words": ["atan2"]}}  # fmt: skip
    assert saved["etags"]["https://x/a"] == {"etag": '"v1"', "data": {"items": []}, "next": None}
    assert Cache.load(path) == cache
    # an entry of another shape: the whole cache is dropped, as a first run (never a crash)
    saved["prs"]["7"]["files"] = "a.mm"
    path.write_text(json.dumps(saved))
    assert Cache.load(path) == Cache()
    path.write_text(json.dumps({**saved, "version": 2}))
    assert Cache.load(path) == Cache()


def test_a_changed_pr_alone_is_read_again_and_a_closed_one_drops_out(settings, github):
    _many(github, extra=5)
    _run(settings)
    github.pulls[12].state = "closed"  # superseded by #10
    pull = github.pulls[101]
    patch = "@@ -1 +1 @@\n+REGISTER_UNARY_OP(erfinv, float, float);\n"
    pull.files.append({"filename": "UnaryKernel.metal", "patch": patch})
    pull.updated_at = "2026-12-01T08:00:00Z"
    calls = len(github.calls)
    run = _run(settings)
    files = [p for _, p, _ in github.calls[calls:] if "/files" in p]
    assert files == [f"/repos/{REPO}/pulls/101/files?per_page=100"]
    by_op = {c.op: c for c in run.found.claims}
    assert by_op["atan2"].state is ClaimState.CLAIMED and by_op["atan2"].prs == (10,)
    assert by_op["erfinv"].prs == (101,)
    assert run.outcome == "updated"


def test_operators_that_left_the_backlog_are_listed_as_merged(settings, github):
    github.issues[ISSUE] = f"Notes.\n\n{START}\n| 1 | `sinh` | migrate |\n{END}\nFooter.\n"
    run = _run(settings)
    body = github.issues[ISSUE]
    assert "**Merged since listed:** `sinh`" in body
    assert body.startswith("Notes.\n\n") and body.endswith("\nFooter.\n")
    assert any(c.op == "sinh" and c.state is ClaimState.MERGED for c in run.found.claims)
    _run(settings)  # it stays listed as merged
    assert "`sinh`" in github.issues[ISSUE]


def test_dry_run_writes_nothing(settings, github):
    _many(github, extra=0)
    before = github.issues[ISSUE]
    run = _run(settings, dry_run=True)
    assert run.outcome == "dry-run" and START in run.section
    assert github.issues[ISSUE] == before
    assert "PATCH" not in {m for m, _, _ in github.calls}


def test_a_rate_limit_that_resets_soon_is_waited_out(settings, github):
    _many(github, extra=3)
    reset = str(int(time.time()) + 30)
    github.faults = [(403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset}),
                     (429, {"retry-after": "2"})]  # fmt: skip
    sleeps: list[float] = []
    run = _run(settings, sleeps=sleeps)
    assert run.outcome == "updated"
    assert len(sleeps) == 2 and 1 <= sleeps[0] <= 31 and sleeps[1] == 2


def test_a_rate_limit_far_away_stops_the_run_and_keeps_the_issue_and_cache(settings, github):
    _many(github, extra=3)
    before = github.issues[ISSUE]
    reset = str(int(time.time()) + 3600)
    github.faults = [(403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset})]
    with pytest.raises(GitHubError, match="rate limited by GitHub"):
        _run(settings)
    assert github.issues[ISSUE] == before
    assert not tracker_cache(settings).exists()


def test_the_request_budget_stops_the_run_before_it_writes(settings, github):
    _many(github, extra=50)
    limited = dataclasses.replace(
        settings, review=dataclasses.replace(settings.review, tracker_max_requests=20)
    )
    before = github.issues[ISSUE]
    with pytest.raises(GitHubError, match="budget of 20 GitHub requests is spent"):
        _run(limited)
    assert github.count() == 20
    assert github.issues[ISSUE] == before


def test_patch_words_take_operator_names_from_their_places():
    words = patch_words(
        "@@ -1 +1 @@\n-- func: erf(Tensor self) -> Tensor\n"
        "+REGISTER_UNARY_OP(sinh, float, float);\n"
        ' context line with tan_functor\n+  "cosh": [torch.float16],\n+Fix the abs docs\n'
    )
    assert {"erf", "sinh", "cosh"} <= words
    assert "tan_functor" not in words  # not a changed line
    assert "abs" not in words and "Fix" not in words


def _cli(settings, github_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MPS_PIPELINE_")}
    # the session's check-math cache, which keeps op_db's dump (a tree named by --root has no
    # OpInfo table, so the backlog reads op_db): dumped once a session, not in every state dir
    env.update(settings_env())
    env.update(
        GITHUB_TOKEN=TOKEN,
        MPS_PIPELINE_GITHUB_API_URL=github_url,
        MPS_PIPELINE_GITHUB_REPO=REPO,
        MPS_PIPELINE_STATE_DIR=str(settings.state_dir),
        PYTHONPATH=str(Path(__file__).resolve().parents[2]),
    )
    return subprocess.run(
        [sys.executable, "-m", "pipeline", *args], capture_output=True, text=True,
        env=env, cwd=settings.state_dir.parent, timeout=120,
    )  # fmt: skip


@pytest.mark.slow
def test_the_commands_tracker_and_backlog_claims(settings, github, httpserver):
    _many(github, extra=2)
    url = httpserver.url_for("")
    proc = _cli(settings, url, "tracker", "--issue", str(ISSUE), "--repo", REPO)
    assert proc.returncode == 0, proc.stderr
    assert f"issue #{ISSUE}: tracker section updated; 10 operators, 5 open PRs, 1 duplicated" in (
        proc.stderr
    )
    assert TOKEN not in proc.stdout + proc.stderr
    proc = _cli(settings, url, "backlog", "--claims", "--json", "--root", str(settings.root))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    atan2 = next(o for o in doc["operators"] if o["op"] == "atan2")
    assert atan2["state"] == "duplicate" and [p["number"] for p in atan2["prs"]] == [10, 12]
    assert "answered 304" in proc.stderr
    proc = _cli(settings, url, "tracker", "--issue", "999", "--repo", REPO)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].startswith("error: GET")


def _flags(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", text))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["backlog", "--claims"], "backlog --claims reads the open pull requests from GitHub: "
         "it needs a token with pull-requests: read"),
        (["tracker", "--issue", "1", "--dry-run"], "tracker --dry-run writes nothing, but reads "
         "issue #1 and the open pull requests from GitHub: it needs a token with issues: read "
         "and pull-requests: read"),
        (["tracker", "--issue", "1"], "tracker reads issue #1 and the open pull requests from "
         "GitHub and writes the section: it needs a token with issues: write and "
         "pull-requests: read"),
    ],
)  # fmt: skip
def test_without_a_token_each_command_says_what_it_needs(settings, argv, says):
    # issue 28: both said "use --dry-run to print the comment instead"; backlog has no
    # --dry-run, and tracker --dry-run reads GitHub with the token all the same
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pipeline", *args],
            capture_output=True, text=True, cwd=settings.state_dir.parent, timeout=120,
            env={k: v for k, v in os.environ.items() if k != "GITHUB_TOKEN"}
            | {"PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        )  # fmt: skip

    env_less = run(*argv)
    assert env_less.returncode == 2
    (error,) = [line for line in env_less.stderr.splitlines() if line.startswith("error:")]
    assert error.startswith("error: $GITHUB_TOKEN is not set (github.token_env names the ")
    assert says in error
    assert "print the comment" not in error
    # every flag the message names is one the command has
    assert _flags(error) <= _flags(run(argv[0], "--help").stdout), error


@pytest.mark.slow
def test_a_token_without_the_permission_is_told_what_the_tracker_needs(settings, github,
                                                                       httpserver):  # fmt: skip
    _many(github, extra=0)
    httpserver.expect_oneshot_request(ISSUE_URI, method="PATCH").respond_with_json(
        {"message": "Resource not accessible by integration"}, status=403
    )
    proc = _cli(settings, httpserver.url_for(""), "tracker", "--issue", str(ISSUE), "--repo", REPO)
    assert proc.returncode == 2
    assert (
        f"permission denied: the token needs issues: write and pull-requests: read on {REPO}"
        in proc.stderr
    )
    assert "statuses" not in proc.stderr and TOKEN not in proc.stderr


def test_find_claims_reads_the_same_as_the_tracker(settings, github):
    _many(github, extra=0)
    cache = Cache.load(tracker_cache(settings))
    found = find_claims(settings, client_for(settings, TOKEN, cache), cache)
    assert [c.op for c in found.claims][:3] == ["erfinv", "exp2", "fmod"]  # easiest first
    assert found.requests == 1 + 4 - 1  # the search, the three open PRs' files
