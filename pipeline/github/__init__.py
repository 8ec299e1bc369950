"""A small GitHub REST client: one PR comment kept up to date in place, commit statuses, and
the tracker's reads (a search, each PR's files, an issue body) as conditional requests.

The token lives only inside the session's auth hook: it is never part of a URL, an exception
message, a log record or a repr, and it is never sent to a host other than ``api_url``'s.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import time
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any
from urllib.parse import quote, urljoin, urlsplit

import requests

from pipeline.errors import GitHubError
from pipeline.github.answers import (
    Cached,
    ChangedFile,
    Comment,
    FoundPull,
    IssueAnswer,
    PullAnswer,
    StatusAnswer,
    _Answer,
    _answer,
    _backoff,
    _changed_file,
    _comment,
    _errors,
    _found_pull,
    _json,
    _kind,
    _message,
    _next_link,
    _normalise,
    _page_key,
    _read_body,
    _retry_after,
    _TooSlow,
    _what,
    read_answer,
)
from pipeline.results.pr import STATUS_DESCRIPTION_MAX

log = logging.getLogger(__name__)

API_VERSION = "2022-11-28"
STATUS_STATES = ("error", "failure", "pending", "success")
MARKER_RE = re.compile(r"<!-- mps-pipeline:[^\s>][^>]*? -->")
# what pr-report posts with; a client for other work says what it needs instead
PR_PERMISSIONS = "pull-requests: write and statuses: write"
# A primary rate limit that resets further away than this is reported, not waited out.
MAX_WAIT_SECONDS = 900.0
# Redirects are followed only within github.api_url's origin (a renamed repository's 301)
REDIRECTS = frozenset({301, 302, 303, 307, 308})
MAX_REDIRECTS = 5
# GitHub's advice for a secondary rate limit that came without Retry-After: wait a minute.
SECONDARY_LIMIT_WAIT = 60.0
# Comments per page: GitHub's maximum.
PER_PAGE = 100
# Pages of comments read at most: 10,000 comments, far more than any PR GitHub's web view
# still shows, while a bug or a proxy that keeps sending a next link (one that varies, so
# the repeated-page check does not catch it) costs 100 requests, not an endless loop.
MAX_PAGES = 100
TOKEN_CHARS = re.compile(r"[\x21-\x7e]+")


class Written(str, Enum):
    """What keeping one text on GitHub did: the PR's comment (:meth:`GitHubClient.upsert_comment`)
    or the tracker issue's section (pipeline.flows.tracker)."""

    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    DRY_RUN = "dry-run"  # shown, not written: GitHub was left as it was

    def __str__(self) -> str:
        return self.value


class _BearerAuth(requests.auth.AuthBase):
    """Adds the token at send time; requests drops it on a redirect to another host."""

    def __init__(self, token: str) -> None:
        self._token = token

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = f"Bearer {self._token}"
        return request

    def __repr__(self) -> str:
        return "_BearerAuth(<redacted>)"


class _Ambiguous(Exception):
    """A non-idempotent request failed in a way that may or may not have applied it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def token_from_env(var: str, needs: str, env: Mapping[str, str] = os.environ) -> str:
    """Return the GitHub token held in environment variable ``var``.

    Raises GitHubError (naming the variable, never a value) when it is unset or blank;
    ``needs`` is the command's own word on what it does with the token and which
    permissions that takes, so the message suggests nothing the command does not have.
    """
    value = (env.get(var) or "").strip()
    if not value:
        raise GitHubError(
            f"${var} is not set (github.token_env names the variable): {needs}. Export the "
            f"token in ${var} (in a workflow: `env: {var}: ${{{{ secrets.GITHUB_TOKEN }}}}` on "
            "the step)"
        )
    return value


class GitHubClient:
    """GitHub REST API for one repository, with retries on 5xx and rate limits.

    ``sleep`` is injectable so tests record waits instead of waiting.
    """

    def __init__(
        self,
        api_url: str,
        repo: str,
        token: str,
        *,
        max_retries: int = 5,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        timeout: float = 30.0,
        deadline: float = 90.0,
        settle: float = 2.0,
        token_env: str = "GITHUB_TOKEN",
        permissions: str = PR_PERMISSIONS,
        budget: int | None = None,
        etags: dict[str, Cached] | None = None,
    ) -> None:
        parts = urlsplit(api_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise GitHubError(f"github.api_url {api_url!r} is not an http(s) URL")
        if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", repo):
            raise GitHubError(f"github.repo {repo!r} must be 'owner/name'")
        token = (token or "").strip()
        if not token:
            raise GitHubError(f"token missing or invalid: set ${token_env}")
        # requests would quote an invalid header value, token included, in its exception.
        if not TOKEN_CHARS.fullmatch(token):
            raise GitHubError(
                f"token missing or invalid: ${token_env} contains whitespace or control "
                "characters; set it to the bare token"
            )
        self.api_url = api_url.rstrip("/")
        self.repo = repo
        self.max_retries = max_retries
        self._origin = (parts.scheme, parts.netloc)
        self._sleep = sleep
        self._clock = clock
        self._timeout = timeout  # per read (requests' own)
        self._deadline = deadline  # per request, all reads together: a drip never hangs
        self._settle = settle  # before the list that finds a concurrent job's comment
        self._token = token
        self._token_env = token_env
        self._permissions = permissions  # what a 403 says the token needs
        # requests sent (retries included) and how many were 304s; ``budget`` caps the first
        self.budget = budget
        self.sent = 0
        self.not_modified = 0
        # url -> what a 304 stands for; the caller keeps it
        self.etags: dict[str, Cached] = {} if etags is None else etags
        self._session = requests.Session()
        self._session.auth = _BearerAuth(token)
        self._session.headers.update(
            {
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": API_VERSION,
                "User-Agent": "mps-pipeline",
            }
        )

    def __repr__(self) -> str:
        return f"GitHubClient(api_url={self.api_url!r}, repo={self.repo!r})"

    # -- public API ----------------------------------------------------------------------

    def list_comments(self, pr: int) -> tuple[Comment, ...]:
        """All comments of PR ``pr`` (oldest first), following Link rel="next" pages.

        At most ``MAX_PAGES`` pages; a next link to a page already fetched (a loop) or to
        another origin is a GitHubError, as is a PR with more pages than that.
        """
        first = self._url(f"/repos/{self.repo}/issues/{int(pr)}/comments")
        what = _what("GET", first)
        # the next links carry the query string: the first URL carries it the same way
        url: str | None = f"{first}?per_page={PER_PAGE}"
        seen: set[str] = set()
        comments: list[Comment] = []
        while url:
            if len(seen) >= MAX_PAGES:
                raise GitHubError(
                    f"{what}: more than {MAX_PAGES} pages of comments ({len(comments)} read); "
                    "stopped there rather than post a second comment it may not have seen"
                )
            seen.add(_page_key(url))
            response = self._request("GET", url)
            items = _json(response, what)
            if not isinstance(items, list):
                raise GitHubError(f"{what}: expected a list of comments, got {_kind(items)}")
            comments.extend(_comment(item, what, f"comment [{i}]") for i, item in enumerate(items))
            url = _next_link(response)
            if url:
                url = urljoin(first, url)
                self._check_same_origin(url, what)
                if _page_key(url) in seen:
                    raise GitHubError(
                        f"{what}: GitHub's next-page link leads back to a page already read "
                        f"(page {len(seen) + 1} would repeat one); stopped instead of looping"
                    )
        return tuple(comments)

    def create_comment(self, pr: int, body: str) -> Comment:
        """Post a new comment on PR ``pr``.

        Not retried after a 5xx or a lost connection (GitHub may have created it anyway);
        ``upsert_comment`` recovers from that by looking for the marker first.
        """
        try:
            return self._create(pr, body)
        except _Ambiguous as exc:
            raise GitHubError(
                self._redact(
                    f"creating a comment on PR #{pr} failed ({exc.reason}); it may or may not "
                    "have been posted"
                )
            ) from None

    def update_comment(self, comment_id: int, body: str) -> Comment:
        """Replace the body of comment ``comment_id``."""
        url = self._url(f"/repos/{self.repo}/issues/comments/{int(comment_id)}")
        response = self._request("PATCH", url, json={"body": body})
        what = _what("PATCH", url)
        return _comment(_json(response, what), what)

    def delete_comment(self, comment_id: int) -> bool:
        """Delete comment ``comment_id``; False when it was gone already (404)."""
        url = self._url(f"/repos/{self.repo}/issues/comments/{int(comment_id)}")
        try:
            self._request("DELETE", url)
        except GitHubError as exc:
            if getattr(exc, "status", None) == 404:
                return False
            raise
        return True

    def upsert_comment(
        self, pr: int, body: str, marker: str, *, author: str
    ) -> tuple[int, Written]:
        """Keep exactly one pipeline comment on PR ``pr``, identified by ``marker``.

        Only comments by ``author`` (the login the token posts as, e.g. github-actions[bot])
        count: anyone can paste the marker into a comment of their own, and the bot must
        not rewrite it. Returns the comment's id and what was done to it (created, updated or
        unchanged).

        Two jobs posting at once both find no comment and both create one. So after
        creating, the comments are listed again; of the bot's marked comments the oldest
        (lowest id) is kept, given this body if it is another job's, and the others are
        deleted. Whichever job lists last sees both comments, so one always remains; which
        job's body that is is not defined (the workflow's concurrency group keeps posting
        jobs of one PR apart). Extra marked comments of the bot found before posting (a job
        stopped between its create and its clean-up, older versions) go the same way.

        Deleted, not minimized ("hidden as outdated"): minimizing is GraphQL only, while
        deleting is one REST call with the permission posting already needs, and a
        duplicate of the kept comment leaves nothing worth reading behind.
        """
        if not MARKER_RE.fullmatch(marker):
            raise GitHubError(
                f"comment marker {marker!r} must look like <!-- mps-pipeline:NAME -->"
            )
        author = author.strip()
        if not author:
            raise GitHubError(
                "github.bot_login is empty: set it to the login the token posts as "
                "(github-actions[bot] for a workflow's GITHUB_TOKEN)"
            )
        if marker not in body:
            body = f"{marker}\n{body}"

        def ours() -> list[Comment]:
            return [
                c
                for c in self.list_comments(pr)
                # logins are case-insensitive on GitHub
                if marker in c.body and c.user.casefold() == author.casefold()
            ]

        posted_maybe = False
        for attempt in range(self.max_retries + 1):
            existing = ours()
            if existing:
                kept, outcome = self._converge(existing, body)
                # found after an ambiguous POST: that POST did create it
                return kept, Written.CREATED if posted_maybe else outcome
            try:
                created = self._create(pr, body)
            except _Ambiguous as exc:
                # Look again before re-posting: the failed POST may have landed.
                posted_maybe = True
                delay = _backoff(attempt)
                log.warning(
                    "creating the PR comment failed (%s); checking again in %.0fs", exc, delay
                )
                self._sleep(delay)
                continue
            # Another job may have created one meanwhile: look again, keep one. GitHub's
            # lists lag behind its writes (eventually consistent): give them time first.
            self._sleep(self._settle)
            mine = ours()
            if all(c.id != created.id for c in mine):
                mine.append(created)  # a list that lags behind the POST
            kept, outcome = self._converge(mine, body)
            return kept, Written.CREATED if kept == created.id else outcome
        raise GitHubError(
            f"could not create the comment on PR #{pr} after {self.max_retries + 1} attempts"
        )

    def _converge(self, comments: list[Comment], body: str) -> tuple[int, Written]:
        """Keep the oldest of ``comments`` with ``body``, delete the others; the kept id and
        "updated" or "unchanged". Updates before deleting, and a delete that fails is a
        warning: the worst case is an extra comment (the next run removes it), never none."""
        kept, outcome = min(comments, key=lambda c: c.id), Written.UNCHANGED
        if _normalise(kept.body) != _normalise(body):
            kept, outcome = self.update_comment(kept.id, body), Written.UPDATED
        for extra in (c.id for c in comments if c.id != kept.id):
            try:
                self.delete_comment(extra)
            except GitHubError as exc:
                # the comment is up to date; a duplicate left is for the next run to remove
                log.warning("could not delete duplicate comment %d: %s", extra, exc)
            else:
                log.info("deleted comment %d, a duplicate of comment %d", extra, kept.id)
        return kept.id, outcome

    def pull_head_sha(self, pr: int) -> str:
        """The commit PR ``pr`` currently points at (where its commit status belongs)."""
        url = self._url(f"/repos/{self.repo}/pulls/{int(pr)}")
        what = _what("GET", url)
        pull = _answer(_json(self._request("GET", url), what), what, "a pull request object")
        return read_answer(PullAnswer, pull).head.sha

    def set_status(
        self,
        sha: str,
        state: str,
        description: str,
        context: str,
        target_url: str | None = None,
    ) -> int:
        """Set commit status ``context`` on ``sha``; returns the status id.

        ``description`` is cut to GitHub's 140 characters.
        """
        if state not in STATUS_STATES:
            raise GitHubError(f"commit status state {state!r} must be one of {STATUS_STATES}")
        if not re.fullmatch(r"[0-9a-fA-F]{7,64}", sha):
            raise GitHubError(f"commit sha {sha!r} is not a hex commit id")
        description = " ".join(description.split())
        if len(description) > STATUS_DESCRIPTION_MAX:
            description = description[: STATUS_DESCRIPTION_MAX - 1] + "…"
        payload = {"state": state, "description": description, "context": context,
                   **({"target_url": target_url} if target_url else {})}  # fmt: skip
        url = self._url(f"/repos/{self.repo}/statuses/{sha}")
        what = _what("POST", url)
        status = _json(self._request("POST", url, json=payload), what)
        answer = _answer(status, what, "a commit status object", "the commit status")
        return read_answer(StatusAnswer, answer).id

    def get_conditional(self, url: str) -> tuple[Any, str | None]:
        """GET ``url`` (a path or a URL of this origin) with the ETag last seen for it: a
        304, which GitHub does not count against the rate limit, answers from ``etags``.
        Returns the JSON and the next page's URL (Link rel="next"), if any."""
        url = url if "://" in url else self._url(url)
        what = _what("GET", url)
        cached = self.etags.get(url)
        headers = {"If-None-Match": cached.etag} if cached else None
        response = self._request("GET", url, headers=headers)
        if response.status_code == 304 and cached:
            self.not_modified += 1
            return cached.data, cached.next
        data = _json(response, what)
        nxt = _next_link(response)
        if nxt:
            nxt = urljoin(url, nxt)
            self._check_same_origin(nxt, what)
        if etag := response.headers.get("ETag"):
            self.etags[url] = Cached(etag, data, nxt)
        return data, nxt

    def get_pages(self, path: str, key: str | None = None) -> list[Any]:
        """Every item of a paged list (``key``: the field holding it, as search's ``items``),
        each page a conditional GET; at most ``MAX_PAGES`` pages, never a page twice."""
        url: str | None = self._url(path)
        what = _what("GET", self._url(path.partition("?")[0]))
        seen: set[str] = set()
        items: list[Any] = []
        while url:
            if len(seen) >= MAX_PAGES or _page_key(url) in seen:
                raise GitHubError(f"{what}: pagination does not end; stopped after {len(seen)}")
            seen.add(_page_key(url))
            data, url = self.get_conditional(url)
            page = data.get(key) if key and isinstance(data, dict) else data
            if not isinstance(page, list):
                raise GitHubError(f"{what}: expected a list{f' in `{key}`' if key else ''}, "
                                  f"got {_kind(page)}")  # fmt: skip
            items.extend(page)
        return items

    def search_pulls(self, query: str) -> list[FoundPull]:
        """Issues search for ``query`` within the repository, PRs only (GitHub caps a search
        at 1,000 results)."""
        q = quote(f"repo:{self.repo} is:pr {query}".strip())
        items = self.get_pages(f"/search/issues?q={q}&per_page={PER_PAGE}", "items")
        return [
            _found_pull(i, "GET /search/issues")
            for i in items
            if isinstance(i, dict) and "pull_request" in i
        ]

    def pull_files(self, pr: int) -> list[ChangedFile]:
        """The files PR ``pr`` changes (name and patch), every page."""
        path = f"/repos/{self.repo}/pulls/{int(pr)}/files?per_page={PER_PAGE}"
        return [_changed_file(f) for f in self.get_pages(path) if isinstance(f, dict)]

    def issue_body(self, issue: int) -> str:
        """The body of issue ``issue`` (conditional GET: unchanged costs nothing)."""
        url = f"/repos/{self.repo}/issues/{int(issue)}"
        data, _ = self.get_conditional(url)
        # an answer that is no object has no body: "expected `body` ..., but it is missing"
        answer = _Answer(dict(data) if isinstance(data, dict) else {}, f"GET {url}")
        return read_answer(IssueAnswer, answer).body or ""

    def update_issue_body(self, issue: int, body: str) -> None:
        """Replace the body of issue ``issue`` (needs issues: write)."""
        url = self._url(f"/repos/{self.repo}/issues/{int(issue)}")
        self._request("PATCH", url, json={"body": body})
        self.etags.pop(url, None)  # its ETag changed with it

    # -- transport -----------------------------------------------------------------------

    def _create(self, pr: int, body: str) -> Comment:
        url = self._url(f"/repos/{self.repo}/issues/{int(pr)}/comments")
        response = self._request("POST", url, json={"body": body}, idempotent=False)
        what = _what("POST", url)
        return _comment(_json(response, what), what)

    def _url(self, path: str) -> str:
        return f"{self.api_url}{path}"

    def _foreign_origin(self, url: str) -> str | None:
        """``scheme://host`` of ``url`` when it is not github.api_url's, else None."""
        parts = urlsplit(url)
        if (parts.scheme, parts.netloc) == self._origin:
            return None
        return f"{parts.scheme}://{parts.netloc}"

    def _check_same_origin(self, url: str, what: str) -> None:
        if (foreign := self._foreign_origin(url)) is not None:
            raise GitHubError(
                self._redact(
                    f"{what}: GitHub returned a pagination link to another origin "
                    f"({foreign}); refusing to send the token there"
                )
            )

    def _redact(self, text: str) -> str:
        return text.replace(self._token, "***") if self._token else text

    def _request(
        self,
        method: str,
        url: str,
        *,
        json: Any = None,
        idempotent: bool = True,
        headers: Mapping[str, str] | None = None,
    ) -> requests.Response:
        """Send one API request, retrying what is safe to retry; raise GitHubError otherwise."""
        what = _what(method, url)
        for attempt in itertools.count():
            last = attempt >= self.max_retries
            if self.budget is not None and self.sent >= self.budget:
                raise GitHubError(
                    f"{what}: the run's budget of {self.budget} GitHub requests is spent; "
                    "nothing was written (raise tracker.max_requests or run again later)"
                )
            self.sent += 1
            try:
                response = self._send(method, url, json, what, headers)
            except _TooSlow as exc:
                if not idempotent:
                    raise _Ambiguous(str(exc)) from None
                raise GitHubError(f"{what}: {exc}; try again later") from None
            except requests.RequestException as exc:
                # Only the exception's class: its text can quote the request.
                reason = f"{type(exc).__name__} talking to {self._origin[1]}"
                if not idempotent:
                    raise _Ambiguous(reason) from None
                if last:
                    raise GitHubError(
                        f"{what}: {reason} after {attempt + 1} attempts; check the network "
                        "and github.api_url"
                    ) from None
                delay = _backoff(attempt)
                log.warning("%s: %s; retrying in %.0fs", what, reason, delay)
                self._sleep(delay)
                continue
            status = response.status_code
            log.debug("%s -> %d", what, status)
            if status < 400:
                return response
            wait = self._rate_limit_wait(response, attempt)
            if wait is not None:
                if last or wait > MAX_WAIT_SECONDS:
                    raise self._error(response, what, "rate limited by GitHub; try again later")
                log.warning(
                    "%s: GitHub rate limit (%d); waiting %.0fs (retry %d of %d)",
                    what,
                    status,
                    wait,
                    attempt + 1,
                    self.max_retries,
                )
                self._sleep(wait)
                continue
            if status >= 500:
                if not idempotent:
                    raise _Ambiguous(f"HTTP {status}")
                if last:
                    raise self._error(response, what, f"GitHub kept failing ({attempt + 1} tries)")
                delay = _retry_after(response, self._clock) or _backoff(attempt)
                log.warning(
                    "%s: GitHub answered %d; retrying in %.0fs (retry %d of %d)",
                    what,
                    status,
                    delay,
                    attempt + 1,
                    self.max_retries,
                )
                self._sleep(delay)
                continue
            raise self._error(response, what)
        raise AssertionError("itertools.count() never ends")  # each attempt returns or raises

    def _send(
        self,
        method: str,
        url: str,
        json: Any,
        what: str,
        headers: Mapping[str, str] | None = None,
    ) -> requests.Response:
        """One request, its redirects followed only within the API's origin, its body read
        within the total deadline (requests' timeout is per read: a byte a second never
        trips it)."""
        deadline = time.monotonic() + self._deadline
        for _hop in range(MAX_REDIRECTS + 1):
            response = self._session.request(
                method, url, json=json, timeout=self._timeout,
                allow_redirects=False, stream=True, headers=headers,
            )  # fmt: skip
            location = response.headers.get("Location")
            if response.status_code not in REDIRECTS or not location:
                _read_body(response, deadline, self._deadline)
                return response
            response.close()
            target = urljoin(url, location)
            if (foreign := self._foreign_origin(target)) is not None:
                raise GitHubError(
                    self._redact(
                        f"{what}: GitHub answered {response.status_code}, a redirect to another "
                        f"origin ({foreign}); refusing to follow it off "
                        f"github.api_url ({self._origin[0]}://{self._origin[1]})"
                    )
                )
            if response.status_code in (301, 302, 303) and method != "GET":
                raise GitHubError(f"{what}: GitHub answered {response.status_code} to a {method}")
            url = target  # the Location carries the query
        raise GitHubError(f"{what}: more than {MAX_REDIRECTS} redirects")

    def _rate_limit_wait(self, response: requests.Response, attempt: int) -> float | None:
        """Seconds to wait if ``response`` is a (secondary) rate limit, else None."""
        if response.status_code not in (403, 429):
            return None
        retry_after = _retry_after(response, self._clock)
        if retry_after is not None:
            return retry_after
        remaining = response.headers.get("x-ratelimit-remaining")
        if remaining == "0" and (reset_at := response.headers.get("x-ratelimit-reset")):
            try:
                reset = float(reset_at)
            except ValueError:
                return SECONDARY_LIMIT_WAIT
            return max(reset - self._clock(), 1.0)
        if response.status_code == 429 or "rate limit" in _message(response).lower():
            return SECONDARY_LIMIT_WAIT * (2**attempt)
        return None

    def _error(self, response: requests.Response, what: str, prefix: str = "") -> GitHubError:
        status = response.status_code
        said = _message(response)
        details = _errors(response)
        request_id = response.headers.get("x-github-request-id")
        if prefix:
            head = prefix
        elif status == 401:
            head = f"token missing or invalid: set ${self._token_env}"
        elif status == 403:
            head = (
                f"permission denied: the token needs {self._permissions} on {self.repo} "
                "(a workflow job sets them under `permissions:`; a PR from a fork only "
                "gets a read-only token)"
            )
        elif status == 404:
            head = (
                f"not found: check github.repo ({self.repo!r}) and the PR number or commit; "
                "a token that cannot see a private repository also gets 404"
            )
        elif status == 422:
            head = "GitHub rejected the request"
        else:
            head = f"GitHub answered {status}"
        text = f"{what} -> {status}: {head}"
        if said:
            text += f". GitHub said: {said}"
        if details:
            text += f" ({details})"
        if request_id:
            text += f" [request id {request_id}]"
        error = GitHubError(self._redact(text))
        error.status = status
        return error
