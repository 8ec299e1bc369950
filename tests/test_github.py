"""GitHubClient against a real HTTP server on 127.0.0.1 (pytest-httpserver), real requests."""

from __future__ import annotations

import json
import logging
import re
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from pipeline import github as github_module
from pipeline.errors import GitHubError
from pipeline.github import GitHubClient, token_from_env

TOKEN = "ghp_S3cr3tT0kenThatMustNeverBePrinted0123"
REPO = "octo/pytorch"
MARKER = "<!-- mps-pipeline:pr -->"
COMMENTS_URI = re.compile(rf"^/repos/{REPO}/issues/(\d+)/comments$")
COMMENT_URI = re.compile(rf"^/repos/{REPO}/issues/comments/(\d+)$")
SHA = "0123456789abcdef0123456789abcdef01234567"
BOT = "github-actions[bot]"


@dataclass
class FakeGitHub:
    """Just enough of the issues-comments API, with state, to watch upserts. Safe to serve
    from several threads (``HTTPServer(threaded=True)``)."""

    server: HTTPServer
    comments: list[dict] = field(default_factory=list)
    calls: list[tuple[str, str]] = field(default_factory=list)
    next_id: int = 1000
    page_size: int = 100
    lock: threading.RLock = field(default_factory=threading.RLock)

    def install(self) -> FakeGitHub:
        expect = self.server.expect_request
        expect(COMMENTS_URI, method="GET").respond_with_handler(self.list)
        expect(COMMENTS_URI, method="POST").respond_with_handler(self.create)
        expect(COMMENT_URI, method="PATCH").respond_with_handler(self.update)
        expect(COMMENT_URI, method="DELETE").respond_with_handler(self.delete)
        return self

    def add(self, body: str, user: str = "someone") -> int:
        with self.lock:
            self.next_id += 1
            self.comments.append({"id": self.next_id, "body": body, "user": {"login": user}})
            return self.next_id

    def list(self, request: Request) -> Response:
        with self.lock:
            self.calls.append(("GET", request.full_path))
            per_page = min(int(request.args.get("per_page", 30)), self.page_size)
            page = int(request.args.get("page", 1))
            chunk = self.comments[(page - 1) * per_page : page * per_page]
            headers = {}
            if page * per_page < len(self.comments):
                nxt = self.server.url_for(request.path) + f"?per_page={per_page}&page={page + 1}"
                headers["Link"] = f'<{nxt}>; rel="next", <{nxt}>; rel="last"'
            return Response(json.dumps(chunk), 200, headers, content_type="application/json")

    def create(self, request: Request) -> Response:
        with self.lock:
            self.calls.append(("POST", request.path))
            comment_id = self.add(request.get_json()["body"], user=BOT)
            return Response(json.dumps(self.comments[-1] | {"id": comment_id}), 201)

    def update(self, request: Request) -> Response:
        with self.lock:
            self.calls.append(("PATCH", request.path))
            comment_id = int(COMMENT_URI.match(request.path).group(1))
            for comment in self.comments:
                if comment["id"] == comment_id:
                    comment["body"] = request.get_json()["body"]
                    return Response(json.dumps(comment), 200)
            return Response(json.dumps({"message": "Not Found"}), 404)

    def delete(self, request: Request) -> Response:
        with self.lock:
            self.calls.append(("DELETE", request.path))
            comment_id = int(COMMENT_URI.match(request.path).group(1))
            before = len(self.comments)
            self.comments = [c for c in self.comments if c["id"] != comment_id]
            if len(self.comments) == before:
                return Response(json.dumps({"message": "Not Found"}), 404)
            return Response("", 204)

    def marked(self) -> list[dict]:
        return [c for c in self.comments if MARKER in c["body"]]


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def client(httpserver: HTTPServer, sleeps: list[float]) -> GitHubClient:
    return GitHubClient(httpserver.url_for(""), REPO, TOKEN, sleep=sleeps.append)


@pytest.fixture
def github(httpserver: HTTPServer) -> FakeGitHub:
    return FakeGitHub(httpserver).install()


def _json(data: object, status: int = 200, **headers: str) -> Response:
    return Response(json.dumps(data), status, headers, content_type="application/json")


# -- one comment, updated in place --------------------------------------------------------


def test_upsert_creates_then_updates_then_leaves_alone(client, github):
    github.add("LGTM, but what about float16?")
    first = client.upsert_comment(7, f"{MARKER}\nrun 1", MARKER, author=BOT)
    assert first[1] == "created"
    second = client.upsert_comment(7, f"{MARKER}\nrun 2", MARKER, author=BOT)
    assert second == (first[0], "updated")
    third = client.upsert_comment(7, f"{MARKER}\nrun 2", MARKER, author=BOT)
    assert third == (first[0], "unchanged")
    assert [c["body"] for c in github.marked()] == [f"{MARKER}\nrun 2"]
    assert len(github.comments) == 2
    assert [m for m, _ in github.calls].count("POST") == 1


def test_a_second_run_edits_and_never_adds(httpserver, github):
    """A new process (fresh client, no memory) finds the comment by its marker."""
    for run in range(3):
        fresh = GitHubClient(httpserver.url_for(""), REPO, TOKEN, sleep=lambda s: None)
        fresh.upsert_comment(7, f"results of run {run}", MARKER, author=BOT)
    assert len(github.marked()) == 1
    assert github.marked()[0]["body"] == f"{MARKER}\nresults of run 2"


def test_duplicates_found_update_the_oldest_and_are_deleted(client, github):
    """Left by older versions, or by a job stopped between its create and its clean-up."""
    github.add(f"{MARKER}\nnot the bot's", user="mallory")
    oldest = github.add(f"{MARKER}\nold 1", user=BOT)
    second = github.add(f"{MARKER}\nold 2", user=BOT)
    assert client.upsert_comment(7, f"{MARKER}\nnew", MARKER, author=BOT) == (oldest, "updated")
    assert [c["body"] for c in github.marked()] == [f"{MARKER}\nnot the bot's", f"{MARKER}\nnew"]
    assert github.calls[1:] == [
        ("PATCH", f"/repos/{REPO}/issues/comments/{oldest}"),
        ("DELETE", f"/repos/{REPO}/issues/comments/{second}"),
    ]


def test_a_comment_another_job_created_meanwhile_is_kept_and_ours_deleted(httpserver, client):
    """The other job's POST lands between our list and our POST: its comment is older."""
    github = FakeGitHub(httpserver)
    other: list[int] = []

    def create_after_the_other_job(request: Request) -> Response:
        other.append(github.add(f"{MARKER}\nthe other job", user=BOT))
        return github.create(request)

    httpserver.expect_oneshot_request(COMMENTS_URI, method="POST").respond_with_handler(
        create_after_the_other_job
    )
    github.install()
    assert client.upsert_comment(7, f"{MARKER}\nours", MARKER, author=BOT) == (
        other[0],
        "updated",
    )
    assert [(c["id"], c["body"]) for c in github.marked()] == [(other[0], f"{MARKER}\nours")]
    assert [m for m, _ in github.calls] == ["GET", "POST", "GET", "PATCH", "DELETE"]


def test_a_duplicate_that_cannot_be_deleted_is_a_warning(httpserver, client, github, caplog):
    """Already gone (the other job deleted it) is fine; refused leaves it for the next run."""
    oldest = github.add(f"{MARKER}\nsame", user=BOT)
    gone, kept_back = github.add(f"{MARKER}\nx", user=BOT), github.add(f"{MARKER}\ny", user=BOT)
    gone_uri = f"/repos/{REPO}/issues/comments/{gone}"
    httpserver.expect_oneshot_request(gone_uri, method="DELETE").respond_with_json(
        {"message": "Not Found"}, status=404
    )
    httpserver.expect_oneshot_request(
        f"/repos/{REPO}/issues/comments/{kept_back}", method="DELETE"
    ).respond_with_json({"message": "Must have admin rights"}, status=403)
    assert client.upsert_comment(7, f"{MARKER}\nsame", MARKER, author=BOT) == (
        oldest,
        "unchanged",
    )
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and f"could not delete duplicate comment {kept_back}" in warnings[0]
    assert "Must have admin rights" in warnings[0] and TOKEN not in caplog.text


@pytest.fixture(scope="module")
def threaded_server():
    """A server answering requests in parallel, as GitHub does (stopping one takes 0.5 s)."""
    server = HTTPServer(host="127.0.0.1", port=0, threaded=True)
    server.start()
    yield server
    server.stop()


@pytest.mark.parametrize("attempt", range(5))
def test_two_jobs_posting_at_once_leave_one_comment(threaded_server, attempt):
    """Both list before either creates (a barrier where the issue had a slow list), so both
    create: one marked comment remains, the same for both, every time."""
    server = threaded_server
    try:
        github = FakeGitHub(server)
        github.add("LGTM once the int dtypes pass", user="reviewer")
        first_lists = threading.Barrier(2, timeout=10)
        listed = iter(range(2))

        def slow_first_lists(request: Request) -> Response:
            with github.lock:
                first = next(listed, None) is not None
            answer = github.list(request)
            if first:  # answered only when both jobs have listed: both see no comment
                first_lists.wait()
            return answer

        # registered first, so it answers the GETs before FakeGitHub.list would
        server.expect_request(COMMENTS_URI, method="GET").respond_with_handler(slow_first_lists)
        github.install()
        results: dict[int, tuple[int, str]] = {}
        errors: list[BaseException] = []

        def job(n: int) -> None:
            client = GitHubClient(server.url_for(""), REPO, TOKEN, sleep=lambda s: None)
            try:
                results[n] = client.upsert_comment(7, f"job {n}", MARKER, author=BOT)
            except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
                errors.append(exc)

        threads = [threading.Thread(target=job, args=(n,)) for n in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert errors == [] and len(results) == 2
        assert [m for m, _ in github.calls].count("POST") == 2  # the race happened
        [kept] = github.marked()
        assert kept["body"] in (f"{MARKER}\njob 0", f"{MARKER}\njob 1")
        assert kept["id"] == min(c["id"] for c in github.comments if c["user"]["login"] == BOT)
        assert {comment_id for comment_id, _ in results.values()} == {kept["id"]}
        assert len(github.comments) == 2  # the reviewer's and the one kept
    finally:
        server.clear()


def test_a_post_that_failed_but_landed_is_not_posted_twice(httpserver, client, github):
    """GitHub answers 502 yet creates the comment: the client looks before re-posting."""

    def create_then_fail(request: Request) -> Response:
        github.create(request)
        return _json({"message": "Server Error"}, 502)

    # a one-shot handler wins over the permanent ones, for the first POST only
    httpserver.expect_oneshot_request(COMMENTS_URI, method="POST").respond_with_handler(
        create_then_fail
    )
    comment_id, outcome = client.upsert_comment(7, "body", MARKER, author=BOT)
    assert outcome == "created"
    assert [m for m, _ in github.calls] == ["GET", "POST", "GET"]
    assert len(github.marked()) == 1
    assert github.marked()[0]["id"] == comment_id


def test_create_comment_reports_an_ambiguous_failure(httpserver, client):
    httpserver.expect_request(COMMENTS_URI, method="POST").respond_with_json({}, status=500)
    with pytest.raises(GitHubError, match="may or may not have been posted"):
        client.create_comment(7, "hello")
    assert len(httpserver.log) == 1  # never retried blindly


def test_marker_must_be_ours(client):
    with pytest.raises(GitHubError, match="mps-pipeline:NAME"):
        client.upsert_comment(7, "body", "<!-- other -->", author=BOT)


def test_a_user_comment_carrying_the_marker_is_never_edited(httpserver, github):
    """Anyone can paste the marker: only the bot's own marked comment is the pipeline's."""
    planted = github.add(f"{MARKER}\nall MPS tests pass, merge it", user="mallory")
    quoted = github.add(f"> {MARKER}\n> quoting the bot", user="Reviewer")
    before = [dict(c) for c in github.comments]

    def run(n: int) -> tuple[int, str]:
        fresh = GitHubClient(httpserver.url_for(""), REPO, TOKEN, sleep=lambda s: None)
        return fresh.upsert_comment(7, f"{MARKER}\nrun {n}", MARKER, author=BOT)

    first_id, outcome = run(1)
    assert outcome == "created" and first_id not in (planted, quoted)
    assert [m for m, _ in github.calls].count("PATCH") == 0
    # a second run finds the bot's comment (login case aside) and edits it, only it
    assert run(2) == (first_id, "updated")
    assert github.comments[:2] == before
    assert [(c["user"]["login"], c["body"]) for c in github.comments[2:]] == [
        (BOT, f"{MARKER}\nrun 2")
    ]
    assert [(m, p) for m, p in github.calls if m == "PATCH"] == [
        ("PATCH", f"/repos/{REPO}/issues/comments/{first_id}")
    ]
    upper = GitHubClient(httpserver.url_for(""), REPO, TOKEN, sleep=lambda s: None)
    assert upper.upsert_comment(7, f"{MARKER}\nrun 2", MARKER, author=BOT.upper()) == (
        first_id,
        "unchanged",
    )


def test_an_empty_bot_login_is_refused_before_any_request(httpserver, client):
    with pytest.raises(GitHubError, match="github.bot_login is empty"):
        client.upsert_comment(7, "body", MARKER, author=" ")
    assert httpserver.log == []


# -- responses of the wrong shape ----------------------------------------------------------

LIST = f"GET /repos/{REPO}/issues/7/comments"
GOOD = {"id": 1, "body": "hi", "user": {"login": "a"}}


def _shape_error(info: pytest.ExceptionInfo[GitHubError]) -> str:
    """The message, checked for what every such error must be: a GitHubError of its own (no
    TypeError or KeyError under it), without the token."""
    assert type(info.value) is GitHubError
    assert info.value.__context__ is None and info.value.__cause__ is None
    text = "".join(traceback.format_exception(info.value))
    assert TOKEN not in text and "Bearer" not in text
    return str(info.value)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ({"comments": [GOOD]}, "expected a list of comments, got an object"),
        ("[]", "expected a list of comments, got a string"),
        ([GOOD, ["x"]], "expected comment [1] to be an object, got a list"),
        (
            [{"body": "x", "user": {"login": "a"}}],
            "expected `id` of comment [0] to be an integer, but it is missing",
        ),
        ([GOOD | {"id": "5"}], "expected `id` of comment [0] to be an integer, got a string"),
        ([GOOD | {"id": True}], "expected `id` of comment [0] to be an integer, got a boolean"),
        ([GOOD | {"id": 1.5}], "expected `id` of comment [0] to be an integer, got a number"),
        ([GOOD | {"body": 5}], "expected `body` of comment [0] to be a string, got a number"),
        ([GOOD | {"body": None}], "expected `body` of comment [0] to be a string, got null"),
        (
            [{"id": 1, "body": "x"}],
            "expected `user` of comment [0] to be an object, but it is missing",
        ),
        ([GOOD | {"user": "a"}], "expected `user` of comment [0] to be an object, got a string"),
        (
            [GOOD | {"user": {"id": 3}}],
            "expected `user.login` of comment [0] to be a string, but it is missing",
        ),
        (
            [GOOD | {"user": {"login": ["a"]}}],
            "expected `user.login` of comment [0] to be a string, got a list",
        ),
    ],
)
def test_a_comment_list_of_the_wrong_shape_is_a_clear_error(httpserver, client, answer, message):
    httpserver.expect_request(COMMENTS_URI, method="GET").respond_with_json(answer)
    with pytest.raises(GitHubError) as info:
        client.upsert_comment(7, "body", MARKER, author=BOT)
    assert _shape_error(info) == f"{LIST}: {message}"
    assert [r.method for r, _ in httpserver.log] == ["GET"]  # nothing posted on a bad list


def test_a_bad_item_on_a_later_page_names_the_endpoint(httpserver, client):
    page2 = httpserver.url_for(f"/repos/{REPO}/issues/7/comments") + "?page=2"
    httpserver.expect_oneshot_request(COMMENTS_URI).respond_with_json(
        [GOOD], headers={"Link": f'<{page2}>; rel="next"'}
    )
    httpserver.expect_oneshot_request(COMMENTS_URI).respond_with_json([None])
    with pytest.raises(GitHubError) as info:
        client.list_comments(7)
    assert _shape_error(info) == f"{LIST}: expected comment [0] to be an object, got null"


def test_a_comment_without_an_owner_is_nobodys(httpserver, client):
    """GitHub's schema has a nullable user; such a comment is never the bot's."""
    httpserver.expect_request(COMMENTS_URI).respond_with_json([GOOD | {"user": None}])
    assert client.list_comments(7)[0].user == ""


@pytest.mark.parametrize(
    ("method", "answer", "message"),
    [
        ("POST", [GOOD], "expected the comment to be an object, got a list"),
        (
            "POST",
            {"body": "x", "user": {"login": BOT}},
            "expected `id` of the comment to be an integer, but it is missing",
        ),
        ("PATCH", GOOD | {"body": None}, "expected `body` of the comment to be a string, got null"),
        ("PATCH", "ok", "expected the comment to be an object, got a string"),
    ],
)
def test_a_created_or_updated_comment_of_the_wrong_shape_is_a_clear_error(
    httpserver, client, method, answer, message
):
    uri = COMMENTS_URI if method == "POST" else COMMENT_URI
    httpserver.expect_request(uri, method=method).respond_with_json(answer, status=201)
    with pytest.raises(GitHubError) as info:
        if method == "POST":
            client.create_comment(7, "body")
        else:
            client.update_comment(5, "body")
    path = f"/repos/{REPO}/issues/{'7/comments' if method == 'POST' else 'comments/5'}"
    assert _shape_error(info) == f"{method} {path}: {message}"


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ([], "expected a pull request object, got a list"),
        ({"number": 7}, "expected `head` to be an object, but it is missing"),
        ({"head": None}, "expected `head` to be an object, got null"),
        ({"head": {"ref": "x"}}, "expected `head.sha` to be a string, but it is missing"),
        ({"head": {"sha": 12}}, "expected `head.sha` to be a string, got a number"),
    ],
)
def test_a_pull_request_of_the_wrong_shape_is_a_clear_error(httpserver, client, answer, message):
    httpserver.expect_request(f"/repos/{REPO}/pulls/7").respond_with_json(answer)
    with pytest.raises(GitHubError) as info:
        client.pull_head_sha(7)
    assert _shape_error(info) == f"GET /repos/{REPO}/pulls/7: {message}"


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (
            {"state": "success"},
            "expected `id` of the commit status to be an integer, but it is missing",
        ),
        ([{"id": 1}], "expected a commit status object, got a list"),
    ],
)
def test_a_commit_status_of_the_wrong_shape_is_a_clear_error(httpserver, client, answer, message):
    httpserver.expect_request(f"/repos/{REPO}/statuses/{SHA}").respond_with_json(answer, 201)
    with pytest.raises(GitHubError) as info:
        client.set_status(SHA, "success", "ok", "mps/targeted")
    assert _shape_error(info) == f"POST /repos/{REPO}/statuses/{SHA}: {message}"


def test_a_body_that_is_not_json_names_the_endpoint(httpserver, client):
    httpserver.expect_request(COMMENTS_URI).respond_with_data("<html>proxy login</html>")
    with pytest.raises(GitHubError, match=rf"^{LIST}: GitHub answered 200 with a body that is not"):
        client.list_comments(7)


# -- pagination ------------------------------------------------------------------------------


def test_list_comments_follows_link_pagination_across_three_pages(client, github):
    for i in range(250):
        github.add(f"comment {i}")
    github.add(f"{MARKER}\nours", user=BOT)  # on page 3
    comments = client.list_comments(7)
    assert [c.body for c in comments[:2]] == ["comment 0", "comment 1"]
    assert len(comments) == 251 and comments[-1].body.endswith("ours")
    gets = [path for method, path in github.calls if method == "GET"]
    assert gets == [
        f"/repos/{REPO}/issues/7/comments?per_page=100",
        f"/repos/{REPO}/issues/7/comments?per_page=100&page=2",
        f"/repos/{REPO}/issues/7/comments?per_page=100&page=3",
    ]
    assert client.upsert_comment(7, "new", MARKER, author=BOT)[1] == "updated"


@pytest.mark.parametrize(
    "link",
    [
        "https://evil.example/steal?page=2",
        "//evil.example/steal?page=2",  # scheme-relative: another host all the same
        "https://{netloc}/repos/octo/pytorch/issues/7/comments?page=2",  # same host, https
    ],
)
def test_pagination_link_to_another_origin_is_refused(httpserver, client, link):
    link = link.format(netloc=f"{httpserver.host}:{httpserver.port}")
    httpserver.expect_request(COMMENTS_URI).respond_with_json(
        [GOOD], headers={"Link": f'<{link}>; rel="next"'}
    )
    with pytest.raises(GitHubError) as info:
        client.upsert_comment(7, "body", MARKER, author=BOT)
    message = _shape_error(info)
    assert message.startswith(f"{LIST}: GitHub returned a pagination link to another origin")
    assert "refusing to send the token there" in message
    assert len(httpserver.log) == 1  # not followed, nothing posted


def _paged(httpserver: HTTPServer, next_page: Callable[[int], int | None]) -> None:
    """Comments that page on forever as ``next_page(page)`` says (None: the last page)."""

    def handler(request: Request) -> Response:
        page = int(request.args.get("page", 1))
        headers = {}
        following = next_page(page)
        if following is not None:
            url = httpserver.url_for(request.path) + f"?per_page=100&page={following}"
            headers["Link"] = f'<{url}>; rel="next"'
        return _json([GOOD | {"id": page}], **headers)

    httpserver.expect_request(COMMENTS_URI, method="GET").respond_with_handler(handler)


@pytest.mark.parametrize(
    ("next_page", "requests"),
    [
        (lambda page: 2 if page == 1 else 1, 2),  # page 2 links back to page 1
        (lambda page: 1, 1),  # page 1 links to itself
        (lambda page: {1: 2, 2: 3, 3: 2}[page], 3),
    ],
)
def test_a_pagination_loop_stops_at_the_first_repeated_page(
    httpserver, client, next_page, requests
):
    _paged(httpserver, next_page)
    with pytest.raises(GitHubError) as info:
        client.upsert_comment(7, "body", MARKER, author=BOT)
    assert _shape_error(info).startswith(
        f"{LIST}: GitHub's next-page link leads back to a page already read"
    )
    assert len(httpserver.log) == requests
    assert {r.method for r, _ in httpserver.log} == {"GET"}


def test_pagination_stops_after_max_pages(httpserver, client, monkeypatch):
    """A next link that never repeats (page n links to page n+1, forever) still ends."""
    monkeypatch.setattr(github_module, "MAX_PAGES", 4)
    _paged(httpserver, lambda page: page + 1)
    with pytest.raises(GitHubError) as info:
        client.upsert_comment(7, "body", MARKER, author=BOT)
    assert _shape_error(info) == (
        f"{LIST}: more than 4 pages of comments (4 read); stopped there rather than post a "
        "second comment it may not have seen"
    )
    assert len(httpserver.log) == 4


def test_a_relative_next_link_is_followed_on_the_same_origin(httpserver, client):
    httpserver.expect_oneshot_request(COMMENTS_URI).respond_with_json(
        [GOOD], headers={"Link": f'</repos/{REPO}/issues/7/comments?page=2>; rel="next"'}
    )
    httpserver.expect_oneshot_request(COMMENTS_URI).respond_with_json([GOOD | {"id": 2}])
    assert [c.id for c in client.list_comments(7)] == [1, 2]
    assert [r.full_path for r, _ in httpserver.log] == [
        f"/repos/{REPO}/issues/7/comments?per_page=100",
        f"/repos/{REPO}/issues/7/comments?page=2",
    ]


# -- retries ------------------------------------------------------------------------------


def test_secondary_rate_limit_with_retry_after_is_retried(httpserver, client, github, sleeps):
    limited = {"message": "You have exceeded a secondary rate limit. Please wait."}
    httpserver.expect_oneshot_request(COMMENTS_URI, method="GET").respond_with_response(
        _json(limited, 403, **{"Retry-After": "1"})
    )
    assert client.list_comments(7) == ()
    assert sleeps == [1.0]


def test_429_with_retry_after_is_retried(httpserver, client, github, sleeps):
    httpserver.expect_oneshot_request(COMMENTS_URI, method="POST").respond_with_response(
        _json({"message": "slow down"}, 429, **{"Retry-After": "3"})
    )
    # a rate-limited POST was refused, not applied: retrying it cannot duplicate
    assert client.create_comment(7, f"{MARKER}\nx").body.endswith("x")
    assert sleeps == [3.0]
    assert len(github.comments) == 1


def test_primary_rate_limit_waits_until_reset(httpserver, sleeps):
    now = 1_700_000_000.0
    client = GitHubClient(
        httpserver.url_for(""), REPO, TOKEN, sleep=sleeps.append, clock=lambda: now
    )
    httpserver.expect_oneshot_request(COMMENTS_URI).respond_with_response(
        _json(
            {"message": "API rate limit exceeded"},
            403,
            **{"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(now) + 42)},
        )
    )
    httpserver.expect_oneshot_request(COMMENTS_URI).respond_with_json([])
    assert client.list_comments(7) == ()
    assert sleeps == [42.0]


def test_rate_limit_too_far_away_is_reported_not_waited(httpserver, sleeps):
    client = GitHubClient(httpserver.url_for(""), REPO, TOKEN, sleep=sleeps.append)
    httpserver.expect_request(COMMENTS_URI).respond_with_response(
        _json({"message": "slow down"}, 403, **{"Retry-After": "3600"})
    )
    with pytest.raises(GitHubError, match="rate limited"):
        client.list_comments(7)
    assert sleeps == []


def test_5xx_is_retried_with_backoff_then_succeeds(httpserver, client, github, sleeps):
    for status in (502, 503, 500):
        httpserver.expect_oneshot_request(COMMENT_URI, method="PATCH").respond_with_json(
            {"message": "Server Error"}, status=status
        )
    comment_id = github.add(f"{MARKER}\nold")
    assert client.update_comment(comment_id, "new").body == "new"
    assert sleeps == [1.0, 2.0, 4.0]


def test_5xx_gives_up_after_max_retries(httpserver, sleeps):
    client = GitHubClient(httpserver.url_for(""), REPO, TOKEN, sleep=sleeps.append, max_retries=2)
    httpserver.expect_request(COMMENTS_URI).respond_with_json({"message": "Bad"}, status=502)
    with pytest.raises(GitHubError, match=r"502.*kept failing \(3 tries\)"):
        client.list_comments(7)
    assert len(sleeps) == 2 and len(httpserver.log) == 3


def test_connection_refused_is_a_clear_error(sleeps):
    client = GitHubClient("http://127.0.0.1:9", REPO, TOKEN, sleep=sleeps.append, max_retries=1)
    with pytest.raises(GitHubError, match="ConnectionError talking to 127.0.0.1:9"):
        client.list_comments(7)
    assert sleeps == [1.0]


# -- errors say what to do ----------------------------------------------------------------


def test_422_reports_githubs_message_and_errors(httpserver, client):
    httpserver.expect_request(f"/repos/{REPO}/statuses/{SHA}", method="POST").respond_with_json(
        {
            "message": "Validation Failed",
            "errors": [{"resource": "Status", "field": "context", "code": "custom",
                        "message": "context is too long (maximum is 255 characters)"}],
        },
        status=422,
        headers={"x-github-request-id": "ABCD:1234"},
    )  # fmt: skip
    with pytest.raises(GitHubError) as info:
        client.set_status(SHA, "success", "ok", "x" * 300)
    text = str(info.value)
    assert "422" in text and "Validation Failed" in text
    assert "context is too long (maximum is 255 characters)" in text
    assert "ABCD:1234" in text


def test_401_says_to_set_the_token(httpserver, client):
    httpserver.expect_request(COMMENTS_URI).respond_with_json(
        {"message": "Bad credentials"}, status=401
    )
    with pytest.raises(GitHubError, match=r"token missing or invalid: set \$GITHUB_TOKEN"):
        client.list_comments(7)


def test_403_names_the_permissions_needed(httpserver, client, github):
    httpserver.expect_oneshot_request(COMMENTS_URI, method="POST").respond_with_json(
        {"message": "Resource not accessible by integration"}, status=403
    )
    with pytest.raises(GitHubError) as info:
        client.upsert_comment(7, "body", MARKER, author=BOT)
    assert "needs pull-requests: write and statuses: write" in str(info.value)
    assert "Resource not accessible by integration" in str(info.value)
    assert github.comments == []


def test_404_points_at_repo_and_number(httpserver, client):
    httpserver.expect_request(COMMENTS_URI).respond_with_json({"message": "Not Found"}, 404)
    with pytest.raises(GitHubError, match=r"not found: check github.repo \('octo/pytorch'\)"):
        client.list_comments(99999)


# -- the token -------------------------------------------------------------------------------


def test_requests_carry_auth_and_api_headers(httpserver, client):
    httpserver.expect_request(
        COMMENTS_URI,
        headers={
            "Authorization": f"Bearer {TOKEN}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
        },
    ).respond_with_json([{"id": 1, "body": "hi", "user": {"login": "a"}}])
    assert [c.user for c in client.list_comments(7)] == ["a"]


def test_token_never_appears_in_output_logs_or_errors(httpserver, caplog, capsys):
    caplog.set_level(logging.DEBUG)  # urllib3 and requests debug logs included
    echo = {"message": f"Bad credentials for {TOKEN}", "documentation_url": "x"}
    httpserver.expect_request(COMMENTS_URI).respond_with_json(echo, status=401)
    httpserver.expect_request(COMMENT_URI).respond_with_json({"message": "boom"}, status=503)
    httpserver.expect_request(re.compile("/statuses/")).respond_with_json(
        {"message": "Validation Failed", "errors": [f"token {TOKEN} is odd"]}, status=422
    )
    client = GitHubClient(httpserver.url_for(""), REPO, TOKEN, sleep=lambda s: None)
    offline = GitHubClient("http://127.0.0.1:9", REPO, TOKEN, sleep=lambda s: None)
    errors = []
    for call in (
        lambda: client.list_comments(7),
        lambda: client.update_comment(5, "x"),
        lambda: client.set_status(SHA, "failure", "d", "c"),
        lambda: offline.list_comments(7),
        lambda: GitHubClient("http://x", REPO, f"{TOKEN}\nX-Evil: 1"),
    ):
        with pytest.raises(GitHubError) as info:
            call()
        errors.append(info.value)
    print(repr(client), client.__dict__.get("api_url"))
    texts = [caplog.text, *capsys.readouterr(), repr(client), str(client)]
    for error in errors:
        texts += [str(error), repr(error), "".join(traceback.format_exception(error))]
    assert "***" in str(errors[0])  # GitHub echoed it: redacted
    for text in texts:
        assert TOKEN not in text
    assert "Bearer" not in caplog.text


def test_token_never_appears_when_a_response_is_malformed_loops_or_leads_away(
    httpserver, caplog, capsys
):
    """The failures of shape, pagination and clean-up, with every log at DEBUG."""
    caplog.set_level(logging.DEBUG)
    echo = f"token {TOKEN}"
    base = httpserver.url_for(f"/repos/{REPO}/issues")
    httpserver.expect_request(f"/repos/{REPO}/issues/1/comments").respond_with_json(
        {"message": echo}
    )
    httpserver.expect_request(f"/repos/{REPO}/issues/2/comments").respond_with_json(
        [GOOD], headers={"Link": f'<{base}/2/comments?page=2>; rel="next"'}
    )
    httpserver.expect_request(f"/repos/{REPO}/issues/3/comments").respond_with_json(
        [GOOD], headers={"Link": f'<https://{TOKEN}.example/?page=2>; rel="next"'}
    )
    httpserver.expect_request(f"/repos/{REPO}/issues/4/comments").respond_with_json(
        [GOOD | {"id": echo}]
    )
    httpserver.expect_request(f"/repos/{REPO}/pulls/5").respond_with_json({"head": echo})
    client = GitHubClient(httpserver.url_for(""), REPO, TOKEN, sleep=lambda s: None)
    texts = []
    for call in (
        lambda: client.list_comments(1),
        lambda: client.list_comments(2),
        lambda: client.list_comments(3),
        lambda: client.upsert_comment(4, "x", MARKER, author=BOT),
        lambda: client.pull_head_sha(5),
    ):
        with pytest.raises(GitHubError) as info:
            call()
        texts.append(_shape_error(info))
    assert "leads back to a page already read" in texts[1]
    assert "another origin (https://***.example)" in texts[2]  # GitHub echoed it: redacted
    texts += [caplog.text, *capsys.readouterr()]
    for text in texts:
        assert TOKEN not in text


@pytest.mark.slow
def test_a_redirect_to_another_host_is_never_followed(httpserver, client):
    # issue 16: neither the token nor the request itself goes off github.api_url's origin
    other = HTTPServer(host="localhost", port=0)
    other.start()
    try:
        other.expect_request("/elsewhere").respond_with_json([])
        httpserver.expect_request(COMMENTS_URI).respond_with_response(
            Response("", 302, {"Location": other.url_for("/elsewhere")})
        )
        with pytest.raises(GitHubError, match="a redirect to another origin"):
            client.list_comments(7)
        assert other.log == []
    finally:
        other.clear()
        other.stop()


def test_token_with_whitespace_is_rejected_without_echoing_it():
    with pytest.raises(GitHubError) as info:
        GitHubClient("https://api.github.com", REPO, "abc def")
    assert "abc" not in str(info.value) and "whitespace" in str(info.value)


def test_token_from_env():
    needs = "it reads the pull requests: a token with pull-requests: read"
    assert token_from_env("GH", needs, {"GH": "  tok \n"}) == "tok"
    with pytest.raises(GitHubError, match=r"\$MPS_TOKEN is not set .*: it reads the pull"):
        token_from_env("MPS_TOKEN", needs, {"MPS_TOKEN": "  "})
    with pytest.raises(GitHubError, match=r"\$GITHUB_TOKEN is not set") as info:
        token_from_env("GITHUB_TOKEN", needs, {})
    assert "--dry-run" not in str(info.value)  # the command says what it has, if anything


def test_repr_shows_where_not_who():
    client = GitHubClient("https://api.github.com/", REPO, TOKEN)
    assert repr(client) == "GitHubClient(api_url='https://api.github.com', repo='octo/pytorch')"


# -- commit status ---------------------------------------------------------------------------


def test_set_status_truncates_description_to_140(httpserver, client):
    seen = []

    def handler(request: Request) -> Response:
        seen.append(request.get_json())
        return _json({"id": 77, "state": "failure"}, 201)

    httpserver.expect_request(f"/repos/{REPO}/statuses/{SHA}", method="POST").respond_with_handler(
        handler
    )
    long = "3 failed: " + ", ".join(f"test_output_match_op{i}_mps_float16" for i in range(20))
    assert client.set_status(SHA, "failure", long, "mps/targeted", "https://ci/run/1") == 77
    payload = seen[0]
    assert len(payload["description"]) == 140 and payload["description"].endswith("…")
    assert payload["context"] == "mps/targeted" and payload["target_url"] == "https://ci/run/1"


def test_pull_head_sha(httpserver, client):
    httpserver.expect_request(f"/repos/{REPO}/pulls/7").respond_with_json(
        {"number": 7, "head": {"sha": SHA, "ref": "fix-atan2"}}
    )
    assert client.pull_head_sha(7) == SHA


def test_set_status_validates_before_sending(client):
    with pytest.raises(GitHubError, match="must be one of"):
        client.set_status(SHA, "passed", "d", "c")
    with pytest.raises(GitHubError, match="not a hex commit id"):
        client.set_status("main", "success", "d", "c")
