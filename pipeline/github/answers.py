"""GitHub's answers read with care: a body within a deadline and a size, JSON checked field
by field (a :class:`Comment`), the waits GitHub asks for, and its error messages in one line.

Used by the client (:mod:`pipeline.github`): an answer is data from the network, and a proxy
or a bug on either side must give a :class:`~pipeline.errors.GitHubError` that says what was
wrong, never a traceback.
"""

from __future__ import annotations

import dataclasses
import email.utils
import functools
import time
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlsplit

import requests
import urllib3

from pipeline.errors import GitHubError

MAX_BODY = 50 * 1024 * 1024  # bytes of one answer: a comment list page is a few hundred KB

D = TypeVar("D")
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
    data: dict[str, object] | list  # the JSON as GitHub sent it (its items unchecked)
    next: str | None


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
    # no page parameter is page 1
    query = {"page": "1", **dict(parse_qsl(parts.query, keep_blank_values=True))}
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


_NULL = type(None)
# how a message names what was expected, by type (null is allowed, never asked for)
_WANTED = {int: "an integer", str: "a string", dict: "an object", list: "a list"}


class _Answer:
    """One JSON object of GitHub's answer to ``what`` (``where`` in it: "comment [0]"), each
    key read once: a value of another type is a GitHubError naming the endpoint and the
    field (``user.login`` of the object at ``path`` "user.")."""

    def __init__(self, data: dict[str, object], what: str, where: str = "", path: str = ""):
        self._data, self._what, self._where, self._path = data, what, where, path

    def pop(self, key: str, *kinds: type, problem: str = "") -> Any:
        """The value of ``key`` (absent: :data:`_MISSING`), one of ``kinds``; ``problem``:
        what an error says instead of the usual "expected ...", when given."""
        value = self._data.pop(key, _MISSING)
        # JSON true is a Python bool, and bool is an int: refuse it unless asked for
        if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
            want = " or ".join(_WANTED[k] for k in kinds if k is not _NULL)
            of = f" of {self._where}" if self._where else ""
            said = problem or f"expected `{self._path}{key}`{of} to be {want}, {_got(value)}"
            raise GitHubError(f"{self._what}: {said}")
        return value

    def text(self, key: str) -> str:
        """``key``'s value as text, "" when it is absent, null or empty (a field GitHub may
        leave out, which the caller does without)."""
        return str(self._data.pop(key, None) or "")

    def inner(self, key: str) -> _Answer | None:
        """The object at ``key``, None when it is anything else (one the caller does
        without)."""
        value = self._data.pop(key, None)
        return self.inside(key, value) if isinstance(value, dict) else None

    def inside(self, key: str, data: dict[str, object]) -> _Answer:
        """The object ``data`` found at ``key``, as an answer of its own."""
        return _Answer(dict(data), self._what, self._where, f"{self._path}{key}.")


def _answer(data: object, what: str, expected: str, where: str = "") -> _Answer:
    """``data`` as an :class:`_Answer`, when it is an object (``expected``: "a pull request
    object", what an error says it should have been)."""
    if not isinstance(data, dict):
        raise GitHubError(f"{what}: expected {expected}, got {_kind(data)}")
    return _Answer(dict(data), what, where)


def _next_link(response: requests.Response) -> str | None:
    """The URL of the next page (Link rel="next"), as given (maybe relative)."""
    link = response.links.get("next") or {}
    return link.get("url")


def _body(response: requests.Response) -> dict[str, object]:
    try:
        data = response.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _message(response: requests.Response) -> str:
    return _Answer(_body(response), "").text("message")


def _errors(response: requests.Response) -> str:
    """GitHub's ``errors`` list (422 validation failures) as one line."""
    items = _body(response).get("errors") or []
    out = []
    for item in items if isinstance(items, list) else [items]:
        if isinstance(item, dict):
            said = _Answer(dict(item), "")
            parts = ((k, said.text(k)) for k in ("resource", "field", "code"))
            out.append(said.text("message") or " ".join(f"{k}={v}" for k, v in parts if v))
        else:
            out.append(str(item))
    return "; ".join(out)


@dataclass(frozen=True)
class _User:
    login: str


@dataclass(frozen=True)
class _CommentAnswer:
    """A comment object as GitHub documents it, as much as the pipeline reads."""

    id: int
    body: str
    # GitHub's schema allows a null user (nullable-simple-user): a comment nobody owns,
    # never the bot's. Anything else must carry a login.
    user: _User | None


@dataclass(frozen=True)
class PullAnswer:
    """A pull request object: the commit it points at."""

    head: _Head


@dataclass(frozen=True)
class _Head:
    sha: str


@dataclass(frozen=True)
class StatusAnswer:
    """A commit status object: its id."""

    id: int


@dataclass(frozen=True)
class IssueAnswer:
    """An issue object: its body (null when empty)."""

    body: str | None


@functools.cache
def _shape(kind: type) -> tuple[tuple[str, tuple[type, ...], type | None], ...]:
    """Each field of the model ``kind``: its key, the JSON types it takes (a model as an
    object; ``X | None``: null allowed) and its model, if any."""
    hints = typing.get_type_hints(kind)
    found: list[tuple[str, tuple[type, ...], type | None]] = []
    for f in dataclasses.fields(kind):
        hint = hints[f.name]
        union = typing.get_origin(hint) in (typing.Union, types.UnionType)
        kinds = typing.get_args(hint) if union else (hint,)
        model = next(
            (k for k in kinds if isinstance(k, type) and dataclasses.is_dataclass(k)), None
        )
        found.append((f.name, tuple(dict if k is model else k for k in kinds), model))
    return tuple(found)


def read_answer(kind: type[D], answer: _Answer) -> D:
    """The model ``kind`` (a dataclass naming the keys the pipeline reads; GitHub sends
    more, which are let be) of one object of GitHub's answer, each field checked against
    its annotation: a value of another type is a GitHubError naming the endpoint and the
    field (``head.sha`` of ``where``)."""
    values = {}
    for name, kinds, model in _shape(typing.cast(type, kind)):
        value = answer.pop(name, *kinds)
        values[name] = (
            value
            if model is None or value is None
            else read_answer(model, answer.inside(name, value))
        )
    made: Any = kind
    return made(**values)


def _comment(item: Any, what: str, where: str = "the comment") -> Comment:
    """A comment object as GitHub documents it, checked: whatever else arrives is a
    GitHubError naming the endpoint (``what``) and the comment (``where``)."""
    found = read_answer(_CommentAnswer, _answer(item, what, f"{where} to be an object", where))
    return Comment(found.id, found.body, "" if found.user is None else found.user.login)


def _normalise(body: str) -> str:
    # GitHub stores what the web editor sends, which may use CRLF line endings.
    return body.replace("\r\n", "\n").strip()


def _found_pull(item: dict[str, object], what: str) -> FoundPull:
    answer = _Answer(dict(item), what)
    user = answer.inner("user")
    return FoundPull(
        number=answer.pop("number", int, problem="a result without an integer `number`"),
        title=answer.text("title"),
        author="" if user is None else user.text("login"),
        updated_at=answer.text("updated_at"),
    )


def _changed_file(item: dict[str, object]) -> ChangedFile:
    answer = _Answer(dict(item), "")
    return ChangedFile(answer.text("filename"), answer.text("patch"))
