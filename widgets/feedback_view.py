"""The lexical-feedback alternatives (paper B.3) in the dashboard: a method picker (SAG2, RM3,
GAR-BM25) and a view of what the chosen one did — RM3's feedback passages and the terms and
weights of its relevance model; GAR-BM25's batches, from the initial ranking and from the
corpus-graph frontier, with the passage that brought each frontier unit. Reads traces only;
the judge picker still applies (bm25: no judge; any other: that judge on the final pool).

>>> from widgets.model import DashboardModel
>>> model = DashboardModel(index, questions, judge="bm25")
>>> set_method(model, "rm3")
>>> model.trace.rounds[1].seeds[0].rank, trace_method(model.trace)
(1, 'rm3')
>>> "relevance model" in FeedbackView(model).widget.value
True
"""

from __future__ import annotations

import html

import ipywidgets as w

from workbench.feedback import gar_batches
from workbench.trace import Trace

from .model import TRACE

METHODS = {"sag2": "SAG2", "rm3": "RM3 (B.3)", "gar": "GAR-BM25 (B.3)"}


def set_method(model, method: str) -> None:
    """Show this method's trajectory for the current question, judge and parameters (the
    model steps a `FeedbackRun` for rm3 / gar, a `Run` for sag2)."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; known: {', '.join(METHODS)}")
    if getattr(model, "method", "sag2") == method:
        return
    model.method = method
    model.run = None  # a SAG2 Run cannot be re-run from a feedback trace (nor the reverse)
    model.recompute(new_question=True)


def trace_method(trace: Trace | None) -> str:
    """'rm3', 'gar' or 'sag2', read off the trace (RM3's terms carry rm3_ components; GAR's
    round 1 is scored by round 0's expression and its candidates carry their batch)."""
    if trace is None or len(trace.rounds) < 2:
        return "sag2"
    r1 = trace.rounds[1]
    if any(name.startswith("rm3_") for t in r1.terms for name, _ in t.extra):
        return "rm3"
    if (
        r1.expression == trace.rounds[0].expression
        and r1.candidates
        and not r1.terms
        and all(
            c.term_rank is not None and (c.via_term is None or c.via_term.startswith("graph:")) for c in r1.candidates
        )
    ):
        return "gar"
    return "sag2"


def _gold(trace: Trace, unit_id: int) -> str:
    return "★ " if trace.gold and trace.units[unit_id].document in set(trace.gold) else ""


def rm3_html(trace: Trace) -> str:
    """The feedback passages (rank, BM25 score, weight) and the relevance model's terms:
    final weight w(t), R(t), the original query's part, passages that kept it, df."""
    r1 = trace.rounds[1]
    rows = "".join(
        f"<tr><td>{s.rank}</td><td>{_gold(trace, s.unit_id)}{html.escape(trace.units[s.unit_id].title)}</td>"
        f"<td>{s.score:.3f}</td><td>{(s.weight or 0):.3f}</td></tr>"
        for s in r1.seeds
    )
    terms = ""
    for t in r1.terms:
        extra = dict(t.extra)
        terms += (
            f"<tr style='{'' if t.selected else 'color:#888'}'><td>{t.order or ''}</td><td>{html.escape(t.term)}</td>"
            f"<td>{t.priority:.4f}</td><td>{extra.get('rm3_relevance', 0):.4f}</td>"
            f"<td>{extra.get('rm3_query_weight', 0):.4f}</td><td>{extra.get('rm3_passages', '')}</td><td>{t.df}</td>"
            f"<td>{html.escape(trace.units[t.seed].title)}</td></tr>"
        )
    judged = f"judged by {html.escape(trace.judge)} (first 100, once, no context)" if r1.scored else "no judge"
    return (
        f"<div class='sag2wb-feedback'><b>RM3</b>: {len(r1.seeds)} feedback passages, "
        f"{sum(t.selected for t in r1.terms)} terms in the relevance model; {judged}."
        "<table class='sag2wb-table'><thead><tr><th>#</th><th>feedback passage</th><th>BM25</th><th>weight</th>"
        f"</tr></thead><tbody>{rows}</tbody></table>"
        "<div>relevance model (grey: pruned):</div>"
        "<table class='sag2wb-table'><thead><tr><th>order</th><th>term</th><th>w(t)</th><th>R(t)</th>"
        "<th>λ·Q(t)</th><th>passages</th><th>df</th><th>top passage</th></tr></thead>"
        f"<tbody>{terms}</tbody></table></div>"
    )


def gar_html(trace: Trace) -> str:
    """The adaptive loop's batches: source, and per unit its BM25 s(u) and what brought it."""
    blocks = []
    for b in gar_batches(trace):
        units = "".join(
            f"<tr><td>{_gold(trace, u['unit_id'])}{html.escape(u['title'])}</td><td>{u['score']:.3f}</td>"
            f"<td>{html.escape(u['via_title'] or '')}</td></tr>"
            for u in b["units"]
        )
        blocks.append(
            f"<div><b>batch {b['batch']}</b> · {b['source']} ({len(b['units'])})"
            "<table class='sag2wb-table'><thead><tr><th>passage</th><th>BM25</th><th>neighbour of</th></tr></thead>"
            f"<tbody>{units}</tbody></table></div>"
        )
    r1 = trace.rounds[1]
    judged = f"judged by {html.escape(trace.judge)} (once, no context)" if r1.scored else "no judge"
    return (
        f"<div class='sag2wb-feedback'><b>GAR-BM25</b>: {len(r1.candidates)} passages taken in "
        f"{len(blocks)} batches; {judged}.{''.join(blocks)}</div>"
    )


class FeedbackView:
    """What RM3 or GAR-BM25 did on the current question (empty for SAG2 trajectories)."""

    title = "Lexical feedback (B.3)"

    def __init__(self, model):
        self.model = model
        self.widget = w.HTML()
        model.subscribe(self._on_event)
        self.redraw()

    def _on_event(self, model, what):
        if what == TRACE:
            self.redraw()

    def redraw(self):
        trace = self.model.trace
        method = trace_method(trace)
        if method == "rm3":
            self.widget.value = rm3_html(trace)
        elif method == "gar":
            self.widget.value = gar_html(trace)
        else:
            self.widget.value = "<div class='sag2wb-feedback' style='color:#666'>SAG2 trajectory (method: SAG2).</div>"


class MethodControls:
    """A picker for the method: SAG2, RM3, GAR-BM25."""

    def __init__(self, model):
        self.model = model
        self.picker = w.Dropdown(
            options=[(label, key) for key, label in METHODS.items()],
            value=getattr(model, "method", "sag2"),
            description="method",
            layout=w.Layout(width="230px"),
        )
        self.message = w.HTML()
        self.picker.observe(self._picked, names="value")
        self.widget = w.HBox([self.picker, self.message])

    def _picked(self, change):
        try:
            set_method(self.model, change["new"])
            self.message.value = ""
        except Exception as exc:  # shown next to the picker; the last trajectory stays
            self.message.value = f"<span style='color:#b00020'>✗ {html.escape(str(exc))}</span>"
