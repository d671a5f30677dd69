"""Drive the dashboard in a real browser (Debian chromium via Playwright) in Voilà and in
JupyterLab, and check after every action that every chart shows the state the stepper
shows. Shared by tests/browser/test_dashboard_browser.py (a reduced count) and
benchmarks/bench_dashboard_browser.py (20 Voilà + 5 JupyterLab loads, timings).

What "agrees" means (read from the plotly DOM: the plotted div's `.data` / `.layout`):
- every chart's `layout.meta.run` is the stepper's run number (its trace), and the round
  charts' `layout.meta.round` is the stepper's round;
- the chart finished drawing that figure (`data-rev` == `layout.meta.rev`);
- seeds: one bar per seed of the round and the title names the round (or an empty chart
  saying why); terms: the blue (selected) bars are the stepper's selected terms and the
  title says "round r: k selected"; slope: the dotted round marker sits on the
  round; Sankey: its title is the stepper's run label (judge, L, H).
No scenario is retried: a chart that does not agree within the step timeout counts as stale.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "dashboard.ipynb"
CHROMIUM = os.environ.get("SAG2WB_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1280, "height": 800}
LOAD_TIMEOUT_MS = 120_000  # a kernel starts, the sample index is built, the notebook runs
STEP_TIMEOUT_MS = 30_000
CHARTS = ("seeds", "terms", "slope", "trajectory")
SELECTED_COLOR = "#1f77b4"

# Runs in the page: {chart: null when it agrees with the stepper, else what is wrong}.
AGREEMENT_JS = """
() => {
  const stateEl = document.querySelector('.sag2wb-state');
  if (!stateEl) return {stepper: 'no stepper state'};
  const st = JSON.parse(stateEl.dataset.state);
  const out = {};
  const title = (gd) => ((gd.layout.title || {}).text || '');
  const annotations = (gd) => (gd.layout.annotations || []).map(a => a.text || '');
  for (const name of __CHARTS__) {
    const gd = document.querySelector(`.sag2wb-${name}-section .sag2wb-chart`);
    if (!gd || !gd.layout || !gd.data) { out[name] = 'not drawn'; continue; }
    const meta = gd.layout.meta || {};
    const problems = [];
    if (gd.dataset.rev !== String(meta.rev)) problems.push(`drawing rev ${meta.rev} (drawn ${gd.dataset.rev})`);
    if (meta.run !== st.run) problems.push(`run ${meta.run} != stepper run ${st.run}`);
    if (meta.question !== st.question) problems.push(`question ${meta.question} != ${st.question}`);
    if (name !== 'trajectory' && meta.round !== st.round) problems.push(`round ${meta.round} != ${st.round}`);
    if (name === 'seeds') {
      if (!title(gd).startsWith(`round ${st.round}:`)) problems.push(`title "${title(gd)}"`);
      const n = gd.data.length ? (gd.data[0].y || []).length : 0;
      if (n !== st.seeds) problems.push(`${n} seed bars, stepper has ${st.seeds}`);
    } else if (name === 'terms') {
      const k = st.selected.length;
      if (k) {
        const last = gd.data[gd.data.length - 1] || {};
        const colors = (last.marker || {}).color || [];
        const blue = (last.y || []).filter((_, i) => colors[i] === '__SELECTED__')
          .map(label => label.split(' → ')[0]);
        if (JSON.stringify([...blue].sort()) !== JSON.stringify([...st.selected].sort()))
          problems.push(`selected bars ${JSON.stringify(blue)} != ${JSON.stringify(st.selected)}`);
        if (!title(gd).startsWith(`round ${st.round}: ${k} selected`)) problems.push(`title "${title(gd)}"`);
      } else if (gd.data.length) problems.push('bars drawn but the stepper has no selected terms');
    } else if (name === 'slope') {
      const shape = (gd.layout.shapes || [])[0];
      if (!shape || shape.x0 !== st.round) problems.push(`round marker at ${shape && shape.x0}`);
      if (!title(gd).includes(`round ${st.round}`)) problems.push(`title "${title(gd)}"`);
    } else if (name === 'trajectory') {
      if (title(gd) !== st.run_label) problems.push(`title "${title(gd)}" != "${st.run_label}"`);
      const sankey = gd.data.length && gd.data[0].type === 'sankey';
      if (!sankey && !annotations(gd).length) problems.push('neither a diagram nor a reason');
    }
    out[name] = problems.length ? problems.join('; ') : null;
  }
  return out;
}
""".replace("__CHARTS__", json.dumps(CHARTS)).replace("__SELECTED__", SELECTED_COLOR)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, log: Path, timeout: float = 90.0):
    # a TCP connect, not a GET: a GET on Voilà would start a kernel
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"server did not listen on 127.0.0.1:{port} within {timeout:.0f} s")


def _stop(proc: subprocess.Popen):
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _env() -> dict:
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "SAG2WB_DASHBOARD_CORPUS": str(ROOT / "sample_corpora" / "internal_docs"),
    }


@contextmanager
def voila_server(workdir: Path):
    """`python -m widgets.voila` on a copy of the dashboard notebook (the repo copy is never
    written); yields (url, server process)."""
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.copy(NOTEBOOK, workdir / "dashboard.ipynb")
    port, log = free_port(), workdir / "voila.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "widgets.voila",
                str(workdir / "dashboard.ipynb"),
                "--no-browser",
                f"--port={port}",
                "--Voila.ip=127.0.0.1",
                "--Voila.port_retries=0",
            ],
            cwd=workdir,
            env=_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for_port(port, proc, log)
        yield f"http://127.0.0.1:{port}/", proc, log
    finally:
        _stop(proc)


LAB_TOKEN = "sag2wb-browser-test"


@contextmanager
def lab_server(workdir: Path):
    """JupyterLab serving a copy of the dashboard notebook from a temp folder (its own
    settings and workspace dirs, so no state leaks between loads or into ~/.jupyter)."""
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.copy(NOTEBOOK, workdir / "dashboard.ipynb")
    port, log = free_port(), workdir / "lab.log"
    for sub in ("settings", "workspaces", "runtime"):
        (workdir / sub).mkdir(exist_ok=True)
    env = {**_env(), "JUPYTER_RUNTIME_DIR": str(workdir / "runtime")}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyterlab",
                "--no-browser",
                f"--port={port}",
                "--ServerApp.ip=127.0.0.1",
                "--ServerApp.port_retries=0",
                "--allow-root",
                f"--IdentityProvider.token={LAB_TOKEN}",
                f"--ServerApp.root_dir={workdir}",
                f"--LabApp.user_settings_dir={workdir / 'settings'}",
                f"--LabApp.workspaces_dir={workdir / 'workspaces'}",
                "--ServerApp.open_browser=False",
            ],
            cwd=workdir,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for_port(port, proc, log)
        yield f"http://127.0.0.1:{port}/", proc, log
    finally:
        _stop(proc)


def kernel_processes(server: subprocess.Popen) -> list[int]:
    """Live kernel processes started by this server (its ipykernel children)."""
    import psutil

    try:
        children = psutil.Process(server.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    out = []
    for c in children:
        try:
            if "ipykernel_launcher" in " ".join(c.cmdline()) and c.status() != psutil.STATUS_ZOMBIE:
                out.append(c.pid)
        except psutil.NoSuchProcess:
            pass
    return out


def require_browser():
    """Skip without Debian's chromium, or fail when SAG2WB_REQUIRE_BROWSER=1 (CI: a missing browser is a failure)."""
    import pytest

    if not Path(CHROMIUM).exists():
        reason = f"{CHROMIUM} not found: install Debian's chromium (apt-get install -y chromium)"
        if os.environ.get("SAG2WB_REQUIRE_BROWSER") == "1":
            pytest.fail(reason + " (SAG2WB_REQUIRE_BROWSER=1)")
        pytest.skip(reason)


def launch_browser(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)


def offline_page(browser):
    """A fresh context and page for a file:// page: console and page errors recorded in
    seen["errors"], and every request that is not a file recorded in seen["requests"] and aborted
    (the network is blocked). Returns (context, page, seen); close the context when done."""
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    seen: dict = {"errors": [], "requests": []}
    page.on("console", lambda m: seen["errors"].append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: seen["errors"].append(str(e)))

    def route(r):
        if r.request.url.startswith("file://"):
            r.continue_()
        else:
            seen["requests"].append(r.request.url)
            r.abort()

    context.route("**/*", route)
    return context, page, seen


class Session:
    """One loaded page: records console errors and off-host requests."""

    def __init__(self, browser):
        self.context = browser.new_context(viewport=VIEWPORT, accept_downloads=True)
        self.page = self.context.new_page()
        self.page.set_default_timeout(STEP_TIMEOUT_MS)
        self.console_errors: list[str] = []
        self.warnings: list[str] = []
        self.offhost: list[str] = []
        self.page.on("console", self._console)
        self.page.on("request", self._request)
        # JupyterLab asks "leave with unsaved changes?" on unload: leave (the notebook is a copy)
        self.page.on("dialog", lambda dialog: dialog.accept())

    def _console(self, msg):
        if msg.type == "error":
            self.console_errors.append(msg.text)
        elif msg.type == "warning":
            self.warnings.append(msg.text)

    def _request(self, request):
        url = request.url
        if url.startswith("http") and not url.startswith("http://127.0.0.1"):
            self.offhost.append(url)

    def close(self, run_before_unload: bool = True):
        try:
            self.page.close(run_before_unload=run_before_unload)
        finally:
            time.sleep(0.5)  # let the unload beacon go out before the context goes away
            self.context.close()


# webpack module federation's console warnings when an extension needs newer shared
# packages than the page provides ("Unsatisfied version 4.2.5 from _JUPYTERLAB.CORE_OUTPUT of
# shared singleton module @jupyterlab/services (required ^4.6.2)", "No satisfying version ...")
VERSION_MISMATCH = ("Unsatisfied version", "No satisfying version")


def version_mismatch_warnings(session: Session) -> list[str]:
    """The page's front-end version-mismatch warnings so far."""
    return [w for w in session.warnings if w.startswith(VERSION_MISMATCH)]


def load_voila(session: Session, url: str):
    from playwright.sync_api import expect

    session.page.goto(url, timeout=LOAD_TIMEOUT_MS)
    expect(session.page.locator(".sag2wb-dashboard")).to_be_visible(timeout=LOAD_TIMEOUT_MS)
    wait_agreement(session.page, LOAD_TIMEOUT_MS)


def load_lab(session: Session, url: str):
    """Open the notebook in JupyterLab's UI (file browser open) and run all cells."""
    from playwright.sync_api import expect

    page = session.page
    page.goto(f"{url}lab/tree/dashboard.ipynb?reset&token={LAB_TOKEN}", timeout=LOAD_TIMEOUT_MS)
    expect(page.locator(".jp-NotebookPanel")).to_be_visible(timeout=LOAD_TIMEOUT_MS)
    expect(page.get_by_text("Python 3 (ipykernel) | Idle")).to_be_visible(timeout=LOAD_TIMEOUT_MS)
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
    expect(page.locator(".sag2wb-dashboard")).to_be_visible(timeout=LOAD_TIMEOUT_MS)
    wait_agreement(page, LOAD_TIMEOUT_MS)


def disagreements(page) -> dict:
    return {k: v for k, v in page.evaluate(AGREEMENT_JS).items() if v}


def state(page) -> dict:
    return json.loads(page.locator(".sag2wb-state").get_attribute("data-state"))


def wait_agreement(page, timeout_ms: int = STEP_TIMEOUT_MS) -> dict:
    """Wait until every chart agrees with the stepper; return what still disagrees at the
    timeout ({} when all agree)."""
    try:
        page.wait_for_function(
            f"() => {{ const r = ({AGREEMENT_JS})(); return Object.values(r).every(v => v === null); }}",
            timeout=timeout_ms,
            polling=50,
        )
        return {}
    except Exception:  # playwright's TimeoutError: report what is stale instead
        return disagreements(page)


def _set_int(page, name: str, value: int):
    field = page.locator(f".sag2wb-param-{name} input")
    field.fill(str(value))
    field.press("Enter")


def _select_other(page, css: str):
    select = page.locator(f"{css} select")
    options = select.locator("option")
    current = select.input_value()
    values = [options.nth(i).get_attribute("value") for i in range(options.count())]
    labels = [options.nth(i).inner_text() for i in range(options.count())]
    for v, label in zip(values, labels):
        if v != current:
            select.select_option(value=v)
            return label
    raise AssertionError(f"{css}: no other option than {current!r}")


def _judge_to(page, name: str):
    page.locator(".sag2wb-judge select").select_option(label=name)


def actions():
    """(name, do(page, before_state), done(state_before, state_now)) for the seven steps."""

    def slider(page, st):
        readout = page.locator(".sag2wb-round-slider .widget-readout")
        readout.click()
        readout.fill("1")
        readout.press("Enter")

    def nxt(page, st):
        page.locator(".sag2wb-next").click()

    def pin(page, st):
        page.locator(".sag2wb-pin").click()

    return [
        ("slider move", slider, lambda a, b: b["round"] == 1),
        ("next", nxt, lambda a, b: b["round"] == min(2, a["round"] + 1) and b["round"] != a["round"]),
        ("L change", lambda p, st: _set_int(p, "L", 5), lambda a, b: b["run"] > a["run"]),
        ("H change", lambda p, st: _set_int(p, "H", 1), lambda a, b: b["run"] > a["run"]),
        ("pin", pin, lambda a, b: b["run"] > a["run"]),
        ("judge switch", lambda p, st: _judge_to(p, "bm25"), lambda a, b: b["run"] > a["run"]),
        (
            "question switch",
            lambda p, st: _select_other(p, ".sag2wb-question"),
            lambda a, b: b["question"] != a["question"],
        ),
    ]


def run_actions(page, on_step=None) -> list[dict]:
    """Run the seven actions; for each: seconds from the action to every chart agreeing
    (None when some chart stayed stale) and what was stale."""
    results = []
    for name, do, done in actions():
        before = state(page)
        start = time.perf_counter()
        do(page, before)
        deadline = time.monotonic() + STEP_TIMEOUT_MS / 1000
        while not done(before, state(page)) and time.monotonic() < deadline:
            page.wait_for_timeout(50)
        stale = wait_agreement(page)
        seconds = time.perf_counter() - start
        after = state(page)
        if not done(before, after):
            stale = {**stale, "stepper": f"{name}: stepper went from {before} to {after}"}
        draw_ms = page.evaluate(
            "() => Math.max(0, ...[...document.querySelectorAll('.sag2wb-chart')]"
            ".map(d => Number(d.dataset.drawMs || 0)))"
        )
        results.append({"action": name, "seconds": None if stale else seconds, "stale": stale, "draw_ms": draw_ms})
        if on_step:
            on_step(name, page)
    return results


def shutdown_lab_kernels(url: str):
    """JupyterLab keeps a kernel after its tab closes: end them through the REST API."""
    import httpx

    headers = {"Authorization": f"token {LAB_TOKEN}"}
    with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
        for k in client.get("api/kernels").json():
            client.delete(f"api/kernels/{k['id']}")


# Runs in the page: the chart text that cannot be read — two text elements of one chart
# overlapping (axis titles, tick labels, titles, annotations, legend, Sankey labels) or a
# text element outside the chart's visible SVG (a clipped bottom tick label).
TEXT_PROBLEMS_JS = """
(charts) => {
  const out = [];
  const box = (e) => e.getBoundingClientRect();
  const overlap = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > 1
    && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 1;
  for (const name of charts) {
    const gd = document.querySelector(`.sag2wb-${name}-section .sag2wb-chart`);
    const svg = gd && gd.querySelector('svg.main-svg');
    if (!svg) { out.push(`${name}: not drawn`); continue; }
    const area = box(svg);
    const texts = [...gd.querySelectorAll('svg text')]
      .filter(e => e.textContent.trim() && box(e).width > 0 && getComputedStyle(e).visibility !== 'hidden');
    texts.forEach((e, i) => {
      const b = box(e);
      if (b.bottom > area.bottom + 1 || b.top < area.top - 1 || b.left < area.left - 1 || b.right > area.right + 1)
        out.push(`${name}: "${e.textContent.slice(0, 40)}" outside the chart's area `
          + `(text ${[b.left, b.top, b.right, b.bottom].map(Math.round)}, `
          + `chart ${[area.left, area.top, area.right, area.bottom].map(Math.round)})`);
      for (const f of texts.slice(i + 1)) {
        if (e.contains(f) || f.contains(e)) continue;
        if (overlap(b, box(f)))
          out.push(`${name}: "${e.textContent.slice(0, 40)}" overlaps "${f.textContent.slice(0, 40)}"`);
      }
    });
  }
  return out;
}
"""


def chart_text_problems(page, charts=CHARTS) -> list[str]:
    return page.evaluate(TEXT_PROBLEMS_JS, list(charts))


def chart_fonts(page, name: str) -> list[float]:
    """Font sizes (px) of one chart's text elements."""
    return page.evaluate(
        "(name) => [...document.querySelectorAll(`.sag2wb-${name}-section .sag2wb-chart svg text`)]"
        ".filter(e => e.textContent.trim()).map(e => parseFloat(getComputedStyle(e).fontSize))",
        name,
    )
