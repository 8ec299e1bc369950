"""GitHub's answers read with care: a body within a deadline and a size, JSON checked field
by field (a :class:`Comment`), the waits GitHub asks for, and its error messages in one line.

Used by the client (:mod:`pipeline.github`): an answer is data from the network, and a proxy
or a bug on either side must give a :class:`~pipeline.errors.GitHubError` that says what was
wrong, never a traceback.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import requests
import urllib3

from pipeline.errors import GitHubError
from pipeline.fields import Fields

MAX_BODY = 50 * 1024 * 1024  # bytes of one answer: a comment list page is a few hundred KB

# A field absent from a response (unlike one that is null)
_MISSING: Any = object()


@dataclass(frozen=True)
class Comment:
    """An issue/PR comment, as much of it as the pipeline needs."""

    id: int
    body: str
    user: str


@dataclass(frozen=True)
class FoundPull:
    """A pull request an issues search found, as much of it as the tracker needs."""

    number: int
    title: str
    author: str  # "" when GitHub names no user
    updated_at: str  # "" when GitHub gives none: never taken as unchanged


@dataclass(frozen=True)
class ChangedFile:
    """One file a pull request changes: its name and its patch ("" for a binary or a
    patch too large for GitHub to show)."""

    filename: str
    patch: str


@dataclass(frozen=True)
class Cached:
    """What a 304 for one URL stands for: the answer read with ``etag``, and its next page."""

    etag: str
    data: Any  # the JSON as GitHub sent it
    next: str | None

    @classmethod
    def read(cls, fields: Fields) -> Cached:
        """One entry of a saved cache, checked (:class:`~pipeline.fields.Fields`)."""
        cached = cls(fields.pop("etag", str), fields.pop("data", dict, list),
                     fields.pop("next", str, type(None)))  # fmt: skip
        fields.done()
        return cached

    def as_json(self) -> dict[str, object]:
        return {"etag": self.etag, "data": self.data, "next": self.next}


class _TooSlow(Exception):
    """A response not read in full within the request's total deadline."""


def _read_body(response: requests.Response, deadline: float, total: float) -> None:
    """Read ``response``'s body (streamed) into it, in what each read returns, until
    ``deadline`` (monotonic); :class:`_TooSlow` past it or past :data:`MAX_BODY` bytes."""
    chunks: list[bytes] = []
    size = 0
    try:
        while True:
            if time.monotonic() > deadline:
                raise _TooSlow(f"GitHub's answer took more than {total:g} s (the deadline)")
            chunk = response.raw.read1(65536, decode_content=True)
            if not chunk:
                break
            size += len(chunk)
            if size > MAX_BODY:
                raise _TooSlow(f"GitHub's answer is larger than {MAX_BODY} bytes")
            chunks.append(chunk)
    except urllib3.exceptions.HTTPError as exc:  # a read timeout, a connection cut
        response.close()
        raise requests.ConnectionError(type(exc).__name__) from None
    except BaseException:
        response.close()
        raise
    response._content = b"".join(chunks)  # what response.json() and .text read
    response._content_consumed = True  # type: ignore[attr-defined]
    response.close()


def _backoff(attempt: int) -> float:
    return float(min(2**attempt, 60))


def _retry_after(response: requests.Response, clock: Callable[[], float]) -> float | None:
    value = response.headers.get("retry-after")
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - clock(), 0.0)


def _page_key(url: str) -> str:
    """A page's URL with its query parameters in order: the same page, however spelled."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    query.setdefault("page", "1")  # no page parameter is page 1
    return f"{parts.scheme}://{parts.netloc.lower()}{parts.path}?{sorted(query.items())}"


def _what(method: str, url: str) -> str:
    """How errors name an endpoint: method and path (no host, no query, never the token)."""
    return f"{method} {urlsplit(url).path}"


def _json(response: requests.Response, what: str) -> Any:
    try:
        return response.json()
    except ValueError:
        raise GitHubError(
            f"{what}: GitHub answered {response.status_code} with a body that is not JSON; "
            "check github.api_url"
        ) from None


def _got(value: Any) -> str:
    """What arrived instead, for an error message: "got a string", "but it is missing"."""
    return "but it is missing" if value is _MISSING else f"got {_kind(value)}"


def _kind(value: Any) -> str:
    """The JSON type of ``value``, as an error message says it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _integer(value: Any, what: str, where: str) -> int:
    # JSON true is a Python bool, and bool is an int: refuse it explicitly
    if not isinstance(value, int) or isinstance(value, bool):
        raise GitHubError(f"{what}: expected `id` of {where} to be an integer, {_got(value)}")
    return value


def _body(response: requests.Response) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _message(response: requests.Response) -> str:
    message = _body(response).get("message")
    return str(message) if message else ""


def _errors(response: requests.Response) -> str:
    """GitHub's ``errors`` list (422 validation failures) as one line."""
    items = _body(response).get("errors") or []
    out = []
    for item in items if isinstance(items, list) else [items]:
        if isinstance(item, dict):
            text = item.get("message") or " ".join(
                f"{k}={item[k]}" for k in ("resource", "field", "code") if item.get(k)
            )
            out.append(str(text))
        else:
            out.append(str(item))
    return "; ".join(out)


def _comment(item: Any, what: str, where: str = "the comment") -> Comment:
    """A comment object as GitHub documents it, checked: whatever else arrives is a
    GitHubError naming the endpoint (``what``) and the comment (``where``)."""
    if not isinstance(item, dict):
        raise GitHubError(f"{what}: expected {where} to be an object, got {_kind(item)}")
    comment_id = _integer(item.get("id", _MISSING), what, where)
    body = item.get("body", _MISSING)
    if not isinstance(body, str):
        raise GitHubError(f"{what}: expected `body` of {where} to be a string, {_got(body)}")
    user = item.get("user", _MISSING)
    # GitHub's schema allows a null user (nullable-simple-user): a comment nobody owns,
    # never the bot's. Anything else must carry a login.
    if user is None:
        login = ""
    elif not isinstance(user, dict):
        raise GitHubError(f"{what}: expected `user` of {where} to be an object, {_got(user)}")
    elif not isinstance(login := user.get("login", _MISSING), str):
        raise GitHubError(f"{what}: expected `user.login` of {where} to be a string, {_got(login)}")
    return Comment(id=comment_id, body=body, user=login)


def _normalise(body: str) -> str:
    # GitHub stores what the web editor sends, which may use CRLF line endings.
    return body.replace("\r\n", "\n").strip()


def _found_pull(item: dict[str, object], what: str) -> FoundPull:
    number = item.get("number")
    if not isinstance(number, int) or isinstance(number, bool):
        raise GitHubError(f"{what}: a result without an integer `number`")
    user = item.get("user")
    return FoundPull(
        number=number,
        title=str(item.get("title") or ""),
        author=str(user.get("login", "")) if isinstance(user, dict) else "",
        updated_at=str(item.get("updated_at") or ""),
    )


def _changed_file(item: dict[str, object]) -> ChangedFile:
    return ChangedFile(str(item.get("filename", "")), str(item.get("patch") or ""))
