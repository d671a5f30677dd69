"""Regenerate the README's picture, docs/media/dashboard.png: `sag2wb dashboard` (the default
example: encyclopedia question enc-33, semantic judge) served on 127.0.0.1, loaded in Debian's
headless chromium through Playwright at 1280x800; once every chart is drawn, the stepper is moved
to round 1 (where expansion brings the directors' pages) and the screen showing the score changes
and the seed -> term -> passage trajectory is saved.

    .venv/bin/python benchmarks/screenshot_readme.py                    # docs/media/dashboard.png
    .venv/bin/python benchmarks/screenshot_readme.py --out /tmp/d.png --round 2 --section ""

Needs /usr/bin/chromium (SAG2WB_CHROMIUM overrides it) and, for the Chinese titles of other
corpora, a CJK font (Debian fonts-noto-cjk). Written atomically; nothing else is written.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser import driver  # noqa: E402
from workbench.safeio import atomic_write_bytes  # noqa: E402

OUT = ROOT / "docs" / "media" / "dashboard.png"


def _serve(workdir: Path, argv: list[str]):
    port, log = driver.free_port(), workdir / "dashboard.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAG2WB_DASHBOARD_")}
    env["PYTHONPATH"] = str(ROOT)
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "workbench.cli", "dashboard", *argv, "--no-browser", f"--port={port}"],
            cwd=workdir,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    driver.wait_for_port(port, proc, log)
    return proc, f"http://127.0.0.1:{port}/"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT, help=f"the PNG to write (default {OUT.relative_to(ROOT)})")
    ap.add_argument("--round", type=int, default=1, help="the round to show (default 1)")
    ap.add_argument(
        "--section",
        default="slope",
        help="the view scrolled to the top (slope, trajectory, terms, pool, ...; '' for the page's top; default slope)",
    )
    ap.add_argument("dashboard_args", nargs="*", help="passed to `sag2wb dashboard` (default: its default example)")
    args = ap.parse_args(argv)
    if not Path(driver.CHROMIUM).exists():
        print(f"screenshot_readme: {driver.CHROMIUM} not found: apt-get install -y chromium", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        proc, url = _serve(Path(tmp), args.dashboard_args)
        try:
            browser = driver.launch_browser(p)
            session = driver.Session(browser)
            driver.load_voila(session, url)
            page = session.page
            if args.round:
                readout = page.locator(".sag2wb-round-slider .widget-readout")
                readout.click()
                readout.fill(str(args.round))
                readout.press("Enter")
                page.wait_for_function(
                    f"() => JSON.parse(document.querySelector('.sag2wb-state').dataset.state).round === {args.round}"
                )
                stale = driver.wait_agreement(page)
                if stale:
                    print(f"screenshot_readme: charts not drawn: {stale}", file=sys.stderr)
                    return 1
            page.mouse.move(0, 0)  # no hover label in the picture
            if args.section:  # the page scrolls inside JupyterLab's panel, not the window
                page.locator(f".sag2wb-{args.section}-section").first.evaluate("el => el.scrollIntoView(true)")
                page.wait_for_timeout(300)
            png = page.screenshot(type="png")
            session.close()
            browser.close()
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(args.out, png)
    size = f"{driver.VIEWPORT['width']}x{driver.VIEWPORT['height']}"
    print(f"screenshot_readme: wrote {args.out} ({len(png) / 1024:.0f} KiB, {size})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
