"""GitHubClient's conditional reads (ETags, 304s), paged lists and request budget, against a
real HTTP server on 127.0.0.1 (pytest-httpserver)."""

from __future__ import annotations

import json

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from pipeline.errors import GitHubError
from pipeline.github import GitHubClient

TOKEN = "ghp_ConditionalTokenNeverPrinted0123456"
REPO = "octo/pytorch"


def _client(httpserver: HTTPServer, **kw) -> GitHubClient:
    return GitHubClient(httpserver.url_for(""), REPO, TOKEN, sleep=lambda s: None, **kw)


def test_a_304_answers_from_the_etag_cache_and_counts_as_not_modified(httpserver):
    seen: list[str | None] = []

    def issue(request: Request) -> Response:
        seen.append(request.headers.get("If-None-Match"))
        if request.headers.get("If-None-Match") == '"v1"':
            return Response("", 304, {"ETag": '"v1"'})
        return Response(json.dumps({"body": "hello"}), 200, {"ETag": '"v1"'},
                        content_type="application/json")  # fmt: skip

    httpserver.expect_request(f"/repos/{REPO}/issues/5").respond_with_handler(issue)
    etags: dict = {}
    first = _client(httpserver, etags=etags)
    assert first.issue_body(5) == "hello" and first.not_modified == 0
    again = _client(httpserver, etags=etags)  # a later run with the saved cache
    assert again.issue_body(5) == "hello"
    assert (again.sent, again.not_modified) == (1, 1)
    assert seen == [None, '"v1"']


def test_paging_refuses_a_next_link_to_another_origin(httpserver):
    httpserver.expect_request(f"/repos/{REPO}/pulls/3/files").respond_with_response(
        Response(
            "[]",
            200,
            {"Link": '<https://evil.example/x?page=2>; rel="next"'},
            content_type="application/json",
        )  # fmt: skip
    )
    with pytest.raises(GitHubError, match="another origin") as raised:
        _client(httpserver).pull_files(3)
    assert TOKEN not in str(raised.value)


def test_paging_stops_at_a_page_that_repeats(httpserver):
    url = httpserver.url_for(f"/repos/{REPO}/pulls/3/files") + "?per_page=100"
    httpserver.expect_request(f"/repos/{REPO}/pulls/3/files").respond_with_response(
        Response("[]", 200, {"Link": f'<{url}>; rel="next"'}, content_type="application/json")
    )
    with pytest.raises(GitHubError, match="pagination does not end"):
        _client(httpserver).pull_files(3)


def test_the_budget_counts_retries_too(httpserver):
    httpserver.expect_request(f"/repos/{REPO}/issues/5").respond_with_response(
        Response(json.dumps({"message": "boom"}), 502)
    )
    client = _client(httpserver, budget=3)
    with pytest.raises(GitHubError, match="budget of 3 GitHub requests is spent"):
        client.issue_body(5)
    assert client.sent == 3 and len(httpserver.log) == 3


def test_search_keeps_pull_requests_only(httpserver):
    items = [{"number": 1, "pull_request": {}}, {"number": 2}]  # 2 is an issue
    httpserver.expect_request("/search/issues").respond_with_json({"items": items})
    assert [i.number for i in _client(httpserver).search_pulls("is:open")] == [1]
    ((request, _),) = httpserver.log
    assert request.args["q"] == f"repo:{REPO} is:pr is:open"


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        ({"body": None}, ""),
        ({"body": 5}, f"GET /repos/{REPO}/issues/6: expected `body` to be a string, got a number"),
        ([], f"GET /repos/{REPO}/issues/6: expected `body` to be a string, but it is missing"),
    ],
)
def test_an_issue_body_is_text_or_null_else_an_error_naming_the_field(httpserver, answer, says):
    httpserver.expect_request(f"/repos/{REPO}/issues/6").respond_with_json(answer)
    if not says:
        assert _client(httpserver).issue_body(6) == ""
        return
    with pytest.raises(GitHubError) as raised:
        _client(httpserver).issue_body(6)
    assert str(raised.value) == says


def test_a_search_result_needs_an_integer_number_and_may_leave_the_rest_out(httpserver):
    items = [{"pull_request": {}, "number": 3, "user": None, "title": None}]
    httpserver.expect_request("/search/issues").respond_with_json({"items": items})
    (found,) = _client(httpserver).search_pulls("x")
    assert (found.number, found.title, found.author, found.updated_at) == (3, "", "", "")
    httpserver.clear()
    items = [{"pull_request": {}, "number": True}]
    httpserver.expect_request("/search/issues").respond_with_json({"items": items})
    with pytest.raises(GitHubError, match=r"^GET /search/issues: a result without an integer"):
        _client(httpserver).search_pulls("y")
