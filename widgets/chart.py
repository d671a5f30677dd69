"""A chart that cannot show a stale figure: the kernel sends the whole figure, the browser
redraws it with `Plotly.react`.

Why not plotly's FigureWidget: its in-place updates (`batch_update` → restyle/relayout
messages) were lost in Voilà on a loaded machine (10 of 12 fresh loads had a chart stuck on
the previous round; the Sankey never updated), and nothing re-sent them. Here there is one
synced trait, `figure` (data + layout as JSON). The front end keeps drawing until the
figure it drew is the model's current one, so a change that arrives while plotly is still
drawing is drawn right after; a lost message cannot leave a partial figure because there
are no partial messages.

plotly.js itself comes from the plotly package's own `plotly.min.js` (no CDN): one hidden
`PlotlyLoader` per dashboard carries it (4.8 MB, sent once per page rather than once per
chart) and publishes it on `globalThis.__sag2wbPlotly`; every `Chart` waits for it.

>>> import plotly.graph_objects as go
>>> chart = Chart(go.Figure(go.Bar(x=[1, 2], y=["a", "b"], orientation="h")), name="demo")
>>> chart.figure["data"][0]["type"]
'bar'
>>> chart.show(empty_figure("no seeds in round 0", height=200))  # an honest empty state
>>> chart.figure["layout"]["annotations"][0]["text"]
'no seeds in round 0'
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import anywidget
import plotly
import plotly.graph_objects as go
import plotly.utils
import traitlets

from . import assets

# the front end (widgets/*.js): plotlySlot() is shared by the loader and every chart
_SLOT_JS = assets.read("slot.js")
_CHART_JS = _SLOT_JS + assets.read("chart.js")
_LOADER_TAIL_JS = assets.read("plotly_loader.js")  # runs after plotly.min.js in the loader


@functools.cache
def _loader_js() -> str:
    source = (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_text(encoding="utf-8")
    # plotly.min.js is UMD: with a `module` object in scope it fills module.exports (and
    # touches no global `define`, which an AMD loader on the page would otherwise take).
    return "const module = { exports: {} };\n" + source + "\n;\n" + _SLOT_JS + _LOADER_TAIL_JS


class PlotlyLoader(anywidget.AnyWidget):
    """Hidden widget whose module is plotly.js from the installed plotly package."""

    _esm = traitlets.Unicode("").tag(sync=True)

    def __init__(self, **kwargs):
        super().__init__(_esm=_loader_js(), **kwargs)
        self.layout.display = "none"


@functools.cache
def loader() -> PlotlyLoader:
    """One loader per kernel; each dashboard places it (hidden) in its layout."""
    return PlotlyLoader()


def figure_json(fig) -> dict:
    """A go.Figure (or a dict) as plain JSON data (numpy arrays, NaN → null)."""
    if isinstance(fig, dict):  # plain dicts skip plotly's validation (the costly part)
        return json.loads(json.dumps(fig, cls=plotly.utils.PlotlyJSONEncoder))
    return json.loads(plotly.io.to_json(fig, validate=False, engine="json"))


def empty_figure(reason: str, height: int = 260, title: str = "") -> go.Figure:
    """A chart with no data that says why (no expansion, no seeds, an early stop)."""
    fig = go.Figure()
    fig.update_layout(
        height=height,
        margin=dict(l=10, r=10, t=30 if title else 10, b=10),
        autosize=True,
        title=dict(text=title, font=dict(size=12)) if title else None,
        xaxis=dict(visible=False),
        yaxis=dict(visible=False),
        plot_bgcolor="white",
        annotations=[
            dict(
                text=reason, x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False, font=dict(size=13, color="#666")
            )
        ],
    )
    return fig


class Chart(anywidget.AnyWidget):
    """A plotly chart drawn with `Plotly.react` from one synced figure.

    `show(fig, **meta)` replaces the whole figure; `meta` (round, run, ...) goes to
    `layout.meta` with a revision number, so a test can read what a drawn chart shows."""

    _esm = traitlets.Unicode(_CHART_JS).tag(sync=True)
    figure = traitlets.Dict().tag(sync=True)
    name = traitlets.Unicode("chart").tag(sync=True)

    def __init__(self, fig=None, name: str = "chart", **kwargs):
        super().__init__(name=name, **kwargs)
        self._rev = 0
        self.layout.width = "100%"
        self.layout.min_width = "0"
        if fig is not None:
            self.show(fig)

    def show(self, fig, **meta):
        self._rev += 1
        out = figure_json(fig)
        out.setdefault("layout", {})["meta"] = {"rev": self._rev, "chart": self.name, **meta}
        self.figure = out

    def download(self, fmt: str = "png", filename: str | None = None):
        """Ask the browser to save the drawn chart as PNG or SVG (plotly.js, offline)."""
        if fmt not in ("png", "svg"):
            raise ValueError(f"chart export format must be png or svg, got {fmt!r}")
        self.send({"download": fmt, "filename": filename or self.name})

    # the same read access FigureWidget gave tests and notebooks
    @property
    def data(self) -> list:
        return self.figure.get("data", [])

    @property
    def fig_layout(self) -> dict:
        return self.figure.get("layout", {})

    @property
    def title(self) -> str:
        t = self.fig_layout.get("title") or {}
        return t.get("text", "") if isinstance(t, dict) else str(t)
