"""Issue 16, point 11: GitHub faults against real local HTTP servers: redirects off the API's
origin, a body dripped a byte a second, and two jobs posting on a lagging comment list."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from pipeline.errors import GitHubError
from pipeline.github import GitHubClient
from tests.test_github import BOT, COMMENTS_URI, MARKER, REPO, TOKEN, FakeGitHub

STATUS_URI = f"/repos/{REPO}/statuses/{'a' * 40}"


@pytest.fixture
def other() -> Iterator[HTTPServer]:
    server = HTTPServer(host="localhost", port=0)
    server.start()
    yield server
    server.clear()
    server.stop()


@pytest.mark.slow
@pytest.mark.parametrize("code", [307, 308])
def test_a_post_redirected_to_another_host_is_an_error_and_posts_nothing_there(
    httpserver: HTTPServer, other: HTTPServer, code: int
) -> None:
    other.expect_request("/stolen", method="POST").respond_with_json({"id": 1}, status=201)
    httpserver.expect_request(COMMENTS_URI, method="POST").respond_with_response(
        Response("", code, {"Location": other.url_for("/stolen")})
    )
    client = GitHubClient(httpserver.url_for(""), REPO, TOKEN, sleep=lambda s: None)
    with pytest.raises(GitHubError, match=f"GitHub answered {code}, a redirect to another"):
        client.create_comment(7, f"{MARKER}\nx")
    assert other.log == []
    assert TOKEN not in str(httpserver.log)


@pytest.mark.slow
@pytest.mark.parametrize("code", [307, 308])
def test_a_status_redirected_to_another_host_is_an_error(
    httpserver: HTTPServer, other: HTTPServer, code: int
) -> None:
    other.expect_request("/stolen", method="POST").respond_with_json({}, status=201)
    httpserver.expect_request(STATUS_URI, method="POST").respond_with_response(
        Response("", code, {"Location": other.url_for("/stolen")})
    )
    client = GitHubClient(httpserver.url_for(""), REPO, TOKEN, sleep=lambda s: None)
    with pytest.raises(GitHubError, match="refusing to follow it off github.api_url"):
        client.set_status("a" * 40, "success", "ok", context="mps/targeted")
    assert other.log == []


def test_a_redirect_within_the_api_is_followed(httpserver: HTTPServer) -> None:
    # a renamed repository: GitHub answers 301 to its new URL, on the same origin
    httpserver.expect_request(COMMENTS_URI).respond_with_response(
        Response("", 301, {"Location": httpserver.url_for("/repositories/1/issues/7/comments")})
    )
    httpserver.expect_request("/repositories/1/issues/7/comments").respond_with_json([])
    client = GitHubClient(httpserver.url_for(""), REPO, TOKEN, sleep=lambda s: None)
    assert client.list_comments(7) == ()


@pytest.mark.slow
def test_a_body_dripped_a_byte_a_second_hits_the_total_deadline() -> None:
    server = HTTPServer(host="127.0.0.1", port=0, threaded=True)
    server.start()
    stop = threading.Event()

    def drip(_request: Request) -> Response:
        def body() -> Iterator[bytes]:
            for byte in b"[" + b" " * 1000 + b"]":
                if stop.wait(1.0):
                    return
                yield bytes([byte])

        return Response(body(), 200, {"Content-Type": "application/json"})

    try:
        server.expect_request(COMMENTS_URI).respond_with_handler(drip)
        client = GitHubClient(server.url_for(""), REPO, TOKEN, timeout=5, deadline=3)
        start = time.monotonic()
        with pytest.raises(GitHubError, match=r"took more than 3 s \(the deadline\)"):
            client.list_comments(7)
        assert time.monotonic() - start < 8
    finally:
        stop.set()
        server.clear()
        server.stop()


@pytest.mark.slow
@pytest.mark.parametrize("round_", range(3))
def test_two_jobs_on_a_lagging_list_leave_one_comment(round_: int) -> None:
    """GitHub's lists are eventually consistent: a comment shows in them only 0.5 s after
    it was created. Two jobs post at once; one marked comment must remain."""
    server = HTTPServer(host="127.0.0.1", port=0, threaded=True)
    server.start()
    try:
        github = FakeGitHub(server)
        created_at: dict[int, float] = {}
        lag = 0.5
        create = github.create

        def timed_create(request: Request) -> Response:
            response = create(request)
            with github.lock:
                created_at[github.comments[-1]["id"]] = time.monotonic()
            return response

        def lagging_list(request: Request) -> Response:
            with github.lock:  # (reentrant) the list answers as if the newest were not there
                everything = github.comments
                now = time.monotonic()
                github.comments = [
                    c for c in everything if now - created_at.get(c["id"], 0.0) >= lag
                ]
                try:
                    return github.list(request)
                finally:
                    github.comments = everything

        server.expect_request(COMMENTS_URI, method="GET").respond_with_handler(lagging_list)
        server.expect_request(COMMENTS_URI, method="POST").respond_with_handler(timed_create)
        github.install()
        errors: list[BaseException] = []
        go = threading.Barrier(2, timeout=10)

        def job(n: int) -> None:
            client = GitHubClient(server.url_for(""), REPO, TOKEN, settle=1.0)
            try:
                go.wait()
                client.upsert_comment(7, f"job {n}", MARKER, author=BOT)
            except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
                errors.append(exc)

        threads = [threading.Thread(target=job, args=(n,)) for n in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert errors == []
        assert [m for m, _ in github.calls].count("POST") == 2  # both posted: the race
        assert len(github.marked()) == 1
    finally:
        server.clear()
        server.stop()
