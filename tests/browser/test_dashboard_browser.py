"""The dashboard in a real browser (Debian's headless chromium via Playwright, no browser
download): fresh Voilà page loads and JupyterLab loads (notebook opened in JupyterLab's UI,
Run All), each followed by seven actions; after every action every chart must show the
stepper's run and round (tests/browser/driver.py says exactly what is compared). No
scenario is retried: one stale chart fails the test. Counts (reduced for CI):

    SAG2WB_BROWSER_VOILA_LOADS=3 SAG2WB_BROWSER_LAB_LOADS=1 python -m pytest -m browser tests/browser -q

The full 20 + 5 with timings: benchmarks/bench_dashboard_browser.py. Screenshots go to
$SAG2WB_SCREENSHOT_DIR when it is set.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from . import driver

pytestmark = pytest.mark.browser

VOILA_LOADS = int(os.environ.get("SAG2WB_BROWSER_VOILA_LOADS", "3"))
LAB_LOADS = int(os.environ.get("SAG2WB_BROWSER_LAB_LOADS", "1"))
KERNEL_LOADS = 5  # the kernel-leak check closes this many Voilà pages


@pytest.fixture(scope="module")
def voila(tmp_path_factory):
    driver.require_browser()
    with driver.voila_server(tmp_path_factory.mktemp("voila")) as served:
        yield served


def _shot(page, name: str, sections=()):
    folder = os.environ.get("SAG2WB_SCREENSHOT_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"))
        for section in sections:
            page.locator(f".sag2wb-{section}-section").screenshot(path=str(Path(folder) / f"{name}_{section}.png"))


def _wait_kernels(proc, n: int, timeout: float = 30.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while True:
        live = driver.kernel_processes(proc)
        if len(live) <= n or time.monotonic() > deadline:
            return live
        time.sleep(0.2)


def test_voila_charts_never_show_another_round_and_kernels_end(browser, voila):
    url, proc, log = voila
    stale, offhost, errors, mismatch = [], [], [], []
    for load in range(max(VOILA_LOADS, KERNEL_LOADS)):
        s = driver.Session(browser)
        driver.load_voila(s, url)
        if load < VOILA_LOADS:
            for step in driver.run_actions(s.page):
                if step["stale"]:
                    stale.append((load, step["action"], step["stale"]))
        if load == 0:
            _shot(s.page, "voila_after_actions", ["pool", "seeds", "terms", "slope", "trajectory"])
        offhost += s.offhost
        errors += s.console_errors
        mismatch += driver.version_mismatch_warnings(s)
        s.close()
    print(f"Voilà: {len(stale)} stale chart checks in {VOILA_LOADS} loads x 7 actions")
    print(f"Voilà: {len(mismatch)} front-end version-mismatch warnings in {max(VOILA_LOADS, KERNEL_LOADS)} loads")
    assert stale == [], stale
    assert offhost == [], f"requests off 127.0.0.1 (CDN): {sorted(set(offhost))}"
    assert errors == [], errors
    # an extension built for newer JupyterLab packages than the page ships (pins: docs/widgets.md)
    assert mismatch == [], sorted(set(mismatch))
    live = _wait_kernels(proc, 0)
    print(f"Voilà: {len(live)} kernels alive after closing {max(VOILA_LOADS, KERNEL_LOADS)} pages")
    assert live == [], f"kernels still alive after their pages closed: {live}\n{log.read_text()[-2000:]}"
    assert "_xsrf' argument missing" not in log.read_text()


def test_jupyterlab_charts_never_show_another_round(browser, tmp_path):
    with driver.lab_server(tmp_path / "lab") as (url, _proc, _log):
        stale = []
        for load in range(LAB_LOADS):
            s = driver.Session(browser)
            driver.load_lab(s, url)
            if load == 0:
                _check_lab_layout(s.page)
            for step in driver.run_actions(s.page, on_step=_round1_shots if load == 0 else None):
                if step["stale"]:
                    stale.append((load, step["action"], step["stale"]))
            s.close()
            driver.shutdown_lab_kernels(url)
        print(f"JupyterLab: {len(stale)} stale chart checks in {LAB_LOADS} loads x 7 actions")
        assert stale == [], stale
    # the repo's notebook was not opened, so it cannot have been autosaved with outputs
    assert driver.NOTEBOOK.read_text(encoding="utf-8").count('"outputs": []') >= 1


def _check_lab_layout(page):
    """At 1280x800 with the file browser open: screenshots, and nothing in the pool table
    (15 rows, every column) cut off."""
    _shot(page, "lab_1280x800")
    for section in ("pool", "seeds", "terms", "trajectory"):
        page.locator(f".sag2wb-{section}-section").scroll_into_view_if_needed()
        _shot(page, f"lab_1280x800_{section}")
    assert page.locator(".jp-FileBrowser").first.is_visible(), "the file browser should be open"
    clipped = page.evaluate(
        "() => Object.fromEntries(['pool', 'context', 'ranking'].map(n => {"
        " const b = document.querySelector(`.sag2wb-${n} .box`);"
        " return [n, b ? b.scrollWidth - b.clientWidth : -1]; }))"
    )
    assert clipped == {"pool": 0, "context": 0, "ranking": 0}, f"tables wider than their boxes (px): {clipped}"
    # every table's box ends inside its section: a wider table scrolls, it is not cut off
    overflow = page.evaluate(
        "() => [...document.querySelectorAll('.sag2wb-dt .box')].map(b => {"
        " const sec = b.closest('.widget-vbox'); return b.getBoundingClientRect().right"
        " - sec.getBoundingClientRect().right; })"
    )
    assert overflow and max(overflow) <= 1, f"table boxes extend past their sections by {overflow} px"


def _round1_shots(action, page):
    if action == "slider move":
        for section in ("seeds", "terms", "slope"):
            page.locator(f".sag2wb-{section}-section").scroll_into_view_if_needed()
            _shot(page, f"lab_round1_{section}", [section])


def test_invalid_entry_is_refused_with_the_engine_message(browser, voila):
    from playwright.sync_api import expect

    s = driver.Session(browser)
    try:
        driver.load_voila(s, voila[0])
        field = s.page.locator(".sag2wb-param-H input")
        field.fill("3")
        field.press("Enter")
        expect(s.page.locator(".sag2wb-params-message")).to_contain_text(
            "H (expansion rounds) must be 0, 1 or 2, got 3"
        )
        expect(s.page.locator(".sag2wb-round-summary")).to_contain_text("of 2")  # the last good trajectory
        assert s.page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    finally:
        s.close()


def test_clicking_a_row_shows_the_passage(browser, voila):
    from playwright.sync_api import expect

    s = driver.Session(browser)
    try:
        driver.load_voila(s, voila[0])
        page = s.page
        readout = page.locator(".sag2wb-round-slider .widget-readout")
        readout.click()
        readout.fill("1")
        readout.press("Enter")
        expect(page.locator(".sag2wb-pool")).to_contain_text("round 1:")
        # a row that came in through a term (the "via terms" cell, 6th, is filled)
        rows = page.locator(".sag2wb-pool tbody tr")
        row = next(rows.nth(i) for i in range(rows.count()) if rows.nth(i).locator("td").nth(5).inner_text().strip())
        title = row.locator("td").nth(1).inner_text()
        term = row.locator("td").nth(5).inner_text().split(", ")[0]
        row.click()
        passage = page.locator(".sag2wb-passage")
        expect(passage).to_contain_text(title)
        expect(passage).to_contain_text(f"through “{term}”")
        expect(passage.locator("mark.t").first).to_be_visible()
        page.locator(".sag2wb-passage-section").scroll_into_view_if_needed()
        _shot(page, "voila_passage", ["passage"])
        # sorting by a header reorders the rows in the browser
        page.locator(".sag2wb-pool th", has_text="score").first.click()
        scores = [float(t) for t in page.locator(".sag2wb-pool tbody tr td:nth-child(7)").all_inner_texts() if t]
        assert scores == sorted(scores), scores
    finally:
        s.close()


def test_charts_are_readable_at_1280x800_and_the_sankey_has_a_legend(browser, voila, tmp_path):
    """Screenshots of every chart at 1280x800 (in $SAG2WB_SCREENSHOT_DIR, else tmp_path), on
    round 0 and round 1: no two chart texts overlap (axis titles vs tick labels, titles,
    facet titles, legends, Sankey labels), none is outside the chart (clipped tick labels),
    the Sankey's colour key is drawn and its labels are at least 10 px."""
    s = driver.Session(browser)
    folder = Path(os.environ.get("SAG2WB_SCREENSHOT_DIR") or tmp_path)
    try:
        driver.load_voila(s, voila[0])
        page = s.page
        problems = {}
        for round_no in (0, 1):
            if round_no:
                readout = page.locator(".sag2wb-round-slider .widget-readout")
                readout.click()
                readout.fill("1")
                readout.press("Enter")
                page.wait_for_function(
                    "() => JSON.parse(document.querySelector('.sag2wb-state').dataset.state).round === 1"
                )
                assert driver.wait_agreement(page) == {}
            for name in driver.CHARTS:
                section = page.locator(f".sag2wb-{name}-section")
                section.scroll_into_view_if_needed()
                section.screenshot(path=str(folder / f"readable_round{round_no}_{name}.png"))
            page.evaluate("() => document.querySelectorAll('*').forEach(e => { if (e.scrollTop) e.scrollTop = 0; })")
            page.screenshot(path=str(folder / f"readable_round{round_no}_first_screen.png"), full_page=False)
            problems[round_no] = driver.chart_text_problems(page)
        assert problems == {0: [], 1: []}, problems
        # the parameters' words are shown whole next to their letters (not cut to "candidat…")
        cut = page.evaluate(
            "() => [...document.querySelectorAll('[class*=sag2wb-param-] label')]"
            ".filter(l => l.scrollWidth > l.clientWidth + 1).map(l => l.textContent)"
        )
        assert cut == [], f"parameter labels cut off: {cut}"
        assert page.locator(".sag2wb-param-B label").text_content() == "B · candidates"
        legend = page.locator(".sag2wb-trajectory-section .annotation-text").all_text_contents()
        assert any("in the final top 10" in t and "term (round)" in t for t in legend), legend
        sizes = driver.chart_fonts(page, "trajectory")
        assert sizes and min(sizes) >= 10, sizes
        labels = page.locator(".sag2wb-trajectory-section .node-label").all_text_contents()
        assert labels and not any(" é " in f" {x} " or x.startswith("“é ") for x in labels), labels
    finally:
        s.close()
