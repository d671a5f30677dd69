"""Export from the dashboard: the shown trace as JSON, a self-contained HTML page of it (the
page `sag2wb report` writes: open it anywhere, no kernel), its frames as CSV (or Parquet when
pyarrow is installed), and charts as PNG/SVG.

Files go to a folder the researcher names (default `exports/`), with names that say what
they hold and never replace an existing file (a numbered suffix instead); each is recorded
as written by sag2wb in the folder's `.sag2wb-outputs.jsonl` (workbench/safeio.py). Charts are
exported by the browser itself (plotly.js `downloadImage`, offline): the camera button in a
chart's toolbar saves PNG, the one beside it SVG, or the buttons here for all four charts.

>>> from widgets import DashboardModel
>>> model = DashboardModel(index, questions, judge="lexical")
>>> export_trace(model, "exports")
[PosixPath('exports/docs-01_lexical_run1.trace.json')]
>>> export_trace(model, "exports")      # the first file stays
[PosixPath('exports/docs-01_lexical_run1-2.trace.json')]
>>> export_page(model, "exports")
[PosixPath('exports/docs-01_lexical_run1.html')]
>>> [p.name for p in export_frames(model, "exports")][:2]
['docs-01_lexical_run1.passages.csv', 'docs-01_lexical_run1.terms.csv']
"""

from __future__ import annotations

import html
import importlib.util
import os
import re
from pathlib import Path

import ipywidgets as w

from workbench.report import trajectory_html
from workbench.safeio import Outputs, atomic_write_bytes, atomic_write_text, check_output


def parquet_available() -> bool:
    return importlib.util.find_spec("pyarrow") is not None


def _stem(model) -> str:
    raw = f"{model.question.id}_{model.trace.judge}_run{model.generation}"
    return re.sub(r"[^\w.-]+", "-", raw)


def _fresh(path: Path) -> Path:
    """`path`, or `path` with -2, -3, ... when it exists: an export never replaces a file."""
    candidate, n = path, 1
    while os.path.lexists(candidate):  # a dangling symlink is someone's too
        n += 1
        candidate = path.with_name(f"{path.name.split('.')[0]}-{n}{''.join(path.suffixes)}")
    return check_output(candidate, what="export")


def _folder(folder) -> Path:
    """The export folder, checked as every output is (workbench/safeio.py): not a file."""
    io = Outputs(force=None)
    path = io.output("export folder", folder, kind="dir")
    io.check()
    return path


def export_trace(model, folder) -> list[Path]:
    """The current trace as canonical JSON (the engine's own `Trace.to_json`)."""
    folder = _folder(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = _fresh(folder / f"{_stem(model)}.trace.json")
    atomic_write_text(path, model.trace.to_json() + "\n", record="dashboard export")
    return [path]


def export_page(model, folder) -> list[Path]:
    """The current trace as a self-contained HTML page (workbench/report/: the trajectory page),
    with the passages' text from the dashboard's index."""
    folder = _folder(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = _fresh(folder / f"{_stem(model)}.html")
    atomic_write_text(path, trajectory_html(model.trace, model.index), record="dashboard export")
    return [path]


def export_frames(model, folder, fmt: str = "csv") -> list[Path]:
    """One file per frame (passages, terms, seeds, rounds, context, ranking)."""
    if fmt == "parquet" and not parquet_available():
        raise RuntimeError("Parquet export needs pyarrow (pip install pyarrow); CSV works without it")
    folder = _folder(folder)
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, frame in model.frames.items():
        path = _fresh(folder / f"{_stem(model)}.{name}.{fmt}")
        if fmt == "csv":
            atomic_write_text(path, frame.to_csv(index=False), record="dashboard export")
        else:
            frame = frame.copy()
            for col in frame.columns:  # dict/list cells (judge components) as JSON text
                if frame[col].map(lambda v: isinstance(v, (dict, list))).any():
                    frame[col] = frame[col].map(lambda v: None if v is None else __import__("json").dumps(v))
            atomic_write_bytes(path, frame.to_parquet(index=False), record="dashboard export")
        out.append(path)
    return out


class ExportControls:
    """Folder + buttons; the chart buttons ask each chart's front end to download itself."""

    def __init__(self, model, charts: dict):
        self.model = model
        self.charts = charts
        self.folder = w.Text(
            value="exports", description="folder", layout=w.Layout(width="260px"), style={"description_width": "50px"}
        )
        self.trace_button = w.Button(description="trace JSON", layout=w.Layout(width="110px"))
        self.page_button = w.Button(
            description="HTML page",
            layout=w.Layout(width="105px"),
            tooltip="one self-contained page of this trajectory: opens anywhere, no kernel (sag2wb report)",
        )
        self.csv_button = w.Button(description="frames CSV", layout=w.Layout(width="110px"))
        has_parquet = parquet_available()
        self.parquet_button = w.Button(
            description="frames Parquet",
            layout=w.Layout(width="125px"),
            disabled=not has_parquet,
            tooltip="" if has_parquet else "needs pyarrow (pip install pyarrow)",
        )
        self.png_button = w.Button(
            description="charts PNG",
            layout=w.Layout(width="105px"),
            tooltip="your browser saves each chart (offline, plotly.js)",
        )
        self.svg_button = w.Button(
            description="charts SVG",
            layout=w.Layout(width="105px"),
            tooltip="your browser saves each chart (offline, plotly.js)",
        )
        self.message = w.HTML()
        self.message.add_class("sag2wb-export-message")
        self.trace_button.on_click(lambda _: self._run(export_trace))
        self.page_button.on_click(lambda _: self._run(export_page))
        self.csv_button.on_click(lambda _: self._run(lambda m, f: export_frames(m, f, "csv")))
        self.parquet_button.on_click(lambda _: self._run(lambda m, f: export_frames(m, f, "parquet")))
        self.png_button.on_click(lambda _: self._charts("png"))
        self.svg_button.on_click(lambda _: self._charts("svg"))
        note = "" if has_parquet else " · Parquet needs pyarrow, not installed"
        self.widget = w.VBox(
            [
                w.HBox(
                    [
                        self.folder,
                        self.trace_button,
                        self.page_button,
                        self.csv_button,
                        self.parquet_button,
                        self.png_button,
                        self.svg_button,
                    ],
                    layout=w.Layout(flex_flow="row wrap", align_items="center"),
                ),
                w.HTML(
                    f"<span class='sag2wb-muted' style='font-size:11px'>files go to the folder on "
                    f"the kernel's machine; charts download in the browser{note}</span>"
                ),
                self.message,
            ]
        )

    def _run(self, fn):
        try:
            paths = fn(self.model, self.folder.value.strip() or "exports")
        except (OSError, RuntimeError, ValueError) as exc:
            self.message.value = f"<span class='sag2wb-error'>✗ {html.escape(str(exc))}</span>"
            return
        self.message.value = (
            "<span style='font-size:12px'>wrote "
            + ", ".join(f"<code>{html.escape(str(p))}</code>" for p in paths)
            + "</span>"
        )

    def _charts(self, fmt: str):
        for name, chart in self.charts.items():
            chart.download(fmt, f"{_stem(self.model)}.{name}")
        self.message.value = (
            f"<span style='font-size:12px'>asked the browser to save {len(self.charts)} {fmt.upper()} files</span>"
        )
