"""The trajectory page (`sag2wb report`) in a real chromium, opened from file:// with every other
request aborted: it loads with no console error and no request; stepping forward and back (buttons,
slider, arrow keys) shows each round's selected terms and its pool in ranking order, read from the
trace; the pool filters; a click opens the passage; the Chinese titles are there. Screenshots at
1280x800 go to the test's folder (SAG2WB_REPORT_SHOTS=DIR keeps them).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.engine import Run
from workbench.index.corpora import load_questions
from workbench.index.store import Index
from workbench.judges import LexicalJudge

from . import driver

pytestmark = pytest.mark.browser
ROOT = driver.ROOT


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """docs-02 (Chinese titles, 3 rounds): its trace file and the page `sag2wb report` made of it."""
    folder = tmp_path_factory.mktemp("report-browser")
    index = Index.build(ROOT / "sample_corpora" / "internal_docs", folder / "docs.sqlite")
    question = next(
        q for q in load_questions(ROOT / "sample_corpora" / "internal_docs.questions.jsonl") if q.id == "docs-02"
    )
    trace = Run(index, question, judge=LexicalJudge(index)).run()
    (folder / "t.json").write_text(trace.to_json(), encoding="utf-8")
    page = folder / "page.html"
    r = subprocess.run(
        [sys.executable, "-m", "workbench.cli", "report", folder / "t.json", "--out", page, "--db", index.path],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    return {"trace": trace, "page": page, "folder": folder}


@pytest.fixture
def opened(browser, made):
    """The page in a fresh context: console errors, page errors and every non-file request recorded."""
    context = browser.new_context(viewport=driver.VIEWPORT)
    page = context.new_page()
    seen = {"errors": [], "requests": []}
    page.on("console", lambda m: seen["errors"].append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: seen["errors"].append(str(e)))

    def route(r):
        if r.request.url.startswith("file://"):
            r.continue_()
        else:
            seen["requests"].append(r.request.url)
            r.abort()

    context.route("**/*", route)
    page.goto(made["page"].as_uri())
    page.wait_for_selector("body[data-drawn=yes]", timeout=driver.STEP_TIMEOUT_MS)
    yield page, seen
    context.close()


def shot(page, made, name: str) -> None:
    folder = Path(os.environ.get("SAG2WB_REPORT_SHOTS") or made["folder"])
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"report-{name}.png"))


def shown_round(page) -> int:
    return int(page.get_attribute("body", "data-round"))


def selected_terms(page) -> list[str]:
    """The token forms of the dark (selected) bars of the terms chart's first facet."""
    return page.eval_on_selector_all(
        ".sag2wb-terms-section rect.bar[data-selected='1'][data-series='1+ln tf (count)']",
        "els => els.map(e => e.dataset.term)",
    )


def pool_units(page) -> list[int]:
    return [
        int(u) for u in page.eval_on_selector_all(".sag2wb-pool-table tbody tr", "rs => rs.map(r => r.dataset.unit)")
    ]


def expect_round(page, trace, r: int) -> None:
    state = trace.rounds[r]
    assert shown_round(page) == r
    assert page.text_content(".sag2wb-round-number") == str(r)
    chosen = [t.term for t in state.terms if t.selected]
    assert sorted(selected_terms(page)) == sorted(chosen)
    ranking = list(state.ranking) if state.scored else [c.unit_id for c in state.candidates]
    assert pool_units(page)[: len(ranking)] == ranking
    seeds = page.eval_on_selector_all(
        ".sag2wb-seeds-section rect.bar[data-series='seed score']", "els => els.map(e => Number(e.dataset.unit))"
    )
    assert seeds == [s.unit_id for s in state.seeds]


def test_load_step_forward_and_back_filter_and_open_a_passage(opened, made):
    page, seen = opened
    trace = made["trace"]
    last = len(trace.rounds) - 1
    expect_round(page, trace, 0)
    shot(page, made, "round0")
    page.click(".sag2wb-next")
    expect_round(page, trace, 1)
    shot(page, made, "round1")
    page.keyboard.press("ArrowRight")
    expect_round(page, trace, last)
    assert page.is_disabled(".sag2wb-next")
    page.keyboard.press("ArrowLeft")
    expect_round(page, trace, 1)
    page.click(".sag2wb-prev")
    expect_round(page, trace, 0)
    page.eval_on_selector(".sag2wb-round-slider", "el => { el.value = '2'; el.dispatchEvent(new Event('input')); }")
    expect_round(page, trace, 2)

    # filter the pool by a title the round holds: only matching rows stay, and the filter survives a step
    title = trace.units[trace.rounds[2].ranking[1]].title
    page.fill(".sag2wb-pool-filter", title)
    units = pool_units(page)
    assert units and all(title in trace.units[u].title or title in trace.units[u].source for u in units)
    assert len(units) < len(trace.rounds[2].pool)
    page.click(".sag2wb-prev")
    assert page.input_value(".sag2wb-pool-filter") == title
    page.fill(".sag2wb-pool-filter", "")

    # open a passage from the pool: the passage view shows that unit, its text marked
    unit = trace.rounds[1].ranking[3]
    page.click(f".sag2wb-pool-table tbody tr[data-unit='{unit}']")
    assert page.get_attribute(".sag2wb-passage-shown", "data-unit") == str(unit)
    assert page.text_content(".sag2wb-passage-title") == trace.units[unit].title
    assert page.locator(".sag2wb-passage .text mark").count() > 0
    page.locator(".sag2wb-passage-section").scroll_into_view_if_needed()
    shot(page, made, "passage")
    page.locator(".sag2wb-trajectory-section").scroll_into_view_if_needed()
    shot(page, made, "sankey")
    assert seen == {"errors": [], "requests": []}


def test_chinese_titles_are_shown(opened, made):
    page, seen = opened
    titles = [u.title for u in made["trace"].units.values() if any("\u4e00" <= ch <= "\u9fff" for ch in u.title)]
    assert titles
    text = page.text_content("body")
    for t in titles[:3]:
        assert t in text
    assert page.locator(".sag2wb-opening").text_content().startswith("In the top 10 for docs-02")
    assert seen == {"errors": [], "requests": []}
