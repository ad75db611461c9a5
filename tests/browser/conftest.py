"""Headless Chromium (Debian's /usr/bin/chromium) driven by Playwright against ``live_server``.

Playwright's sync API runs an asyncio event loop in the test thread, and Django refuses ORM
calls from a thread with a running loop (SynchronousOnlyOperation). The tests use the ORM only
to set up rows, before and between browser steps, so that check is switched off here.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(os.environ.get("DJANGO_ORDERS_ARTIFACTS", "/tmp/django-orders-artifacts"))


@pytest.fixture(scope="session")
def browser():
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium package to run these")
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        yield browser
        browser.close()


@pytest.fixture
def page(browser, request):
    context = browser.new_context(viewport={"width": 1600, "height": 1000})
    context.set_default_timeout(15_000)
    page = context.new_page()
    yield page
    if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
        screenshot(page, f"FAILED-{request.node.name}")
    context.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


def screenshot(page, name: str) -> Path:
    """Save a full-page screenshot under the artifacts directory (outside the repository)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / (re.sub(r"[^\w.-]+", "-", name) + ".png")
    page.screenshot(path=str(path), full_page=True)
    return path


@pytest.fixture
def shot():
    return screenshot
