"""A stateful GitHub for the tracker, served by pytest-httpserver on 127.0.0.1.

It holds pull requests (open and closed, each with files and patches) and issues; it
answers the issues search (open PRs only, 100 a page, Link headers), a PR's files and an
issue with ETags, 304 when If-None-Match matches, and counts every request it saw.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from urllib.parse import parse_qs

from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

REPO = "octo/pytorch"
SEARCH = re.compile(r"^/search/issues$")
FILES = re.compile(rf"^/repos/{REPO}/pulls/(\d+)/files$")
ISSUE = re.compile(rf"^/repos/{REPO}/issues/(\d+)$")


@dataclass
class Pull:
    number: int
    title: str
    author: str
    files: list[dict]
    state: str = "open"
    updated_at: str = "2026-11-30T12:00:00Z"


@dataclass
class FakeTrackerGitHub:
    server: HTTPServer
    pulls: dict[int, Pull] = field(default_factory=dict)
    issues: dict[int, str] = field(default_factory=dict)
    calls: list[tuple[str, str, int]] = field(default_factory=list)
    page_size: int = 100
    # answers to give before the real one: (status, headers) per request, first first
    faults: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    lock: threading.RLock = field(default_factory=threading.RLock)

    def install(self) -> FakeTrackerGitHub:
        expect = self.server.expect_request
        expect(SEARCH, method="GET").respond_with_handler(self._guard(self.search))
        expect(FILES, method="GET").respond_with_handler(self._guard(self.files))
        expect(ISSUE, method="GET").respond_with_handler(self._guard(self.issue))
        expect(ISSUE, method="PATCH").respond_with_handler(self._guard(self.patch))
        return self

    def add_pull(self, number: int, title: str, patches: dict[str, str], **kw) -> Pull:
        files = [{"filename": name, "status": "modified", "patch": patch}
                 for name, patch in patches.items()]  # fmt: skip
        pull = Pull(number, title, kw.pop("author", f"dev{number}"), files, **kw)
        self.pulls[number] = pull
        return pull

    def count(self, status: int | None = None) -> int:
        return sum(1 for _, _, s in self.calls if status is None or s == status)

    def _guard(self, handler):
        def wrapped(request: Request) -> Response:
            with self.lock:
                if self.faults:
                    status, headers = self.faults.pop(0)
                    body = {"message": "API rate limit exceeded for installation"}
                    response = Response(json.dumps(body), status, headers,
                                        content_type="application/json")  # fmt: skip
                else:
                    response = handler(request)
                self.calls.append((request.method, request.full_path, response.status_code))
                return response

        return wrapped

    def _answer(self, request: Request, data: object, headers: dict | None = None) -> Response:
        text = json.dumps(data, sort_keys=True)
        etag = '"' + hashlib.sha1(text.encode()).hexdigest() + '"'
        headers = dict(headers or {}, ETag=etag)
        if request.headers.get("If-None-Match") == etag:
            return Response("", 304, headers)
        return Response(text, 200, headers, content_type="application/json")

    def _page(self, request: Request, items: list) -> tuple[list, dict]:
        per_page = min(int(request.args.get("per_page", 30)), self.page_size)
        page = int(request.args.get("page", 1))
        chunk = items[(page - 1) * per_page : page * per_page]
        headers = {}
        if page * per_page < len(items):
            query = {k: v[0] for k, v in parse_qs(request.query_string.decode()).items()}
            query["page"] = str(page + 1)
            rest = "&".join(f"{k}={v}" for k, v in query.items())
            headers["Link"] = f'<{self.server.url_for(request.path)}?{rest}>; rel="next"'
        return chunk, headers

    def search(self, request: Request) -> Response:
        query = request.args.get("q", "")
        assert f"repo:{REPO}" in query and "is:pr" in query, query
        found = [
            {
                "number": p.number,
                "title": p.title,
                "user": {"login": p.author},
                "state": p.state,
                "updated_at": p.updated_at,
                "pull_request": {"url": f"/repos/{REPO}/pulls/{p.number}"},
            }
            for p in sorted(self.pulls.values(), key=lambda p: -p.number)
            if p.state == "open" or "is:open" not in query
        ]
        chunk, headers = self._page(request, found)
        return self._answer(request, {"total_count": len(found), "items": chunk}, headers)

    def files(self, request: Request) -> Response:
        pull = self.pulls[int(FILES.match(request.path).group(1))]
        chunk, headers = self._page(request, pull.files)
        return self._answer(request, chunk, headers)

    def issue(self, request: Request) -> Response:
        number = int(ISSUE.match(request.path).group(1))
        if number not in self.issues:
            return Response(json.dumps({"message": "Not Found"}), 404)
        return self._answer(request, {"number": number, "body": self.issues[number]})

    def patch(self, request: Request) -> Response:
        number = int(ISSUE.match(request.path).group(1))
        self.issues[number] = request.get_json()["body"]
        return Response(json.dumps({"number": number, "body": self.issues[number]}), 200,
                        content_type="application/json")  # fmt: skip
