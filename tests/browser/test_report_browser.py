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
    context, page, seen = driver.offline_page(browser)
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


def test_switching_a_variant_shows_that_variants_rounds(browser, made):
    """The variants page (`report --vary L=10,20 --judge lexical,oracle`): a switch of L, then of the
    judge, keeps the round and shows that variant's terms, pool and seeds (each variant re-run here),
    and the change box says Results.changes()'s words for the pair; no console error, no request."""
    from workbench.judges.registry import JudgeSpec
    from workbench.report import read_data

    folder, trace = made["folder"], made["trace"]
    out = folder / "variants.html"
    r = subprocess.run(
        [sys.executable, "-m", "workbench.cli", "report", folder / "t.json", "--db", folder / "docs.sqlite",
         "--vary", "L=10,20", "--judge", "lexical,oracle", "--out", out],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    data = read_data(out.read_text(encoding="utf-8"))
    index = Index(folder / "docs.sqlite")
    question = next(
        q for q in load_questions(ROOT / "sample_corpora" / "internal_docs.questions.jsonl") if q.id == "docs-02"
    )

    def rerun(L: int, judge: str):
        return Run(index, question, trace.params.replace(L=L), JudgeSpec.parse(judge).build(index, question.gold)).run()

    context, page, seen = driver.offline_page(browser)
    try:
        page.goto(out.as_uri())
        page.wait_for_selector("body[data-drawn=yes]", timeout=driver.STEP_TIMEOUT_MS)
        names = [v["name"] for v in data["variants"]]
        start = int(page.get_attribute("body", "data-variant"))
        assert names[start] == "L=20 · lexical"  # the trace's own settings
        expect_round(page, trace, 0)
        page.click(".sag2wb-next")
        page.click(".sag2wb-next")
        expect_round(page, trace, 2)
        for L, judge in ((10, "lexical"), (10, "oracle")):
            before = int(page.get_attribute("body", "data-variant"))
            axis, value = ("L", str(L)) if judge == "lexical" else ("judge", judge)
            page.click(f".sag2wb-axis[data-axis='{axis}'] button[data-value='{value}']")
            now = int(page.get_attribute("body", "data-variant"))
            assert names[now] == f"L={L} · {judge}"
            expect_round(page, rerun(L, judge), 2)  # the same round, this variant's terms
            summary = data["changes"][f"{before}>{now}"]["summary"]
            assert page.text_content(".sag2wb-change") == f"From {names[before]} to {names[now]}:\n{summary}"
        page.keyboard.press("ArrowLeft")
        expect_round(page, rerun(10, "oracle"), 1)
        shot(page, made, "variants")
        assert seen == {"errors": [], "requests": []}
    finally:
        context.close()
        index.close()


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    """Two `sag2wb eval` results on docs-01..04 with their traces (A: defaults, B: L=5), and the
    experiment page `sag2wb report A.json --compare B.json --db DB` made of them."""
    folder = tmp_path_factory.mktemp("experiment-browser")
    index = Index.build(ROOT / "sample_corpora" / "internal_docs", folder / "docs.sqlite")
    questions = folder / "q.jsonl"
    lines = (ROOT / "sample_corpora" / "internal_docs.questions.jsonl").read_text(encoding="utf-8").splitlines()
    questions.write_text("\n".join(lines[:4]) + "\n", encoding="utf-8")
    cli = [sys.executable, "-m", "workbench.cli"]
    for name, extra in (("a", []), ("b", ["--param", "L=5"])):
        r = subprocess.run(
            [*cli, "eval", "--db", index.path, "--questions", questions, "--judge", "lexical", "--quiet",
             "--out", folder / f"{name}.json", "--trace-dir", folder / f"traces-{name}", *extra],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
    page = folder / "experiment.html"
    r = subprocess.run(
        [*cli, "report", folder / "a.json", "--compare", folder / "b.json", "--out", page, "--db", index.path],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return {"folder": folder, "page": page}


def test_experiment_page_opens_a_question_whose_trajectory_agrees_with_its_trace(browser, experiment):
    import json

    from workbench.runs.resume import trace_file_name
    from workbench.trace import Trace

    folder = experiment["folder"]
    context, page, seen = driver.offline_page(browser)
    try:
        page.goto(experiment["page"].as_uri())
        page.wait_for_selector("body[data-drawn=yes]", timeout=driver.STEP_TIMEOUT_MS)
        # R@10 of each result as its out.json says it (the table shows "mean [low, high]")
        headers = page.eval_on_selector_all(".sag2wb-metrics-table th", "hs => hs.map(h => h.textContent)")
        column = headers.index("R@10")
        for name in ("a", "b"):
            cell = page.locator(f".sag2wb-metrics-table tr[data-config='{name}.json'] td").nth(column).text_content()
            expected = json.loads((folder / f"{name}.json").read_text(encoding="utf-8"))["metrics"]["R@10"]
            assert float(cell.split()[0]) == expected
        folder_shot = Path(os.environ.get("SAG2WB_REPORT_SHOTS") or folder)
        page.screenshot(path=str(folder_shot / "experiment-top.png"))

        # open docs-02 from the table: B's trajectory, round by round, is its trace's
        page.fill(".sag2wb-questions-filter", "docs-02")
        assert page.locator(".sag2wb-questions-table tbody tr").count() == 1
        page.click(".sag2wb-questions-table tbody tr[data-question='docs-02']")
        page.click(".sag2wb-open-side[data-config='b.json']")
        view = ".sag2wb-opened-view[data-config='b.json']"
        page.wait_for_selector(f"{view}[data-round='0']", timeout=driver.STEP_TIMEOUT_MS)
        trace = Trace.from_json((folder / "traces-b" / trace_file_name("docs-02")).read_text(encoding="utf-8"))
        for r in range(len(trace.rounds)):
            state = trace.rounds[r]
            assert page.get_attribute(view, "data-round") == str(r)
            chosen = page.eval_on_selector_all(
                f"{view} .sag2wb-terms-section rect.bar[data-selected='1'][data-series='1+ln tf (count)']",
                "els => els.map(e => e.dataset.term)",
            )
            assert sorted(chosen) == sorted(t.term for t in state.terms if t.selected)
            ranking = list(state.ranking) if state.scored else [c.unit_id for c in state.candidates]
            units = page.eval_on_selector_all(
                f"{view} .sag2wb-pool-table tbody tr", "rs => rs.map(r => +r.dataset.unit)"
            )
            assert units[: len(ranking)] == ranking
            if r == 1:
                page.locator(".sag2wb-opened-section").scroll_into_view_if_needed()
                page.screenshot(path=str(folder_shot / "experiment-opened.png"))
            page.keyboard.press("ArrowRight")  # the keys go to the trajectory shown
        assert seen == {"errors": [], "requests": []}
    finally:
        context.close()
