"""Browser fixtures: the system's Chromium driven by Playwright (never a downloaded browser).

* ``browser`` (session): headless Chromium from ``/usr/bin/chromium``. Missing browser or
  Playwright: the console tests are skipped, except with ``CI=true``, where they must run (CI
  installs the browser in ``.ci/run``).
* ``console`` (function): opens pages of one gateway's console and fails the test on any console
  error, page error or failed request; ``shot(name)`` saves screenshots 1280 and 390 px wide under
  ``tests/console/screenshots/`` (gitignored).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

CHROMIUM = os.environ.get("GATEWAY_TEST_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
ARTIFACTS = Path(__file__).parent / "screenshots"
WIDTHS = (1280, 390)


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"console tests must run in CI: {reason}")
    pytest.skip(reason)


def _chromium_found() -> bool:
    return Path(CHROMIUM).exists() or shutil.which(CHROMIUM) is not None


@pytest_asyncio.fixture(scope="session")
async def browser() -> AsyncIterator[Any]:
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        _unavailable("playwright is not installed")
    if not _chromium_found():
        _unavailable(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    async with async_playwright() as pw:
        chromium = await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        await chromium.close()


class Console:
    """Pages of one gateway's console in a fresh browser context (its own sessionStorage)."""

    def __init__(self, browser: Any, base_url: str, test_name: str) -> None:
        self.browser = browser
        self.base_url = base_url
        self.test_name = re.sub(r"[^A-Za-z0-9_.-]+", "_", test_name)
        self.problems: list[str] = []
        self.contexts: list[Any] = []
        # URL prefixes whose failed loads are expected (a refusal the test provokes, image links the
        # simulator does not serve); any other failure is a problem.
        self.expected_failures: list[str] = []

    async def open(self, width: int = 1280) -> Any:
        context = await self.browser.new_context(viewport={"width": width, "height": 900})
        self.contexts.append(context)
        page = await context.new_page()
        page.on("console", self._on_console)
        page.on("pageerror", lambda exc: self.problems.append(f"page error: {exc}"))
        page.on("requestfailed", self._on_request_failed)
        page.on("dialog", lambda dialog: dialog.accept())
        await page.goto(self.base_url + "/console")
        return page

    def _on_console(self, msg: Any) -> None:
        if msg.type not in ("error", "warning"):
            return
        url = (msg.location or {}).get("url", "")
        if any(url.startswith(prefix) for prefix in self.expected_failures):
            return
        self.problems.append(f"console {msg.type}: {msg.text} ({url})")

    def _on_request_failed(self, request: Any) -> None:
        # A load the page itself gave up (an image dropped by a re-render) is not a failure.
        if request.failure == "net::ERR_ABORTED":
            return
        if any(request.url.startswith(prefix) for prefix in self.expected_failures):
            return
        self.problems.append(f"request failed: {request.url} ({request.failure})")

    async def shot(self, page: Any, name: str) -> list[Path]:
        """Full-page screenshots at each width (the page is re-laid out, then restored)."""
        ARTIFACTS.mkdir(exist_ok=True)
        saved = []
        original = page.viewport_size
        for width in WIDTHS:
            await page.set_viewport_size({"width": width, "height": 900})
            await page.wait_for_timeout(50)
            path = ARTIFACTS / f"{self.test_name}-{name}-{width}.png"
            await page.screenshot(path=str(path), full_page=True)
            saved.append(path)
        await page.set_viewport_size(original)
        return saved

    async def close(self) -> None:
        for context in self.contexts:
            await context.close()


@pytest_asyncio.fixture
async def console(browser: Any, request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    made: list[Console] = []

    def start(base_url: str) -> Console:
        c = Console(browser, base_url, request.node.name)
        made.append(c)
        return c

    yield start
    for c in made:
        await c.close()
    problems = [p for c in made for p in c.problems]
    assert not problems, "browser console problems:\n" + "\n".join(problems)
