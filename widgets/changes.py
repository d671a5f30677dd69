"""What a variant changed, as a view: the questions of a `Changes` (workbench/runs/changes.py)
listed by change, sortable by the metric's delta, and two trajectories side by side (the
dashboard's own Sankey and final-top-10 views, read-only, over each side's trace).

>>> from workbench.params import Params
>>> from workbench.runs import Config, Experiment, RunOptions
>>> configs = [Config("sag2", judge="lexical"),
...            Config("no_idf", Params(term_weighting="no_idf"), judge="lexical")]
>>> experiment = Experiment(index, questions, configs, RunOptions(progress=False, keep_traces=True))
>>> view = ChangesView(experiment.run().changes("sag2", "no_idf", traces=experiment.traces))
>>> view.list.options[0][1], view.list.value    # the largest change first, opened
('docs-09', 'docs-09')
>>> view.open("docs-01")                        # a bare `view` in a cell shows it
>>> len(view.sides.children)                    # A's and B's trajectories side by side
2

From two eval result files: `ChangesView(compare("A.json", "B.json", traces_base="traces-A",
traces_variant="traces-B"))` (workbench.runs.changes.compare).
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import ipywidgets as w

from . import chart_views, views
from .chart import loader

SORTS = {
    "largest gain first": lambda c: (c.delta is None, -(c.delta or 0.0), c.question),
    "largest loss first": lambda c: (c.delta is None, c.delta or 0.0, c.question),
    "largest change first": lambda c: (c.delta is None, -abs(c.delta or 0.0), c.question),
    "most terms changed": lambda c: (-(len(c.terms_gained) + len(c.terms_lost)), c.question),
    "question id": lambda c: (c.question,),
}
OUTCOMES = ("all", "win", "loss", "tie", "no value")


@dataclass
class _Question:
    id: str


class TraceModel:
    """The part of a DashboardModel the trajectory and ranking views read, over a stored trace:
    no engine, no re-runs (the comparison shows what the two runs did)."""

    def __init__(self, trace, show_gold: bool = True):
        self.trace = trace
        self.frames = trace.frames()
        self.question = _Question(trace.question_id or "")
        self.round = len(trace.rounds) - 1
        self.generation = 0
        self.show_gold = show_gold and bool(trace.gold)

    def subscribe(self, fn) -> None:  # a stored trace never changes: nothing to tell
        pass

    def select_unit(self, unit_id) -> None:  # a click in the ranking: nothing to open here
        pass


def _row_label(c) -> str:
    delta = "   –   " if c.delta is None else f"{c.delta:+7.2f}"
    return (
        f"{c.question:<10} {delta}  {c.outcome:<8} terms +{len(c.terms_gained)}/−{len(c.terms_lost)}  "
        f"gold +{len(c.gold_gained)}/−{len(c.gold_lost)}"
    )


class ChangesView:
    """Questions by change (sort, filter by outcome), the chosen question's changes in words,
    and its two trajectories side by side. `open(question_id)` picks one."""

    def __init__(self, changes):
        self.changes = changes
        c = changes.counts()
        lines = [
            f"<b>{html.escape(changes.variant.name)}</b> against <b>{html.escape(changes.base.name)}</b> on "
            f"{html.escape(changes.metric)}: {c['wins']} wins, {c['losses']} losses, {c['ties']} ties"
        ]
        if changes.scope:
            lines.append(f"scope: {html.escape(changes.scope)}")
        lines += [f"needs traces: {html.escape(p)}" for p in changes.needs_traces]
        self.heading = w.HTML("<br>".join(lines))
        self.sort = w.Dropdown(options=list(SORTS), value="largest change first", description="sort")
        self.outcome = w.Dropdown(options=list(OUTCOMES), value="all", description="outcome")
        self.list = w.Select(options=[], rows=12, layout=w.Layout(width="100%"))
        self.list.add_class("sag2wb-changes-list")
        self.detail = w.HTML()
        self.sides = w.HBox([], layout=w.Layout(width="100%"))
        self.sort.observe(lambda _: self.refresh(), "value")
        self.outcome.observe(lambda _: self.refresh(), "value")
        self.list.observe(self._picked, "value")
        self.widget = w.VBox(
            [
                loader(),  # plotly.js for the charts, once per page
                self.heading,
                w.HBox([self.sort, self.outcome]),
                self.list,
                self.detail,
                self.sides,
            ],
            layout=w.Layout(width="100%", max_width="1240px"),
        )
        self.widget.add_class("sag2wb-changes")
        self.refresh()

    def rows(self) -> list:
        """The questions shown, in the chosen order."""
        picked = [q for q in self.changes.questions if self.outcome.value in ("all", q.outcome)]
        return sorted(picked, key=SORTS[self.sort.value])

    def refresh(self) -> None:
        current = self.list.value
        rows = self.rows()
        self.list.options = [(_row_label(c), c.question) for c in rows]
        ids = [c.question for c in rows]
        if current in ids:
            self.list.value = current
        elif ids:
            self.list.value = ids[0]
        else:
            self.detail.value = "<i>no question with this outcome</i>"
            self.sides.children = []

    def _picked(self, change) -> None:
        if change["new"] is not None:
            self.open(change["new"])

    def open(self, question_id: str) -> None:
        """Show one question: its changes in words and both trajectories."""
        by_id = {c.question: c for c in self.changes.questions}
        if question_id not in by_id:
            raise KeyError(f"no compared question {question_id!r}")
        if self.list.value != question_id and question_id in [v for _, v in self.list.options]:
            self.list.value = question_id  # calls back here
            return
        c = by_id[question_id]
        self.detail.value = f"<pre class='sag2wb-changes-detail'>{html.escape(c.summary())}</pre>"
        self.sides.children = [
            self._side(self.changes.base, question_id, "A"),
            self._side(self.changes.variant, question_id, "B"),
        ]

    def _side(self, side, question_id: str, letter: str):
        run = side.runs[question_id]
        title = w.HTML(f"<b>{letter}: {html.escape(side.name)}</b>")
        layout = w.Layout(width="50%", min_width="0", overflow="hidden")
        if run.trace is None:
            why = (
                f"no trace of {html.escape(question_id)} for this run: run `sag2wb eval` with --trace-dir "
                f"and pass it as --traces-{letter.lower()} (traces_{'base' if letter == 'A' else 'variant'}=)"
            )
            return w.VBox([title, w.HTML(f"<i>{why}</i>")], layout=layout)
        model = TraceModel(run.trace)
        trajectory = chart_views.TrajectoryView(model)
        ranking = views.RankingView(model)
        return w.VBox([title, trajectory.widget, w.HTML(f"<b>{ranking.title}</b>"), ranking.widget], layout=layout)

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)
