"""The browser every browser test shares (one chromium per module)."""

import pytest

from . import driver


@pytest.fixture(scope="module")
def browser():
    driver.require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = driver.launch_browser(p)
        yield b
        b.close()
