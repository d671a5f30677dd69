"""Views: each subscribes to the DashboardModel and redraws from the trace frames.

Tables are ipywidgets.HTML; charts are plotly FigureWidgets updated in place
(`batch_update`), never re-created, so the browser keeps its zoom and the redraw is cheap.
"""
from __future__ import annotations

import html
from copy import deepcopy

import ipywidgets as w
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from . import data
from .model import ROUND, STATUS, TRACE

GOLD = "#2ca02c"
EXPANSION = "#ff7f0e"
OTHER = "#b0b0b0"
SELECTED = "#1f77b4"
UNSELECTED = "#c6d4e1"

TABLE_CSS = (
    "<style>.sag2wb-table{border-collapse:collapse;font-size:12px;width:100%;table-layout:auto}"
    ".sag2wb-table th{background:#f2f2f2;text-align:left;padding:2px 5px;position:sticky;top:0}"
    ".sag2wb-table td{padding:1px 5px;border-bottom:1px solid #eee;white-space:nowrap;overflow:hidden;"
    "text-overflow:ellipsis;max-width:260px}"
    ".sag2wb-box{max-height:300px;overflow-y:auto;overflow-x:hidden}"
    ".sag2wb-gold{color:#2ca02c;font-weight:bold}.sag2wb-error{color:#b00020;font-weight:bold}"
    ".sag2wb-muted{color:#777}</style>"
)


INT_COLUMNS = {"rank", "retrieval_rank", "position", "rank_before_diversity", "previous_rank"}


def fmt(v, digits=3, integer=False) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return ""
    if integer and isinstance(v, (int, float)) and not isinstance(v, bool):
        return str(int(v))
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    if isinstance(v, bool):
        return "★" if v else ""
    return html.escape(str(v))


def gold_row(rec: dict) -> str:
    """Row class of a table row: gold passages are highlighted."""
    return "sag2wb-gold" if rec.get("gold") is True else ""


def html_table(df, columns, headers=None, row_class=None, box=True, cls="") -> str:
    headers = headers or columns
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    rows = []
    for rec in df.to_dict("records"):
        klass = row_class(rec) if row_class else ""
        cells = "".join(
            f"<td title='{html.escape(str(rec.get(c, '')))}'>{fmt(rec.get(c), integer=c in INT_COLUMNS)}</td>"
            for c in columns)
        rows.append(f"<tr class='{klass}'>{cells}</tr>")
    table = f"<table class='sag2wb-table {cls}'><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    return TABLE_CSS + (f"<div class='sag2wb-box'>{table}</div>" if box else table)


def sync_figure_state(fig: go.FigureWidget):
    """Copy the figure's data and layout into its synced widget state.

    plotly's FigureWidget only refreshes `_widget_data`/`_widget_layout` in its own
    `_repr_mimebundle_`; inside a VBox that is never called, so a view created later (Voilà,
    a second display) would draw the empty figure it was built with. Updates made with
    `batch_update` still reach live views as restyle/relayout messages."""
    fig._widget_layout = deepcopy(fig._layout_obj._props)
    fig._widget_data = deepcopy(fig._data)


def _figure(height: int, **layout) -> go.FigureWidget:
    fig = go.FigureWidget()
    layout = {"legend": dict(orientation="h", y=-0.15), **layout}
    fig.update_layout(height=height, margin=dict(l=10, r=10, t=30, b=10), autosize=True, font=dict(size=11),
                      **layout)
    return fig


class View:
    """Base: a widget that redraws on the events it cares about."""

    events = (TRACE, ROUND)
    title = ""

    def __init__(self, model):
        self.model = model
        self.widget = self.build()
        model.subscribe(self._on_event)
        self.redraw()
        if isinstance(self.widget, go.FigureWidget):
            sync_figure_state(self.widget)

    def _on_event(self, model, what):
        if what in self.events:
            self.redraw()
            if isinstance(self.widget, go.FigureWidget):
                sync_figure_state(self.widget)

    def build(self):  # pragma: no cover - overridden
        raise NotImplementedError

    def redraw(self):  # pragma: no cover - overridden
        raise NotImplementedError

    def boxed(self):
        return w.VBox([w.HTML(f"<b>{html.escape(self.title)}</b>"), self.widget],
                      layout=w.Layout(min_width="0", overflow="hidden"))


class StepperView(View):
    """Question picker, round slider with prev/next, the round's summary and stop reason."""

    events = (TRACE, ROUND)
    title = "Round"

    def build(self):
        m = self.model
        self.question = w.Dropdown(
            options=[(data.short(f"{q.id}: {q.question}", 110), q.id) for q in m.questions],
            value=m.question.id, description="Question", layout=w.Layout(width="100%"),
            style={"description_width": "70px"})
        self.slider = w.IntSlider(value=0, min=0, max=max(0, m.rounds_count - 1), description="Round",
                                  continuous_update=False, style={"description_width": "70px"},
                                  layout=w.Layout(width="320px"))
        self.slider.add_class("sag2wb-round-slider")
        self.prev = w.Button(description="◀ prev", layout=w.Layout(width="70px"))
        self.next = w.Button(description="next ▶", layout=w.Layout(width="70px"))
        self.summary = w.HTML()
        self.summary.add_class("sag2wb-round-summary")
        self.question.observe(self._question_changed, "value")
        self.slider.observe(lambda ch: m.set_round(ch["new"]), "value")
        self.prev.on_click(lambda _: m.set_round(m.round - 1))
        self.next.on_click(lambda _: m.set_round(m.round + 1))
        return w.VBox([self.question, w.HBox([self.slider, self.prev, self.next]), self.summary])

    def _question_changed(self, change):
        self.model.set_question(change["new"])

    def redraw(self):
        m = self.model
        if self.question.value != m.question.id:
            self.question.value = m.question.id
        self.slider.max = max(0, m.rounds_count - 1)
        self.slider.value = m.round
        if not m.frames:
            self.summary.value = ""
            return
        r = m.frames["rounds"]
        row = r[r["round"] == m.round].iloc[0]
        last = r.iloc[-1]
        terms = m.frames["terms"]
        selected = terms[(terms["round"] == m.round) & terms["selected"]].sort_values("order")["term"].tolist()
        gold_line = ""
        if m.show_gold:
            gold_line = f" · gold documents: {html.escape(', '.join(m.question.gold))}"
        stop = last["stop"] if isinstance(last["stop"], str) else "(running)"
        self.summary.value = (
            f"<div style='font-size:12px'>Round <b>{m.round}</b> of {len(r) - 1}: {row['candidates']} candidates, "
            f"pool {row['pool']}, context {row['context']}, {row['seeds']} seeds, {row['judgments']} judgments"
            + (f" · terms: <i>{html.escape(', '.join(selected[:12]))}{' …' if len(selected) > 12 else ''}</i>"
               if selected else "")
            + f"<br>Stopped after round {int(last['round'])}: <b class='sag2wb-stop'>{html.escape(stop)}</b>"
            f" · judge <code>{html.escape(m.trace.judge)}</code>{gold_line}</div>"
        )


class PoolView(View):
    """The round's candidate pool: origin, retrieval rank, the term that brought it, scores, rank."""

    title = "Candidate pool of the round"

    def build(self):
        out = w.HTML()
        out.add_class("sag2wb-pool")
        return out

    def redraw(self):
        m = self.model
        if not m.frames:
            return
        df = data.pool_table(m.frames, m.round, m.show_gold)
        cols = [c for c in data.POOL_VIEW_COLUMNS if c in df.columns]
        headers = ["rank", "title", "origin", "ret. rank", "via term", "score", "prev. score", "gold"][: len(cols)]
        df = df.assign(title=[("📌 " if p else "") + t for t, p in zip(df["title"], df["pinned"])])
        self.widget.value = (
            f"<div class='sag2wb-muted' style='font-size:11px'>round {m.round}: {len(df)} units</div>"
            + html_table(df, cols, headers, row_class=gold_row)
        )


class ContextView(View):
    title = "Context the judge saw (with previous scores)"

    def build(self):
        return w.HTML()

    def redraw(self):
        m = self.model
        if not m.frames:
            return
        df = data.context_table(m.frames, m.round, m.show_gold)
        if df.empty:
            self.widget.value = "<span class='sag2wb-muted'>No context in this round (round 0 has none).</span>"
            return
        cols = ["position", "title", "previous_score"] + (["gold"] if m.show_gold else [])
        self.widget.value = html_table(df, cols, ["#", "title", "prev. score", "gold"][: len(cols)],
                                       row_class=gold_row)


class SeedsView(View):
    title = "Seeds of the round and their weights"

    def build(self):
        fig = _figure(260, barmode="group", xaxis=dict(range=[0, 1.05]), yaxis=dict(autorange="reversed"),
                      legend=dict(orientation="h", y=1.0, x=1, xanchor="right", yanchor="bottom"))
        fig.add_bar(name="seed score", marker_color=SELECTED, orientation="h")
        fig.add_bar(name="seed weight w(d) (when it won a term)", marker_color=EXPANSION, orientation="h")
        return fig

    def redraw(self):
        m = self.model
        if not m.frames:
            return
        df = data.seed_bars(m.frames, m.round)
        labels = [("★ " if g is True and m.show_gold else "") + f"{int(r) if r == r else '?'}. {data.short(t, 28)}"
                  for t, r, g in zip(df["title"], df["previous_rank"], df["gold"])]
        with self.widget.batch_update():
            self.widget.data[0].y, self.widget.data[0].x = labels, list(df["seed_score"])
            self.widget.data[1].y = labels
            self.widget.data[1].x = [None if v != v else float(v) for v in df["seed_weight"]]
            self.widget.layout.title.text = (f"round {m.round}: seeds (ranked in round {m.round - 1})" if len(df)
                                             else f"round {m.round}: no seeds (round 0 is plain BM25)")


class TermsView(View):
    """Term priorities faceted into their factors; selected terms in blue, the rest pale."""

    title = "Term priorities = (1+ln tf) · idf · (1+c) · w"
    facets = data.TERM_COMPONENTS + ["priority"]

    def build(self):
        fig = go.FigureWidget(make_subplots(rows=1, cols=len(self.facets), shared_yaxes=True,
                                            subplot_titles=["1+ln tf", "idf", "1+c", "w", "priority"],
                                            horizontal_spacing=0.015))
        for i, _ in enumerate(self.facets):
            fig.add_bar(orientation="h", row=1, col=i + 1, showlegend=False)
        fig.update_layout(height=430, margin=dict(l=10, r=10, t=30, b=10), font=dict(size=10), autosize=True)
        fig.update_yaxes(autorange="reversed", automargin=True)
        return fig

    def redraw(self):
        m = self.model
        if not m.frames:
            return
        df = data.term_components(m.frames, m.round, top=25)
        colors = [SELECTED if s else UNSELECTED for s in df["selected"]]
        hover = [f"{t} (seed: {data.short(st, 30)}; {res or 'not searched'})"
                 for t, st, res in zip(df["term"], df["seed_title"], df["resolution"])]
        with self.widget.batch_update():
            for trace, col in zip(self.widget.data, self.facets):
                trace.y = list(df["label"])
                trace.x = list(df[col])
                trace.marker.color = colors
                trace.hovertext = hover
            self.widget.layout.annotations[-1].text = (
                f"priority (round {m.round}: {int(df['selected'].sum())} selected)" if len(df) else "priority")


class SlopeView(View):
    """Scores across rounds, one line per passage: gold and expansion entries highlighted."""

    title = "Score changes across rounds"
    styles = {"other": (OTHER, 1), "entered by expansion": (EXPANSION, 2), "gold": (GOLD, 3)}

    def build(self):
        fig = _figure(300, xaxis=dict(dtick=1, title="round"), yaxis=dict(title="score", range=[-0.02, 1.02]))
        for name, (color, width) in self.styles.items():
            fig.add_scatter(mode="lines+markers", name=name, line=dict(color=color, width=width),
                            marker=dict(size=4 + width), hoverinfo="text+y")
        return fig

    def redraw(self):
        m = self.model
        if not m.frames:
            return
        lines = data.slope_lines(m.frames)
        with self.widget.batch_update():
            for trace in self.widget.data:
                x, y, text = lines[trace.name]
                trace.x, trace.y, trace.hovertext = x, y, text
                trace.visible = True if (trace.name != "gold" or m.show_gold) else False
            self.widget.layout.shapes = [dict(type="line", x0=m.round, x1=m.round, y0=0, y1=1, yref="paper",
                                              line=dict(color="#444", dash="dot", width=1))]


class TrajectoryView(View):
    """Sankey passage → term → passage across rounds: the bridge a learner should see."""

    events = (TRACE,)
    title = "Trajectory: seed passage → term → retrieved passage"

    def build(self):
        fig = _figure(380)
        fig.add_sankey(arrangement="snap", node=dict(pad=8, thickness=12, label=[], color=[]),
                       link=dict(source=[], target=[], value=[]))
        return fig

    def redraw(self):
        m = self.model
        if not m.frames:
            return
        d = data.trajectory_links(m.frames)
        if not m.show_gold:
            d["labels"] = [label.replace("★ ", "") for label in d["labels"]]
        with self.widget.batch_update():
            s = self.widget.data[0]
            s.node.label, s.node.color = d["labels"], d["colors"]
            s.link.source, s.link.target, s.link.value, s.link.label = d["source"], d["target"], d["value"], d["label"]
            s.link.color = ["rgba(255,127,14,0.25)"] * len(d["source"])
            self.widget.layout.title.text = ("" if d["labels"] else "no expansion in this run (H=0 or an early stop)")


class RankingView(View):
    events = (TRACE,)
    title = "Final top 10: after diversity, with the rank before it"

    def build(self):
        return w.HTML()

    def redraw(self):
        m = self.model
        if not m.frames:
            return
        df = data.ranking_compare(m.frames, m.show_gold)
        df = df.assign(move=[("↑" if v > 0 else "↓" if v < 0 else "=") + (str(abs(int(v))) if v else "")
                             if v == v else "" for v in df["move"]])
        cols = [c for c in df.columns if c != "unit_id"]
        note = "" if m.trace.params.diversity else "<div class='sag2wb-muted'>diversity is off</div>"
        self.widget.value = note + html_table(df, cols, ["#", "before", "move", "title", "score", "gold"][: len(cols)],
                                              row_class=gold_row)


class DiffView(View):
    """Side-by-side diff of two runs: the reference (previous or fixed) vs the current one."""

    events = (TRACE,)
    title = "Diff against the reference run (top 10)"

    def build(self):
        self.fix = w.ToggleButton(description="fix current as reference", value=False,
                                  layout=w.Layout(width="200px"))
        self.fix.observe(lambda ch: self.model.fix_reference(ch["new"]), "value")
        self.body = w.HTML()
        self.body.add_class("sag2wb-diff")
        self._ref_frames = (None, None)
        return w.VBox([self.fix, self.body])

    def redraw(self):
        m = self.model
        if not m.frames:
            return
        ref = m.reference
        if ref is None:
            self.body.value = "<span class='sag2wb-muted'>Change a parameter or the judge to compare runs.</span>"
            return
        if self._ref_frames[0] is not ref:
            self._ref_frames = (ref, ref.frames())
        d = data.diff_runs(self._ref_frames[1], m.frames)

        def col(titles, head):
            items = "".join(f"<li>{html.escape(data.short(t, 34))}</li>" for t in titles)
            return f"<div style='flex:1;min-width:0'><b>{head}</b><ol style='margin:2px 0;padding-left:22px'>{items}</ol></div>"

        def describe(p: object) -> str:
            return html.escape(str(p))

        changes = []
        changes += [f"<li>entered: {describe(t)} (#{r})</li>" for t, r in d["entered"]]
        changes += [f"<li>left: {describe(t)} (was #{r})</li>" for t, r in d["left"]]
        changes += [f"<li>moved: {describe(t)} #{a} → #{b}</li>" for t, a, b in d["moved"]]
        summary = "<i>same top 10</i>" if d["same"] else f"<ul style='margin:2px 0'>{''.join(changes)}</ul>"
        label = (f"reference: judge {ref.judge}, "
                 + ", ".join(f"{k}={v}" for k, v in ref.params.to_dict().items()
                             if v != m.trace.params.to_dict()[k]))
        self.body.value = (
            TABLE_CSS + f"<div style='font-size:12px'><div class='sag2wb-muted'>{html.escape(label)}</div>"
            f"<div style='display:flex;gap:8px'>{col(d['reference'], 'reference')}{col(d['current'], 'current')}</div>"
            f"{summary}</div>"
        )


class StatusView(View):
    """Progress bar, Stop button, the last recomputation's figures and any error."""

    events = (STATUS, TRACE)

    def build(self):
        self.progress = w.IntProgress(min=0, max=3, value=0, layout=w.Layout(width="160px"))
        self.stop = w.Button(description="Stop", button_style="warning", layout=w.Layout(width="60px"),
                             tooltip="interrupt after the current round")
        self.stop.on_click(lambda _: self.model.interrupt())
        self.text = w.HTML()
        self.text.add_class("sag2wb-status")
        return w.HBox([self.progress, self.stop, self.text], layout=w.Layout(align_items="center"))

    def redraw(self):
        m = self.model
        st = m.status
        self.progress.max = max(1, st.total)
        self.progress.value = min(st.done, self.progress.max)
        self.progress.bar_style = "danger" if st.error else "success" if not st.busy else "info"
        self.stop.disabled = not st.busy
        parts = []
        if st.error:
            parts.append(f"<span class='sag2wb-error'>⚠ {html.escape(st.error)}</span>")
        if st.message:
            parts.append(html.escape(st.message))
        if not st.busy and m.last_recompute:
            lr = m.last_recompute
            parts.append(f"{lr.get('judgments', 0)} judgments, {lr.get('memo_hits', 0)} from cache, "
                         f"{lr.get('seconds', 0):.2f} s")
        self.text.value = TABLE_CSS + "<span style='font-size:12px'>" + " · ".join(parts) + "</span>"
