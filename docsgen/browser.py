"""Headless Chromium for the dashboard: open a page, read it, take its picture.

Debian's ``chromium`` package is the browser (``apt-get install chromium``); Playwright's
Python client drives it through ``executable_path``, so nothing downloads a browser build
(never ``playwright install``). The flags keep it off the network and out of any profile.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def chromium() -> str | None:
    """The Chromium executable, or None when it is not installed."""
    found = next((c for c in CHROMIUM_CANDIDATES if Path(c).is_file()), None)
    return found or shutil.which("chromium")


@dataclass
class Page:
    """An open page and what its console said."""

    page: Any  # playwright.sync_api.Page
    console_errors: list[str] = field(default_factory=list)

    def evaluate(self, script: str) -> Any:
        return self.page.evaluate(script)

    def screenshot(self, path: Path, *, full_page: bool = True) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(path), full_page=full_page)
        return path


@contextmanager
def open_page(
    html: Path, *, width: int = 1200, height: int = 900, executable: str | None = None
) -> Iterator[Page]:
    """``html`` (a file) loaded in a fresh headless Chromium with a throwaway profile.

    Console errors, uncaught page errors and failed requests are collected in
    ``Page.console_errors``.
    """
    from playwright.sync_api import sync_playwright

    browser_path = executable or chromium()
    if browser_path is None:
        raise FileNotFoundError("no chromium: apt-get install -y chromium")
    with (
        tempfile.TemporaryDirectory(prefix="mps-pipeline-chromium-") as profile,
        sync_playwright() as pw,
    ):
        context = pw.chromium.launch_persistent_context(
            profile,
            executable_path=browser_path,
            headless=True,
            args=list(FLAGS),
            viewport={"width": width, "height": height},
            offline=True,
        )
        try:
            page = context.new_page()
            opened = Page(page)
            page.on(
                "console",
                lambda msg: opened.console_errors.append(msg.text) if msg.type == "error" else None,
            )
            page.on("pageerror", lambda exc: opened.console_errors.append(str(exc)))
            page.on(
                "requestfailed",
                lambda req: opened.console_errors.append(f"request failed: {req.url}"),
            )
            page.goto(html.resolve().as_uri(), wait_until="load")
            yield opened
        finally:
            context.close()
