"""The migration tracker that keeps itself: backlog, claims and duplicates in one issue section.

Requests are bounded: one issues search for the open MPS pull requests (a page per 100),
the files of each pull request that changed since the last run (its ``updated_at`` in the
search result says so; unchanged ones are answered from the cache), the issue, and one
PATCH only when the section changed. Every GET is conditional (ETag), so a night when
nothing changed costs a few 304s, which GitHub does not count against the rate limit; the
client stops at ``tracker.max_requests``. The cache (ETags, each pull request's words) is
written only after a run that succeeded.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.config import Settings
from pipeline.errors import DocumentError
from pipeline.fields import dump, read
from pipeline.github import Cached, GitHubClient, Written
from pipeline.guide.backlog import BacklogItem, backlog
from pipeline.guide.claims import Claim, PullRequest, claims, identifiers, patch_words
from pipeline.report.tracker import listed_operators, render_section, replace_section
from pipeline.state import tracker_cache, write_json
from pipeline.tree.index import TreeIndex, load_index

CACHE_VERSION = 1
# What the token needs, as a fine-grained token and a workflow's `permissions:` name it: the
# missing-token and permission-denied messages of each command say it.
CLAIMS_READ = "pull-requests: read"
TRACKER_READ = "issues: read and pull-requests: read"
TRACKER_WRITE = "issues: write and pull-requests: read"


@dataclass(frozen=True)
class Claims:
    """The backlog with its claims, and the pull requests they were read from."""

    claims: tuple[Claim, ...]
    prs: tuple[PullRequest, ...]
    requests: int  # GitHub requests sent (304s included)
    not_modified: int  # of them answered 304


@dataclass(frozen=True)
class TrackerRun:
    found: Claims
    section: str
    outcome: Written  # of the issue's section
    requests: int
    not_modified: int


@dataclass(frozen=True)
class KnownPull:
    """An open pull request as the last run read it: the files and words of its changes,
    which hold while its ``updated_at`` does."""

    updated_at: str
    files: tuple[str, ...]
    words: tuple[str, ...]


@dataclass
class Cache:
    """What a run keeps for the next: the ETags (with what a 304 stands for) and each open
    pull request's ``updated_at``, files and words, by its number."""

    etags: dict[str, Cached] = field(default_factory=dict)
    prs: dict[str, KnownPull] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> Cache:
        try:
            found = read(_CacheFile, json.loads(path.read_text(encoding="utf-8")), path.name)
        except (OSError, ValueError, DocumentError):
            return cls()  # none yet, or damaged: the run costs what a first run costs
        if found.version != CACHE_VERSION:
            return cls()  # another version's: start again
        return cls(found.etags or {}, found.prs or {})

    def save(self, path: Path) -> None:
        write_json(path, dump(_CacheFile(CACHE_VERSION, self.etags, self.prs)))


@dataclass(frozen=True)
class _CacheFile:
    """The cache as it is kept: a :class:`Cache` and the version of its shape."""

    version: int | None = None
    etags: dict[str, Cached] | None = None
    prs: dict[str, KnownPull] | None = None


def client_for(
    settings: Settings, token: str, cache: Cache, repo: str | None = None, **kw: Any
) -> GitHubClient:
    """A client for the tracker: the configured budget, the cache's ETags."""
    github = settings.github
    return GitHubClient(
        github.api_url,
        repo or github.repo,
        token,
        token_env=github.token_env,
        budget=settings.review.tracker_max_requests,
        etags=cache.etags,
        **kw,
    )


def _names(index: TreeIndex, items: Sequence[BacklogItem]) -> dict[str, frozenset[str]]:
    out = {}
    for item in items:
        record = index.record(item.op, find_references=False)
        out[item.op] = identifiers(
            item.op, [*record.old_names, *(f"{k}_functor" for k in record.kernel_names)]
        )
    return out


def open_prs(client: GitHubClient, query: str, cache: Cache) -> tuple[PullRequest, ...]:
    """The open pull requests the search finds, each with the words of its changes;
    ``cache.prs`` is replaced by theirs (closed ones drop out)."""
    fresh: dict[str, KnownPull] = {}
    prs = []
    for found in client.search_pulls(query):
        number, updated = found.number, found.updated_at
        known = cache.prs.get(str(number))
        if known and known.updated_at == updated and updated:
            files, words = known.files, known.words
        else:
            listed = client.pull_files(number)
            files = tuple(f.filename for f in listed)
            words = tuple(sorted(set().union(*(patch_words(f.patch) for f in listed))))
            # the list's own ETag and patches are not kept: the words stand for them
            client.etags.pop(
                f"{client.api_url}/repos/{client.repo}/pulls/{number}/files?per_page=100", None
            )
        fresh[str(number)] = KnownPull(updated, files, words)
        prs.append(
            PullRequest(
                number=number,
                title=found.title,
                author=found.author,
                files=files,
                words=frozenset(words),
            )
        )
    cache.prs = fresh
    return tuple(prs)


def find_claims(settings: Settings, client: GitHubClient, cache: Cache) -> Claims:
    """The backlog of the configured tree with each operator's claims (``backlog --claims``)."""
    index = load_index(settings.tree)
    items = backlog(index)
    prs = open_prs(client, settings.review.tracker_query, cache)
    found = claims(items, _names(index, items), prs)
    cache.save(tracker_cache(settings))
    return Claims(found, prs, client.sent, client.not_modified)


def update_tracker(
    settings: Settings, client: GitHubClient, cache: Cache, issue: int, *, dry_run: bool = False
) -> TrackerRun:
    """Rewrite the tracker section of issue ``issue`` from the tree and the open PRs."""
    body = client.issue_body(issue)
    rows, merged_before = listed_operators(body)
    index = load_index(settings.tree)
    items = backlog(index)
    current = {i.op for i in items}
    merged = (rows | merged_before) - current
    prs = open_prs(client, settings.review.tracker_query, cache)
    found = claims(items, _names(index, items), prs, merged)
    section = render_section(found, prs)
    new_body = replace_section(body, section)
    if dry_run:
        outcome = Written.DRY_RUN
    elif new_body.replace("\r\n", "\n").strip() == body.replace("\r\n", "\n").strip():
        outcome = Written.UNCHANGED
    else:
        client.update_issue_body(issue, new_body)
        outcome = Written.UPDATED
    cache.save(tracker_cache(settings))
    return TrackerRun(
        Claims(found, prs, client.sent, client.not_modified),
        section,
        outcome,
        client.sent,
        client.not_modified,
    )
