"""Headless Chromium for tests that look at an HTML page the project writes (reports, inspector).

Debian's `chromium` package, driven by Playwright (the `playwright` Python package from the dev
extra; no browser download: we point it at /usr/bin/chromium). `.ci/run` installs Chromium;
elsewhere the tests that need it skip with the reason.

    from rt_chromium import open_page

    with open_page(html_path) as page:      # a Playwright Page, the file loaded, scripts run
        page.fill("#search", "chest")
        page.screenshot(path=str(shot))      # look at it with the file tool
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

# the flags that keep Chromium quiet on a machine with no network (see the env notes): no
# background connections, no component updates, no sync, no first-run UI, no GPU, no sandbox as root
CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def chromium_path() -> str | None:
    env = os.environ.get("RUBRICSTREE_CHROMIUM")
    if env and Path(env).exists():
        return env
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def require_chromium() -> str:
    """Chromium's path, or skip the test with the reason."""
    path = chromium_path()
    if path is None:
        pytest.skip("headless Chromium is absent (apt-get install chromium; .ci/run installs it)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.skip("the playwright package is absent (pip install -e '.[dev]')")
    return path


@contextlib.contextmanager
def open_page(html: Path, *, width: int = 1400, height: int = 900, timeout_ms: int = 30_000) -> Iterator:
    """Open a file from disk in headless Chromium and yield the Playwright page, with its
    console errors collected in ``page.errors`` (a page that throws is a failing page)."""
    exe = require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, args=CHROMIUM_FLAGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.set_default_timeout(timeout_ms)
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
            # no network: a self-contained page must not ask for anything but its own file
            page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:") else route.abort())
            page.goto(Path(html).resolve().as_uri())
            page.wait_for_load_state("load")
            page.errors = errors
            yield page
        finally:
            browser.close()
