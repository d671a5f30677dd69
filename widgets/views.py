"""Views: each subscribes to the DashboardModel and redraws from the trace frames.

Tables are ipywidgets.HTML; charts are `chart.Chart` widgets: every redraw sends the whole
figure and the browser redraws it with Plotly.react, so a chart can never keep part of a
previous round or run (plotly's FigureWidget patched traces in place and lost updates).
"""

from __future__ import annotations

import html
import json

import ipywidgets as w

from . import assets, data
from .model import PASSAGE, ROUND, STATUS, TRACE
from .table import DataTable

GOLD = "#2ca02c"
EXPANSION = "#ff7f0e"
OTHER = "#b0b0b0"
SELECTED = "#1f77b4"
UNSELECTED = "#c6d4e1"

# widgets/views.css and passage.css have one rule per line; the page gets each on one line
TABLE_CSS = "<style>" + "".join(assets.read("views.css").splitlines()) + "</style>"


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
            for c in columns
        )
        rows.append(f"<tr class='{klass}'>{cells}</tr>")
    table = f"<table class='sag2wb-table {cls}'><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    return TABLE_CSS + (f"<div class='sag2wb-box'>{table}</div>" if box else table)


class View:
    """Base: a widget that redraws on the events it cares about."""

    events: tuple[str, ...] = (TRACE, ROUND)
    title = ""

    def __init__(self, model):
        self.model = model
        self.widget = self.build()
        model.subscribe(self._on_event)
        self.redraw()

    def _on_event(self, model, what):
        if what in self.events:
            self.redraw()

    def build(self):  # pragma: no cover - overridden
        raise NotImplementedError

    def redraw(self):  # pragma: no cover - overridden
        raise NotImplementedError

    def boxed(self):
        return w.VBox(
            [w.HTML(f"<b>{html.escape(self.title)}</b>"), self.widget],
            layout=w.Layout(min_width="0", overflow="hidden"),
        )


class StepperView(View):
    """Question picker, round slider with prev/next, the round's summary and stop reason."""

    events = (TRACE, ROUND)
    title = "Round"

    def build(self):
        m = self.model
        self.question = w.Dropdown(
            options=[(data.short(f"{q.id}: {q.question}", 110), q.id) for q in m.questions],
            value=m.question.id,
            description="Question",
            layout=w.Layout(width="100%"),
            style={"description_width": "70px"},
        )
        self.slider = w.IntSlider(
            value=0,
            min=0,
            max=max(0, m.rounds_count - 1),
            description="Round",
            continuous_update=False,
            style={"description_width": "70px"},
            layout=w.Layout(width="320px"),
        )
        self.slider.add_class("sag2wb-round-slider")
        self.question.add_class("sag2wb-question")
        self.prev = w.Button(description="◀ prev", layout=w.Layout(width="70px"))
        self.next = w.Button(description="next ▶", layout=w.Layout(width="70px"))
        self.next.add_class("sag2wb-next")
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
        chosen = terms[(terms["round"] == m.round) & terms["selected"]].sort_values("order")
        # as the seed text writes them (the terms chart labels its bars the same way)
        shown = chosen["display"] if "display" in chosen.columns else chosen["term"]
        selected = [data.term_label(t, d) for t, d in zip(chosen["term"], shown)]
        gold_line = ""
        if m.show_gold:
            gold_line = f" · gold documents: {html.escape(', '.join(m.question.gold))}"
        stop = last["stop"] if isinstance(last["stop"], str) else "(running)"
        seeds = m.frames["seeds"]
        note = data.expansion_note(m.frames, getattr(m.index, "N", 0), tuple(m.question.gold))
        state = {
            "round": m.round,
            "run": m.generation,
            "question": m.question.id,
            "run_label": run_label(m),
            "seeds": int((seeds["round"] == m.round).sum()),
            "selected": selected,
        }
        self.summary.value = (
            f"<span class='sag2wb-state' hidden "
            f"data-state='{html.escape(json.dumps(state))}'></span>"
            f"<div style='font-size:12px'>Round <b>{m.round}</b> of {len(r) - 1}: "
            f"{row['candidates']} candidates, "
            f"pool {row['pool']}, context {row['context']}, {row['seeds']} seeds, "
            f"{row['judgments']} judgments"
            + (
                f" · terms: <i>{html.escape(', '.join(selected[:12]))}{' …' if len(selected) > 12 else ''}</i>"
                if selected
                else ""
            )
            + f"<br>Stopped after round {int(last['round'])}: "
            f"<b class='sag2wb-stop'>{html.escape(stop)}</b>"
            f" · judge <code>{html.escape(m.trace.judge)}</code>{gold_line}"
            + (f"<br><span class='sag2wb-expansion-note'>{html.escape(note)}</span>" if note else "")
            + "</div>"
        )


LABELS = {
    "rank": "rank",
    "title": "title",
    "source": "source",
    "origin": "origin",
    "retrieval_rank": "ret. rank",
    "via_term": "via term",
    "via_terms": "via terms",
    "score": "score",
    "previous_score": "prev. score",
    "explanation": "judge's reason",
    "gold": "gold",
    "position": "#",
    "rank_before_diversity": "before",
    "move": "move",
}


def table_rows(df, cols) -> list[dict]:
    """DataFrame rows for a DataTable: the shown columns, unit_id (click target), gold class."""
    keep = [c for c in dict.fromkeys([*cols, "unit_id"]) if c in df.columns]
    return [{**rec, "_class": gold_row(rec)} for rec in df[keep].to_dict("records")]


class TableView(View):
    """A view drawn as a sortable, filterable DataTable; clicking a row picks the passage."""

    table_name = "table"

    def build(self):
        table = DataTable(name=self.table_name)
        table.observe(self._clicked, "selected")
        return table

    def _clicked(self, change):
        if change["new"] >= 0:
            self.model.select_unit(change["new"])


class PoolView(TableView):
    """The round's candidate pool: origin, retrieval rank, the term that brought it, scores,
    rank."""

    title = "Candidate pool of the round (click a row to read the passage)"
    table_name = "pool"

    def redraw(self):
        m = self.model
        if not m.frames:
            return
        df = data.pool_table(m.frames, m.round, m.show_gold)
        cols = [c for c in data.POOL_VIEW_COLUMNS if c in df.columns]
        # "(pinned)" in words: an emoji pin renders as a box without an emoji font
        df = df.assign(title=[("(pinned) " if p else "") + t for t, p in zip(df["title"], df["pinned"])])
        self.widget.set_rows(
            table_rows(df, cols), columns=[(c, LABELS[c]) for c in cols], caption=f"round {m.round}: {len(df)} units"
        )


class ContextView(TableView):
    title = "Context the judge saw (with previous scores)"
    table_name = "context"

    def build(self):
        table = super().build()
        table.compact = True  # it shares a row with the seeds chart
        return table

    def redraw(self):
        m = self.model
        if not m.frames:
            return
        df = data.context_table(m.frames, m.round, m.show_gold)
        cols = ["position", "title", "source", "previous_score"] + (["gold"] if m.show_gold else [])
        if df.empty:
            why = (
                "round 0 judges the question alone: no context yet"
                if m.round == 0
                else "context is off (the context checkbox)"
                if not m.trace.params.use_context
                else f"round {m.round}: no passage of round {m.round - 1} was kept as context"
            )
            self.widget.set_rows([], columns=[(c, LABELS[c]) for c in cols], caption=why)
            return
        self.widget.set_rows(
            table_rows(df, cols),
            columns=[(c, LABELS[c]) for c in cols],
            caption=f"round {m.round}: {len(df)} passages of round {m.round - 1}",
        )


def run_label(m) -> str:
    """The run a chart belongs to, in words: the stepper shows the same string."""
    p = m.trace.params
    return f"judge {m.trace.judge} · L={p.L} · H={p.H} · {len(m.trace.rounds) - 1} expansion round(s) run"


class RankingView(TableView):
    events = (TRACE,)
    title = "Final top 10: after diversity, with the rank before it"
    table_name = "ranking"

    def redraw(self):
        m = self.model
        if not m.frames:
            return
        df = data.ranking_compare(m.frames, m.show_gold)
        df = df.assign(
            move=[
                ("↑" if v > 0 else "↓" if v < 0 else "=") + (str(abs(int(v))) if v else "") if v == v else ""
                for v in df["move"]
            ]
        )
        cols = [c for c in df.columns if c != "unit_id"]
        self.widget.set_rows(
            table_rows(df, cols),
            columns=[(c, LABELS[c]) for c in cols],
            caption="" if m.trace.params.diversity else "diversity is off",
        )


class DiffView(View):
    """Side-by-side diff of two runs: the reference (previous or fixed) vs the current one."""

    events = (TRACE,)
    title = "Diff against the reference run (top 10)"

    def build(self):
        self.fix = w.ToggleButton(description="fix current as reference", value=False, layout=w.Layout(width="200px"))
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
            return (
                f"<div style='flex:1;min-width:0'><b>{head}</b>"
                f"<ol style='margin:2px 0;padding-left:22px'>{items}</ol></div>"
            )

        def describe(p: object) -> str:
            return html.escape(str(p))

        changes = []
        changes += [f"<li>entered: {describe(t)} (#{r})</li>" for t, r in d["entered"]]
        changes += [f"<li>left: {describe(t)} (was #{r})</li>" for t, r in d["left"]]
        changes += [f"<li>moved: {describe(t)} #{a} → #{b}</li>" for t, a, b in d["moved"]]
        summary = "<i>same top 10</i>" if d["same"] else f"<ul style='margin:2px 0'>{''.join(changes)}</ul>"
        changed = [f"{k}={v}" for k, v in ref.params.to_dict().items() if v != m.trace.params.to_dict()[k]]
        label = ", ".join([f"reference: judge {ref.judge}", *changed])
        self.body.value = (
            TABLE_CSS + f"<div style='font-size:12px'>"
            f"<div class='sag2wb-muted'>{html.escape(label)}</div>"
            f"<div style='display:flex;gap:8px'>"
            f"{col(d['reference'], 'reference')}{col(d['current'], 'current')}</div>"
            f"{summary}</div>"
        )


def judge_cost(stats: dict) -> str:
    """The status line's cost of the last recomputation: judgments, cache hits, and for a judge
    that keeps usage counters (JEV) its requests, tokens and cost.

    >>> judge_cost({"judgments": 44, "memo_hits": 30, "seconds": 1.234})
    '44 judgments, 30 from the in-process cache · 1.23 s'
    >>> cost = judge_cost({"judgments": 9, "memo_hits": 0, "cache_hits": 5, "requests": 1,
    ...                    "input_tokens": 900, "output_tokens": 40, "cost": 0.0012, "seconds": 2})
    >>> print(cost)  # doctest: +NORMALIZE_WHITESPACE
    9 judgments, 0 from the in-process cache, 5 from the disk cache · 1 request, 940 tokens,
    $0.0012 · 2.00 s
    """
    head = f"{stats.get('judgments', 0)} judgments, {stats.get('memo_hits', 0)} from the in-process cache"
    if "cache_hits" in stats:
        head += f", {stats['cache_hits']} from the disk cache"
    parts = [head]
    if "requests" in stats:
        n = stats["requests"]
        usage = f"{n} request{'s' if n != 1 else ''}"
        tokens = stats.get("input_tokens", 0) + stats.get("output_tokens", 0)
        if tokens:
            usage += f", {tokens} tokens"
        if stats.get("cost"):
            usage += f", ${stats['cost']:.4f}"
        parts.append(usage)
    parts.append(f"{stats.get('seconds', 0):.2f} s")
    return " · ".join(parts)


class StatusView(View):
    """Progress bar, Stop button, the last recomputation's figures and any error."""

    events = (STATUS, TRACE)

    def build(self):
        self.progress = w.IntProgress(min=0, max=3, value=0, layout=w.Layout(width="160px"))
        self.stop = w.Button(
            description="Stop",
            button_style="",
            layout=w.Layout(width="60px"),
            tooltip="interrupt after the current round",
        )
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
        # a disabled Stop must look disabled: grey, not the warning colour
        self.stop.button_style = "warning" if st.busy else ""
        parts = []
        if st.error:
            parts.append(f"<span class='sag2wb-error'>⚠ {html.escape(st.error)}</span>")
        if st.message:
            parts.append(html.escape(st.message))
        if not st.busy and m.last_recompute:
            parts.append(judge_cost(m.last_recompute))
        self.text.value = TABLE_CSS + "<span style='font-size:12px'>" + " · ".join(parts) + "</span>"


class PassageView(View):
    """One passage in full: its text with the question's tokens and the run's selected terms
    marked, its source (file and lines), its score in every round, the term (and seed) it
    came through, and the judge's explanation when the judge gives one. Follows a click on a
    pool, context or ranking row, or the picker."""

    events = (TRACE, ROUND, PASSAGE)
    title = "Passage"

    def build(self):
        self.picker = w.Dropdown(
            description="passage", layout=w.Layout(width="100%", max_width="620px"), style={"description_width": "60px"}
        )
        self.picker.add_class("sag2wb-passage-picker")
        self.picker.observe(self._picked, "value")
        self.body = w.HTML()
        self.body.add_class("sag2wb-passage")
        self._syncing = False
        return w.VBox([self.picker, self.body], layout=w.Layout(width="100%", min_width="0"))

    def _picked(self, change):
        if not self._syncing and change["new"] is not None:
            self.model.select_unit(change["new"])

    def redraw(self):
        m = self.model
        if not m.frames:
            return
        p = m.frames["passages"]
        units = p.sort_values(["round", "rank"]).drop_duplicates("unit_id")
        options = [
            (f"{data.short(t, 50)} · {s}", int(u)) for t, s, u in zip(units["title"], units["source"], units["unit_id"])
        ]
        if m.selected_unit not in {u for _, u in options}:
            m.selected_unit = (
                int(m.frames["ranking"]["unit_id"].iloc[0])
                if len(m.frames["ranking"])
                else options[0][1]
                if options
                else None
            )
        self._syncing = True
        try:
            if list(self.picker.options) != options:
                self.picker.options = options
            self.picker.value = m.selected_unit
        finally:
            self._syncing = False
        if m.selected_unit is None:
            self.body.value = "<span class='sag2wb-muted'>no passage in this trajectory</span>"
            return
        self.body.value = passage_html(m, m.selected_unit)


PASSAGE_CSS = "<style>" + "".join(assets.read("passage.css").splitlines()) + "</style>"


def passage_html(m, unit_id: int) -> str:
    from workbench.text import tokenize

    d = data.passage_detail(m.frames, unit_id)
    unit = m.index.unit(unit_id)
    text = "\n".join(x for x in (unit.heading if unit.heading != unit.title else "", unit.body) if x)
    q_tokens = tokenize(m.question.question)
    marked = data.highlight(text, q_tokens, d["terms"])
    h = d["history"]
    head = "".join(f"<th>{html.escape(LABELS.get(c, c))}</th>" for c in h.columns)
    rows = "".join(
        "<tr>" + "".join(f"<td>{fmt(v, integer=c in INT_COLUMNS)}</td>" for c, v in rec.items()) + "</tr>"
        for rec in h.to_dict("records")
    )

    def credit(shown, token, rank, seed):
        where = f"#{rank} in its list" if rank else ""
        token_note = f"token form “{token}”" if shown != token else ""
        seed_note = f"a term of seed {seed}" if seed else ""
        extra = "; ".join(x for x in (where, token_note, seed_note) if x)
        return f"“{html.escape(shown)}”" + (f" ({html.escape(extra)})" if extra else "")

    via = "; ".join(
        f"round {r}: through "
        + credit(*terms[0])
        + ("" if len(terms) == 1 else ", also " + ", ".join(credit(*t) for t in terms[1:]))
        for r, terms in d["via"]
    ) or ("retrieved by the question itself (BM25), not through a term")
    gold = " <span class='sag2wb-gold'>★ gold</span>" if d["gold"] and m.show_gold else ""
    return (
        PASSAGE_CSS + f"<div style='font-size:12px'><b>{html.escape(d['title'])}</b>{gold} · "
        f"<code>{html.escape(str(d['source']))}</code><br>came in: {via}<br>"
        "<span class='sag2wb-muted'>marked: <mark class='q'>question tokens</mark> "
        "<mark class='t'>terms selected in this run</mark></span>"
        f"<div class='text'>{marked}</div><table><thead><tr>{head}</tr></thead>"
        f"<tbody>{rows}</tbody></table></div>"
    )
