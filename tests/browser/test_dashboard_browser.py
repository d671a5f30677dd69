"""The dashboard in a real browser: Voilà serves notebooks/dashboard.ipynb on 127.0.0.1 and
Debian's headless chromium (no browser download) moves the round slider and edits a
parameter through Playwright. Screenshots go to $SAG2WB_SCREENSHOT_DIR when it is set.

    SAG2WB_SCREENSHOT_DIR=screenshots python -m pytest -m browser tests/browser -q
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "dashboard.ipynb"
CHROMIUM = os.environ.get("SAG2WB_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1280, "height": 800}
LOAD_TIMEOUT_MS = 90_000  # Voilà starts a kernel, builds the sample index and runs the notebook
STEP_TIMEOUT_MS = 20_000


def _require_browser():
    if not Path(CHROMIUM).exists():
        reason = f"{CHROMIUM} not found: install Debian's chromium (apt-get install -y chromium)"
        if os.environ.get("SAG2WB_REQUIRE_BROWSER") == "1":
            pytest.fail(reason + " (SAG2WB_REQUIRE_BROWSER=1)")
        pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, proc: subprocess.Popen, log: Path, timeout: float = 60.0):
    # a TCP connect, not a GET: a GET would start a kernel
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"voila exited with {proc.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"voila did not listen on 127.0.0.1:{port} within {timeout:.0f} s")


@pytest.fixture(scope="module")
def voila_url(tmp_path_factory):
    _require_browser()
    port = _free_port()
    log = tmp_path_factory.mktemp("voila") / "voila.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "voila", str(NOTEBOOK), "--no-browser", f"--port={port}",
             "--Voila.ip=127.0.0.1", "--Voila.port_retries=0"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_for_port(port, proc, log)
        yield f"http://127.0.0.1:{port}/"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def browser():
    _require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def new_page(browser, voila_url):
    """Open the dashboard in a fresh browser context (a fresh kernel behind it)."""
    contexts = []

    def open_page():
        context = browser.new_context(viewport=VIEWPORT)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(STEP_TIMEOUT_MS)
        page.on("console", lambda m: m.type == "error" and print(f"browser console: {m.text}"))
        page.goto(voila_url, timeout=LOAD_TIMEOUT_MS)
        return page

    yield open_page
    for context in contexts:
        context.close()


# plotly's widget view sometimes drops the in-place updates of one chart for good (seen in
# about one run in six here: the terms chart stays on round 0 while the kernel and every
# other view are on round 1; moving the slider again does not revive it, a page reload
# does). The scenario is retried on a freshly loaded page; each dropped run is printed,
# and three in a row fail the test.
ATTEMPTS = 3


def test_slider_and_parameter_change_redraw_the_views(new_page):
    failures = []
    for attempt in range(1, ATTEMPTS + 1):
        try:
            _scenario(new_page())
            break
        except AssertionError as exc:
            failures.append(exc)
            print(f"attempt {attempt} of {ATTEMPTS} failed: {str(exc).splitlines()[0]}")
    else:
        raise failures[-1]


def _shot(page, name: str, sections=()):
    """The 1280x800 viewport as a user sees it, plus each named section scrolled into view
    (Voilà scrolls inside its own container, so a full-page shot would stop at the viewport)."""
    folder = os.environ.get("SAG2WB_SCREENSHOT_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"))
        for section in sections:
            page.locator(f".sag2wb-{section}-section").screenshot(path=str(Path(folder) / f"{name}_{section}.png"))


def _set_readout(page, selector: str, value: str):
    readout = page.locator(f"{selector} .widget-readout")
    readout.click()
    readout.fill(value)
    readout.press("Enter")


def _scenario(page):
    from playwright.sync_api import expect

    expect.set_options(timeout=STEP_TIMEOUT_MS)  # auto-waiting, generous on a loaded CI machine
    dashboard = page.locator(".sag2wb-dashboard")
    expect(dashboard).to_be_visible(timeout=LOAD_TIMEOUT_MS)
    summary = page.locator(".sag2wb-round-summary")
    expect(summary).to_contain_text("Round 0 of 2")
    # plotly drew data, not only empty axes: bars in the term chart, lines in the slope chart
    expect(page.locator(".sag2wb-slope-section .js-plotly-plot .scatterlayer .trace")).to_have_count(3)
    expect(page.locator(".sag2wb-seeds-section .js-plotly-plot")).to_be_visible()
    # every chart finished its first draw (an update sent while plotly's first draw is still
    # running can be lost: plotly's widget view, not ours)
    expect(page.locator(".sag2wb-seeds-section .gtitle")).to_contain_text("round 0: no seeds")
    expect(page.locator(".sag2wb-terms-section .annotation-text")).to_have_count(5)
    expect(page.locator(".sag2wb-trajectory-section .js-plotly-plot .sankey")).to_be_attached()
    pool = page.locator(".sag2wb-pool")
    expect(pool).to_contain_text("round 0:")
    no_horizontal_scroll = "document.documentElement.scrollWidth <= window.innerWidth"
    assert page.evaluate(no_horizontal_scroll), "the dashboard scrolls horizontally at 1280x800"
    _shot(page, "01_round0")

    # move the round slider (through its readout) to round 1
    _set_readout(page, ".sag2wb-round-slider", "1")
    expect(summary).to_contain_text("Round 1 of 2")
    expect(pool).to_contain_text("round 1:")
    expect(page.locator(".sag2wb-terms-section .js-plotly-plot .bars path").first).to_be_attached()
    expect(page.locator(".sag2wb-terms-section .annotation-text").last).to_contain_text("round 1: 20 selected")
    expect(page.locator(".sag2wb-seeds-section .gtitle")).to_contain_text("round 1: seeds (ranked in round 0)")
    _shot(page, "02_round1", ["pool", "seeds", "terms", "slope", "ranking", "trajectory"])

    # change a parameter: L = 3 expansion terms; the dashboard re-runs from round 1
    field = page.locator(".sag2wb-param-L input")
    field.fill("3")
    field.press("Enter")
    expect(page.locator(".sag2wb-params-message")).to_contain_text("applied; recomputed from round 1")
    expect(page.locator(".sag2wb-terms-section .annotation-text").last).to_contain_text("round 1: 3 selected")
    expect(page.locator(".sag2wb-diff")).to_contain_text("reference: judge lexical, L=20")
    expect(page.locator(".sag2wb-status")).to_contain_text("from cache")
    _shot(page, "03_L3", ["terms", "trajectory", "diff"])

    # an invalid entry is refused in the control with the engine's message
    field = page.locator(".sag2wb-param-H input")
    field.fill("3")
    field.press("Enter")
    expect(page.locator(".sag2wb-params-message")).to_contain_text("H (expansion rounds) must be 0, 1 or 2, got 3")
    expect(summary).to_contain_text("of 2")  # still the last good trajectory
    assert page.evaluate(no_horizontal_scroll), "the dashboard scrolls horizontally at 1280x800"
    _shot(page, "04_invalid_H")
