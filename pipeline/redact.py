"""The secret parts of a connection URL, hidden before it is shown anywhere.

A history server's URL (``postgresql://user:password@host/db?sslpassword=...``) comes from
the config or ``$MPS_PIPELINE_HISTORY_URL`` and is a secret as a whole only in parts: the
host and database are what a log should name, the password and any token-like query
parameter are what it must never hold. Every message, ``config`` listing and repr of a
location goes through :func:`redact`; a driver's own error text goes through :func:`scrub`
as well, in case it quotes the URL back.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, unquote, urlsplit

HIDDEN = "***"
# query parameters that carry a credential (libpq's password, sslpassword, and the usual
# token spellings of proxies and poolers)
_SECRET_PARAMS = re.compile(r"pass|token|secret|key|auth|credential", re.IGNORECASE)
_USERINFO = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:@/]*):(?P<pw>[^@/]*)@",
                       re.IGNORECASE)  # fmt: skip
_PARAM = re.compile(r"(?P<name>[A-Za-z_]+)=(?P<value>[^&\s]*)")


def redact(url: str) -> str:
    """``url`` with its password and credential-like query parameters replaced by ***."""
    out = _USERINFO.sub(rf"\g<scheme>\g<user>:{HIDDEN}@", url)
    head, sep, query = out.partition("?")
    if not sep:
        return out
    return f"{head}?{_PARAM.sub(_hide_secret_param, query)}"


def _hide_secret_param(param: re.Match[str]) -> str:
    name = param[1]
    return f"{name}={HIDDEN}" if _SECRET_PARAMS.search(name) else param[0]


def secrets_of(url: str) -> tuple[str, ...]:
    """The secret strings of ``url`` (its password, credential-like parameters' values),
    as written and decoded: what :func:`scrub` removes from any text."""
    found: list[str] = []
    try:
        parts = urlsplit(url)
        password = parts.password
        query = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:  # not a URL at all: nothing in it can be told apart
        return (url,) if url else ()
    if password:
        found += [password, unquote(password)]
    match = _USERINFO.match(url)
    if match and (written := match[3]):
        found.append(written)
    found += [value for name, value in query if value and _SECRET_PARAMS.search(name)]
    return tuple(sorted({s for s in found if s}, key=len, reverse=True))


def scrub(text: str, url: str) -> str:
    """``text`` (say, a driver's error message) without any secret of ``url`` in it."""
    text = redact(text)
    for secret in secrets_of(url):
        text = text.replace(secret, HIDDEN)
    return text
