"""The variants page of one 2Wiki question (3 rounds) over a 3 x 3 x 2 grid (L=5,10,20 x H=0,1,2 x
lexical,learned; offline judges): its size, the time to make it, and in headless chromium (opened
from file://, every other request aborted) the time until it is drawn and the time of a switch
between variants (medians of several loads).

    python benchmarks/bench_report_grid.py [--data ../shared/data] [--db /tmp/2wiki.sqlite] [--runs 5]

Goal (issue 32): <= 8 MiB. "drawn" is the page's own mark (body[data-drawn]) after its first
variant, `performance.now()` then; a switch is `window.sag2wbSwitchMs`, measured in the page from
the click's handler until the new variant's views are drawn (one per button clicked, every axis).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import data_arg, need
from tests.browser import driver
from workbench.engine import Run
from workbench.index.corpora import load_questions
from workbench.index.store import Index
from workbench.judges import LexicalJudge
from workbench.report.variants import check_limits, read_grid, run_grid, write_variants_page

VARY = ["L=5,10,20", "H=0,1,2"]
JUDGES = ["lexical,learned"]
# every button of every axis in turn, then back: 12 switches per load
CLICKS = [("L", "5"), ("L", "10"), ("H", "0"), ("H", "1"), ("judge", "learned"), ("L", "20"), ("H", "2"),
          ("judge", "lexical"), ("L", "5"), ("H", "0"), ("judge", "learned"), ("L", "20")]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    data_arg(parser)
    parser.add_argument("--db", default=None, help="a 2Wiki index to reuse (built when missing)")
    parser.add_argument("--runs", type=int, default=5, help="page loads (default 5)")
    args = parser.parse_args()
    corpus = need(Path(args.data) / "2wiki" / "corpus.json")
    questions = load_questions(need(Path(args.data) / "2wiki" / "questions-dev.jsonl"))
    work = Path(tempfile.mkdtemp(prefix="bench-report-grid-"))
    db = Path(args.db) if args.db else work / "2wiki.sqlite"
    index = Index(db) if db.exists() else Index.build(corpus, db)
    judge = LexicalJudge(index)
    trace = next(t for t in (Run(index, q, judge=judge).run() for q in questions) if len(t.rounds) == 3)
    started = time.perf_counter()
    grid = read_grid(VARY, JUDGES, trace, index)
    estimate = check_limits(grid, trace, index, max_variants=100, max_mib=1000)
    checked = time.perf_counter()
    run = run_grid(grid, trace, index)
    ran = time.perf_counter()
    page, size = write_variants_page(run, trace, index, work / "variants.html")
    written = time.perf_counter()
    print(f"question {trace.question_id}: {grid.count} variants ({' x '.join(VARY)} x {JUDGES[0]})")
    print(
        f"page: {size / 2**20:.2f} MiB ({size} bytes; goal <= 8 MiB; estimated before the run "
        f"{estimate / 2**20:.2f} MiB); {run.memo.misses} judgments asked, {run.memo.hits} reused"
    )
    print(
        f"made in {written - started:.1f} s: grid read and estimated {checked - started:.1f} s, "
        f"{grid.count} runs {ran - checked:.1f} s, page data and write {written - ran:.1f} s"
    )

    from playwright.sync_api import sync_playwright

    drawn, switches, errors, requests = [], [], [], []
    with sync_playwright() as p:
        browser = driver.launch_browser(p)
        for _ in range(args.runs):
            context, tab, seen = driver.offline_page(browser)
            tab.goto(page.as_uri())
            tab.wait_for_selector("body[data-drawn=yes]")
            drawn.append(tab.evaluate("window.sag2wbDrawnMs"))
            for axis, value in CLICKS:
                tab.click(f".sag2wb-axis[data-axis='{axis}'] button[data-value='{value}']")
                switches.append(tab.evaluate("window.sag2wbSwitchMs"))
            errors += seen["errors"]
            requests += seen["requests"]
            context.close()
        browser.close()
    print(
        f"until the page is drawn: median {statistics.median(drawn):.0f} ms over {args.runs} loads "
        f"(min {min(drawn):.0f}, max {max(drawn):.0f})"
    )
    print(
        f"a switch between variants: median {statistics.median(switches):.0f} ms over {len(switches)} switches "
        f"(min {min(switches):.0f}, max {max(switches):.0f})"
    )
    print(f"console errors: {len(errors)}; requests other than the file: {len(requests)}")


if __name__ == "__main__":
    main()
