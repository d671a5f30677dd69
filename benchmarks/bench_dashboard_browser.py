"""The dashboard in a real browser, at full count: N fresh Voilà loads and M JupyterLab loads,
each followed by the seven actions of tests/browser/driver.py (slider move, next, L change,
H change, pin, judge switch, question switch). Prints the stale-chart count, the time from
an action to every chart agreeing with the stepper (median, p90) per front end, and the
kernels alive after the Voilà pages closed. No retries.

    .venv/bin/python benchmarks/bench_dashboard_browser.py            # 20 Voilà + 5 JupyterLab
    .venv/bin/python benchmarks/bench_dashboard_browser.py --voila 5 --lab 1
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser import driver  # noqa: E402


def _p90(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(0.9 * (len(xs) - 1)))]


def _report(name, loads, results):
    times = [r["seconds"] for r in results if r["seconds"] is not None]
    stale = [r for r in results if r["stale"]]
    print(f"{name}: {loads} loads x 7 actions = {len(results)} checks; stale: {len(stale)}")
    for r in stale:
        print(f"  stale after {r['action']}: {r['stale']}")
    if times:
        print(
            f"{name}: action -> all charts updated: median {statistics.median(times):.2f} s, "
            f"p90 {_p90(times):.2f} s, max {max(times):.2f} s (n={len(times)})"
        )
    draws = [r["draw_ms"] for r in results if r.get("draw_ms")]
    if draws:
        print(
            f"{name}: slowest chart's Plotly.react per action (browser only): median "
            f"{statistics.median(draws):.0f} ms, p90 {_p90(draws):.0f} ms, max {max(draws):.0f} ms"
        )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--voila", type=int, default=20)
    ap.add_argument("--lab", type=int, default=5)
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        browser = driver.launch_browser(p)
        if args.voila:
            results, load_s = [], []
            with driver.voila_server(Path(tmp) / "voila") as (url, proc, log):
                for _ in range(args.voila):
                    s = driver.Session(browser)
                    t = time.perf_counter()
                    driver.load_voila(s, url)
                    load_s.append(time.perf_counter() - t)
                    results += driver.run_actions(s.page)
                    s.close()
                deadline = time.monotonic() + 30
                while driver.kernel_processes(proc) and time.monotonic() < deadline:
                    time.sleep(0.2)
                live = driver.kernel_processes(proc)
                xsrf_403 = log.read_text(errors="replace").count("'_xsrf' argument missing")
            _report("Voilà", args.voila, results)
            print(f"Voilà: page load to charts drawn: median {statistics.median(load_s):.1f} s")
            print(
                f"Voilà: kernels alive after closing {args.voila} pages: {len(live)}; "
                f"'_xsrf argument missing' refusals in the log: {xsrf_403}"
            )
        if args.lab:
            results = []
            with driver.lab_server(Path(tmp) / "lab") as (url, proc, log):
                for _ in range(args.lab):
                    s = driver.Session(browser)
                    driver.load_lab(s, url)
                    results += driver.run_actions(s.page)
                    s.close()
                    driver.shutdown_lab_kernels(url)
            _report("JupyterLab", args.lab, results)
        browser.close()


if __name__ == "__main__":
    main()
