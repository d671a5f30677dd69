"""The dashboard's chart views: seeds, terms, score slopes and the trajectory, each a
`chart.Chart` redrawn whole from the trace frames (views.py has the tables and the rest)."""

from __future__ import annotations

from typing import ClassVar

from plotly.subplots import make_subplots

from . import data
from .chart import Chart, empty_figure
from .model import TRACE
from .views import EXPANSION, GOLD, OTHER, SELECTED, UNSELECTED, View, run_label


def _facet_skeleton(titles: tuple) -> dict:
    """Axes and facet-title annotations of a 1×n row of bar charts sharing the y axis, from
    plotly's make_subplots (computed once; validating a figure per redraw cost ~80 ms)."""
    layout = make_subplots(
        rows=1, cols=len(titles), shared_yaxes=True, subplot_titles=list(titles), horizontal_spacing=0.015
    ).to_plotly_json()["layout"]
    return {k: v for k, v in layout.items() if k.startswith(("xaxis", "yaxis")) or k == "annotations"}


def _layout(height: int, title: str, **layout) -> dict:
    base = dict(
        height=height,
        margin=dict(l=10, r=10, t=48, b=10),
        autosize=True,
        font=dict(size=11),
        title=dict(text=title, font=dict(size=12), x=0.01, xanchor="left", y=0.98, yanchor="top"),
        legend=dict(orientation="h", x=0, y=-0.12, yanchor="top"),
    )
    base.update(layout)
    return base


class ChartView(View):
    """A view drawn by a `Chart`: every redraw sends the whole figure (see widgets/chart.py)."""

    chart_name = "chart"
    height = 260

    def build(self):
        return Chart(name=self.chart_name)

    def meta(self) -> dict:
        m = self.model
        return {"round": m.round, "run": m.generation, "question": m.question.id}

    def redraw(self):
        m = self.model
        if not m.frames:
            self.widget.show(empty_figure("no trajectory yet", self.height), **self.meta())
            return
        self.widget.show(self.figure(), **self.meta())

    def figure(self):  # pragma: no cover - overridden
        raise NotImplementedError


class SeedsView(ChartView):
    title = "Seeds of the round and their weights"
    chart_name = "seeds"

    def figure(self):
        m = self.model
        df = data.seed_bars(m.frames, m.round)
        if df.empty:
            reason = (
                "round 0 is plain BM25: it has no seeds"
                if m.round == 0
                else f"round {m.round} has no seeds (no passage of round {m.round - 1} qualified)"
            )
            return empty_figure(reason, self.height, title=f"round {m.round}: no seeds")
        labels = [
            ("★ " if g is True and m.show_gold else "") + f"{int(r) if r == r else '?'}. {data.short_label(t, 34)}"
            for t, r, g in zip(df["title"], df["previous_rank"], df["gold"])
        ]
        # plain dicts, not go.Figure: plotly's validation cost more than everything else here
        layout = _layout(
            self.height,
            f"round {m.round}: seeds (ranked in round {m.round - 1})",
            barmode="group",
            xaxis=dict(range=[0, 1.05]),
            yaxis=dict(autorange="reversed", automargin=True),
        )
        traces = [
            dict(
                type="bar",
                name="seed score",
                y=labels,
                x=[float(v) for v in df["seed_score"]],
                marker=dict(color=SELECTED),
                orientation="h",
                hovertemplate="%{y}<br>seed score %{x:.3f}<extra></extra>",
            ),
            dict(
                type="bar",
                name="seed weight w(d) (when it won a term)",
                y=labels,
                x=[None if v != v else float(v) for v in df["seed_weight"]],
                marker=dict(color=EXPANSION),
                orientation="h",
                hovertemplate="%{y}<br>seed weight %{x:.3f}<extra></extra>",
            ),
        ]
        return {"data": traces, "layout": layout}


class TermsView(ChartView):
    """Term priorities faceted into their factors; selected terms in blue, the rest pale."""

    title = "Term priorities = (1+ln tf) · idf · (1+c) · w"
    # what the letters mean, under the figure title (two short lines: plotly does not wrap)
    caption = (
        "tf: times the seed uses the term · idf: how rare it is in the corpus · "
        "w: seed weight = 0.5 + 0.5 · seed score / best seed score",
        "c: query connection = idf summed over the question's words in the seed sentence that holds "
        "the term; 1+c so a term whose sentence shares none still counts",
    )
    chart_name = "terms"
    facets: ClassVar[list[str]] = [*data.TERM_COMPONENTS, "priority"]
    facet_titles: ClassVar[list[str]] = [
        "1+ln tf (count)",
        "idf (rarity)",
        "1+c (question link)",
        "w (seed weight)",
        "priority",
    ]
    height = 470

    def figure(self):
        m = self.model
        df = data.term_components(m.frames, m.round, top=25)
        if df.empty:
            reason = (
                "round 0 is plain BM25: no expansion terms yet"
                if m.round == 0
                else f"round {m.round}: no candidate terms"
            )
            return empty_figure(reason, self.height, title=f"round {m.round}: 0 selected")
        colors = [SELECTED if s else UNSELECTED for s in df["selected"]]
        hover = [
            f"{shown} — token form “{t}” (seed: {data.short(st, 30)}; {res or 'not searched'})"
            for shown, t, st, res in zip(df["shown"], df["term"], df["seed_title"], df["resolution"])
        ]
        # the round and count go in the figure title (left): as the last facet's title it was
        # cut off at the right edge in JupyterLab
        title = (
            f"round {m.round}: {int(df['selected'].sum())} selected (dark bars); the top {len(df)} terms by priority"
        )
        title += "".join(f"<br><span style='font-size:10px;color:#555'>{line}</span>" for line in self.caption)
        labels = list(df["label"])
        layout = {**_facet_skeleton(tuple(self.facet_titles)), **_layout(self.height, title)}
        # figure title and caption, then facet titles below the toolbar; room below for the x tick labels
        layout["margin"] = dict(l=10, r=10, t=92, b=30)
        layout["title"] = {**layout["title"], "y": 0.965}  # three lines: the first one stays inside the chart
        traces = []
        for i, col in enumerate(self.facets):
            suffix = "" if i == 0 else str(i + 1)
            layout["xaxis" + suffix] = {**layout["xaxis" + suffix], "automargin": True}
            layout["yaxis" + suffix] = {
                **layout["yaxis" + suffix],
                "autorange": "reversed",
                "automargin": True,
                "categoryorder": "array",
                "categoryarray": labels,
            }
            traces.append(
                dict(
                    type="bar",
                    orientation="h",
                    y=labels,
                    x=[float(v) for v in df[col]],
                    marker=dict(color=colors),
                    hovertext=hover,
                    name=self.facet_titles[i],
                    showlegend=False,
                    xaxis="x" + suffix,
                    yaxis="y" + suffix,
                    hovertemplate="%{hovertext}<br>" + self.facet_titles[i] + " %{x:.3f}<extra></extra>",
                )
            )
        return {"data": traces, "layout": layout}


class SlopeView(ChartView):
    """Scores across rounds, one line per passage: gold and expansion entries highlighted."""

    title = "Score changes across rounds"
    chart_name = "slope"
    styles: ClassVar[dict[str, tuple[str, int]]] = {
        "other": (OTHER, 1),
        "entered by expansion": (EXPANSION, 2),
        "gold": (GOLD, 3),
    }
    height = 300

    def figure(self):
        m = self.model
        lines = data.slope_lines(m.frames)
        layout = _layout(
            self.height,
            f"scores by round; dotted line: round {m.round}",
            xaxis=dict(dtick=1, title=dict(text="round"), range=[-0.2, max(1, m.rounds_count - 1) + 0.2]),
            # automargin and a standoff: the title sits left of the tick labels, not on the 0.5
            yaxis=dict(title=dict(text="score", standoff=8), range=[-0.02, 1.02], automargin=True),
            # below the x-axis title, not over it
            legend=dict(orientation="h", x=0, y=-0.3, yanchor="top"),
            margin=dict(l=10, r=10, t=48, b=60),
            shapes=[
                dict(
                    type="line",
                    x0=m.round,
                    x1=m.round,
                    y0=0,
                    y1=1,
                    yref="paper",
                    line=dict(color="#444", dash="dot", width=1),
                    name="shown round",
                )
            ],
        )
        traces = []
        for name, (color, width) in self.styles.items():
            if name == "gold" and not m.show_gold:
                continue
            x, y, text = lines[name]
            traces.append(
                dict(
                    type="scatter",
                    mode="lines+markers",
                    name=name,
                    x=x,
                    y=y,
                    hovertext=text,
                    line=dict(color=color, width=width),
                    marker=dict(size=4 + width),
                    hovertemplate="%{hovertext}<br>round %{x}: %{y:.3f}<extra>" + name + "</extra>",
                )
            )
        return {"data": traces, "layout": layout}


class TrajectoryView(ChartView):
    """Sankey passage → term → passage across rounds: the bridge a learner should see."""

    events = (TRACE,)
    title = "Trajectory: seed passage → term → retrieved passage"
    chart_name = "trajectory"
    height = 380

    def meta(self) -> dict:
        m = self.model
        return {"run": m.generation, "question": m.question.id}

    def figure(self):
        m = self.model
        d = data.trajectory_links(m.frames)
        if not m.show_gold:
            d["labels"] = [label.replace("★ ", "") for label in d["labels"]]
        label = run_label(m)
        if not d["labels"]:
            return empty_figure(data.no_trajectory_reason(m.frames, m.trace), self.height, title=label)
        sankey = dict(
            type="sankey",
            arrangement="snap",
            node=dict(
                pad=8,
                thickness=12,
                label=d["labels"],
                color=d["colors"],
                customdata=d["hover"],
                hovertemplate="%{customdata}<extra></extra>",
            ),
            link=dict(
                source=d["source"],
                target=d["target"],
                value=d["value"],
                label=d["label"],
                color=d["link_colors"],
                hovertemplate="%{label}<extra></extra>",
            ),
            domain=dict(x=[0, 1], y=[0.08, 1]),
        )
        layout = _layout(self.height, label, margin=dict(l=10, r=10, t=48, b=10))
        # a Sankey has no plotly legend: the colour key is a line of text under the diagram
        layout["annotations"] = [
            dict(
                text=data.sankey_legend(m.show_gold),
                name="legend",
                x=0,
                y=0,
                xref="paper",
                yref="paper",
                xanchor="left",
                yanchor="bottom",
                showarrow=False,
                font=dict(size=11, color="#333"),
            )
        ]
        return {"data": [sankey], "layout": layout}
