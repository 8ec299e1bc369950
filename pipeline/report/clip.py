"""Caps on text from the build and the tests before it reaches a log or the PR comment.

One line of test output can be megabytes: a tensor printed whole, a minified traceback, a
message that quotes a file. Printed as it is, it floods the CI log (GitHub's log viewer
slows to a crawl on such lines), and the comment has a hard size limit. Each line keeps its
start and says how much of it was left out; what a command prints from such text in all is
capped as well. The full text stays in the run's files (pytest.log, results.json).
"""

from __future__ import annotations

# Characters kept of one line: the start of any message a person reads, a screenful, and
# well past anything sensible (a compiler error with its path, a pytest assertion line).
MAX_LINE_CHARS = 2_000
# Characters of such text one command prints to its log in all: 100 lines at the cap,
# ~200 kB, a log a browser still opens; the rest is in the run's files.
MAX_LOG_CHARS = 200_000


def clip_line(line: str, limit: int = MAX_LINE_CHARS) -> str:
    """``line`` (no line break in it) cut to ``limit`` characters and a note of the rest."""
    if len(line) <= limit:
        return line
    return f"{line[:limit]}… [{len(line) - limit} more characters]"


def clip_lines(text: str, limit: int = MAX_LINE_CHARS) -> str:
    """``text`` with each of its lines cut as ``clip_line`` does; line breaks kept."""
    if len(text) <= limit:
        return text
    return "\n".join(clip_line(line, limit) for line in text.split("\n"))


class LogCap:
    """Caps what one command prints of untrusted text: each line, and the total.

    ``cap(text)`` is ``text`` ready to print, cut to what is left of the total with a note
    saying so; None once the total has been reached and noted (print nothing).
    """

    def __init__(self, total: int = MAX_LOG_CHARS, line: int = MAX_LINE_CHARS) -> None:
        self.total = total
        self.line = line
        self.used = 0
        self.full = False

    def __call__(self, text: str) -> str | None:
        if self.full:
            return None
        text = clip_lines(text, self.line)
        left = self.total - self.used
        if len(text) <= left:
            self.used += len(text)
            return text
        self.full = True
        self.used = self.total
        return (
            f"{text[:left]}… [{len(text) - left} more characters; this run prints at most "
            f"{self.total} characters of build and test output, the rest is in its files]"
        )
