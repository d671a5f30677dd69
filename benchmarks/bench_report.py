"""The trajectory page of one 2Wiki question (3 rounds): its size, and the time until every view
is drawn in headless chromium, opened from file:// with every other request aborted (medians).
`--experiment DIR`: the experiment page of two 100-question 2Wiki dev evals with traces instead
(`sag2wb eval --judge lexical`, A default, B L=5; made in DIR when missing): its size per extra
trajectory (goal <= 300 kB), the time until it is interactive (goal <= 2 s) and until a question
opened from the table has drawn its trajectory.

    python benchmarks/bench_report.py [--data ../shared/data] [--db /tmp/2wiki.sqlite] [--runs 7]
    python benchmarks/bench_report.py --experiment /tmp/bench-experiment [--runs 7]

Goals (issue 32): <= 4 MiB and <= 1 s. "drawn" is the page's own mark (body[data-drawn]) set after
its last view; the figure is `performance.now()` then, i.e. from the start of navigation. Also
printed: the size plotly.min.js would add if the charts were plotly's (why they are SVG).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
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
from workbench.report import read_blocks, write_trajectory_page


def plotly_size() -> int | None:
    try:
        import plotly

        path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
        return path.stat().st_size if path.exists() else None
    except ImportError:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    data_arg(parser)
    parser.add_argument("--db", default=None, help="a 2Wiki index to reuse (built when missing)")
    parser.add_argument("--runs", type=int, default=7, help="page loads (default 7)")
    parser.add_argument("--experiment", default=None, metavar="DIR", help="the experiment page (results kept in DIR)")
    args = parser.parse_args()
    if args.experiment:
        return experiment(args)
    corpus = need(Path(args.data) / "2wiki" / "corpus.json")
    questions = load_questions(need(Path(args.data) / "2wiki" / "questions-dev.jsonl"))
    work = Path(tempfile.mkdtemp(prefix="bench-report-"))
    db = Path(args.db) if args.db else work / "2wiki.sqlite"
    index = Index(db) if db.exists() else Index.build(corpus, db)
    judge = LexicalJudge(index)
    trace = next(t for t in (Run(index, q, judge=judge).run() for q in questions) if len(t.rounds) == 3)
    page = work / "page.html"
    started = time.perf_counter()
    write_trajectory_page(trace, page, index)
    build_s = time.perf_counter() - started
    size = page.stat().st_size
    print(f"question {trace.question_id}: {len(trace.rounds)} rounds, {len(trace.units)} units, judge {trace.judge}")
    print(f"page: {size / 2**20:.2f} MiB ({size} bytes; goal <= 4 MiB), written in {build_s:.2f} s")
    plotly = plotly_size()
    if plotly:
        print(f"plotly.min.js would add {plotly / 2**20:.2f} MiB: page + plotly = {(size + plotly) / 2**20:.2f} MiB")

    from playwright.sync_api import sync_playwright

    drawn, steps, errors, requests = [], [], [], []
    with sync_playwright() as p:
        browser = driver.launch_browser(p)
        for _ in range(args.runs):
            context, tab, seen = driver.offline_page(browser)
            tab.goto(page.as_uri())
            tab.wait_for_selector("body[data-drawn=yes]")
            drawn.append(tab.evaluate("window.sag2wbDrawnMs"))
            # every later round: the views of round r redrawn (ms in the page, from the click's handler)
            steps.append(
                tab.evaluate(
                    """() => { const out = []; const next = document.querySelector('.sag2wb-next');
                               while (!next.disabled) { const t = performance.now(); next.click();
                                                         out.push(performance.now() - t); } return out; }"""
                )
            )
            errors += seen["errors"]
            requests += seen["requests"]
            context.close()
        browser.close()
    median = statistics.median(drawn)
    print(
        f"until every view is drawn: median {median:.0f} ms over {args.runs} loads "
        f"(min {min(drawn):.0f}, max {max(drawn):.0f}; goal <= 1000 ms)"
    )
    per_step = [statistics.median(s) for s in zip(*steps)]
    print("a step to round " + ", ".join(f"{r + 1}: {ms:.0f} ms" for r, ms in enumerate(per_step)) + " (medians)")
    print(f"console errors: {len(errors)}; requests other than the file: {len(requests)}")


def _sag2wb(*args) -> float:
    started = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "workbench.cli", *map(str, args)], capture_output=True, text=True)
    if r.returncode:
        sys.exit(r.stderr)
    return time.perf_counter() - started


def experiment(args) -> None:
    folder = Path(args.experiment)
    folder.mkdir(parents=True, exist_ok=True)
    data = Path(args.data) / "2wiki"
    db = Path(args.db) if args.db else folder / "2wiki.sqlite"
    if not db.exists():
        _sag2wb("index", need(data / "corpus.json"), "--db", db)
    questions = need(data / "questions-dev.jsonl")
    for name, extra in (("a", ()), ("b", ("--param", "L=5"))):
        if not (folder / f"{name}.json").exists():
            _sag2wb("eval", "--db", db, "--questions", questions, "--judge", "lexical", "--quiet",
                    "--out", folder / f"{name}.json", "--trace-dir", folder / f"traces-{name}", *extra)  # fmt: skip
    bare, page = folder / "bare.html", folder / "experiment.html"
    base = ("report", folder / "a.json", "--compare", folder / "b.json", "--db", db, "--force")
    bare_s = _sag2wb(*base, "--trajectories", "none", "--out", bare)
    build_s = _sag2wb(*base, "--out", page)
    n = len(read_blocks(page.read_text(encoding="utf-8")))
    size, without = page.stat().st_size, bare.stat().st_size
    print(f"experiment page: {n} trajectories, {size / 2**20:.2f} MiB, written in {build_s:.0f} s "
          f"({bare_s:.1f} s without trajectories, {without / 1024:.0f} kB)")  # fmt: skip
    print(f"each extra trajectory: {(size - without) / n / 1000:.0f} kB on average (goal <= 300 kB)")

    from playwright.sync_api import sync_playwright

    drawn, opened, errors, requests = [], [], [], []
    with sync_playwright() as p:
        browser = driver.launch_browser(p)
        for _ in range(args.runs):
            context, tab, seen = driver.offline_page(browser)
            tab.goto(page.as_uri())
            tab.wait_for_selector("body[data-drawn=yes]", timeout=120_000)
            drawn.append(tab.evaluate("window.sag2wbDrawnMs"))
            opened.append(tab.evaluate(
                """() => { const t = performance.now();
                           document.querySelector('.sag2wb-questions-table tbody tr').click();
                           return performance.now() - t; }"""))  # fmt: skip
            errors += seen["errors"]
            requests += seen["requests"]
            context.close()
        browser.close()
    print(f"until interactive (every view drawn): median {statistics.median(drawn):.0f} ms over {args.runs} loads "
          f"(min {min(drawn):.0f}, max {max(drawn):.0f}; goal <= 2000 ms)")  # fmt: skip
    print(f"a question opened from the table, its trajectory drawn: median {statistics.median(opened):.0f} ms")
    print(f"console errors: {len(errors)}; requests other than the file: {len(requests)}")


if __name__ == "__main__":
    main()
