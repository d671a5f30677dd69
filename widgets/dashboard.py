"""The SAG2 dashboard: one model, the views that read its trace frames, and the controls.

>>> from widgets import Dashboard, dashboard_for
>>> dash = Dashboard(index, questions, judge="lexical")   # a bare `dash` in a cell shows it
>>> dash.trace.question_id, dash.trace.final_ranking[:3]
('docs-01', (14, 9, 6))
>>> # index the folder, find its questions
>>> dashboard_for("sample_corpora/internal_docs").model.questions[-1].id
'docs-09'
"""

from __future__ import annotations

import html
from pathlib import Path

import ipywidgets as w

from workbench.index.corpora import Question, check_gold, find_questions, load_corpus, load_questions
from workbench.index.store import open_or_build
from workbench.params import Params
from workbench.runs.examples import bundled_paths, default_example, examine

from . import chart_views, views
from .chart import loader
from .controls import JudgeControls, ParamsControls, PinControls
from .export import ExportControls
from .feedback_view import FeedbackView, MethodControls
from .model import DashboardModel, UnknownQuestion

HEADING = (
    "<div class='sag2wb-heading' style='line-height:1.4'><div style='font-size:16px;font-weight:600'>"
    "SAG2 trajectory: seed → term → passage</div>"
    "<div style='font-size:13px;color:#444;max-width:70em'>Round 0 is a plain BM25 search for the question. "
    "In every later round the best passages so far (the <i>seeds</i>) give <i>terms</i>, often names and "
    "identifiers the question never mentions; each term is searched on its own and brings new passages, which "
    "the judge scores. Step through the rounds to see which term brought which passage; ★ marks gold evidence."
    "</div></div>"
)


def opening_note(dash: "Dashboard") -> str:
    """HTML: what expansion did for the question the dashboard opened on, in words (gold
    found by BM25 and by SAG2 in the top 10, and each gold passage a term brought in), or
    "" without gold. Computed from a fresh run, so it is true for whatever question is open.

    >>> "SAG2" in opening_note(Dashboard(index, questions, judge="lexical", question="docs-09"))
    True
    """
    m = dash.model
    if not m.question.gold:
        return ""
    e = examine(m.index, m.question, m.judge_for(m.judge_spec, m.question), m.params)
    lines = [
        f"In the top 10 for {html.escape(e.question_id)}: BM25 alone finds {e.bm25_found} of {e.gold} gold "
        f"passages, SAG2 with the {html.escape(e.judge)} judge {e.sag2_found} of {e.gold}."
    ]
    lines += [html.escape(b.sentence()[0].upper() + b.sentence()[1:]) + "." for b in e.bridges]
    if not e.bridges:
        lines.append("No gold passage here came in through an expansion term.")
    body = "<br>".join(lines)
    return f"<div class='sag2wb-opening' style='font-size:13px;line-height:1.4;margin:4px 0'>{body}</div>"


def _section(title: str, child, css_class: str = "") -> w.VBox:
    box = w.VBox(
        [w.HTML(f"<div style='font-weight:600;font-size:13px;margin-top:4px'>{html.escape(title)}</div>"), child],
        layout=w.Layout(min_width="0", overflow="hidden", width="100%"),
    )
    if css_class:
        box.add_class(css_class)
    return box


def _two_columns(left, right) -> w.GridBox:
    return w.GridBox(
        [left, right],
        layout=w.Layout(grid_template_columns="minmax(0, 1fr) minmax(0, 1fr)", grid_gap="6px 12px", width="100%"),
    )


class Dashboard:
    """Step through a SAG2 trajectory, see why each passage and term appeared, change the
    parameters or the judge and see the new trajectory. Displays itself in a notebook.

    `background=True` runs re-runs on a worker thread so Stop can interrupt between rounds."""

    def __init__(
        self,
        index,
        questions,
        judge="auto",
        params: Params | None = None,
        *,
        jev_options: dict | None = None,
        judges: dict | None = None,
        background: bool = False,
        question: str | None = None,
    ):
        self.model = DashboardModel(
            index, questions, judge=judge, params=params, jev_options=jev_options, judges=judges, question=question
        )
        self.background = background
        m = self.model
        self.status = views.StatusView(m)
        self.stepper = views.StepperView(m)
        self.pool = views.PoolView(m)
        self.context = views.ContextView(m)
        self.seeds = chart_views.SeedsView(m)
        self.terms = chart_views.TermsView(m)
        self.slope = chart_views.SlopeView(m)
        self.trajectory = chart_views.TrajectoryView(m)
        self.ranking = views.RankingView(m)
        self.diff = views.DiffView(m)
        self.passage = views.PassageView(m)
        self.export = ExportControls(
            m,
            charts={
                "seeds": self.seeds.widget,
                "terms": self.terms.widget,
                "slope": self.slope.widget,
                "trajectory": self.trajectory.widget,
            },
        )
        self.params = ParamsControls(m)
        self.judge = JudgeControls(m)
        self.pins = PinControls(m)
        self.method = MethodControls(m)  # SAG2, RM3, GAR-BM25 (paper B.3)
        self.feedback = FeedbackView(m)
        if background:
            m.recompute_later = m.recompute_in_background
        controls = w.VBox(
            [self.params.widget, self.judge.widget, self.method.widget, self.pins.widget, self.status.widget],
            layout=w.Layout(border="1px solid #ddd", padding="4px", width="100%"),
        )
        controls.add_class("sag2wb-controls")
        self.widget = w.VBox(
            [
                loader(),  # hidden: plotly.js from the plotly package, once per page, for every chart
                w.HTML(HEADING),
                self.stepper.widget,
                controls,
                # the pool gets the full width: ten columns do not fit half of JupyterLab's main
                # area with the file browser open (columns were clipped)
                _section(self.pool.title, self.pool.widget, "sag2wb-pool-section"),
                _two_columns(
                    _section(self.seeds.title, self.seeds.widget, "sag2wb-seeds-section"),
                    _section(self.context.title, self.context.widget, "sag2wb-context-section"),
                ),
                _section(self.passage.title, self.passage.widget, "sag2wb-passage-section"),
                _section(self.terms.title, self.terms.widget, "sag2wb-terms-section"),
                _section(self.feedback.title, self.feedback.widget, "sag2wb-feedback-section"),
                # the ranking's seven columns need the full width; the diff's two lists fit half
                _section(self.ranking.title, self.ranking.widget, "sag2wb-ranking-section"),
                _two_columns(
                    _section(self.slope.title, self.slope.widget, "sag2wb-slope-section"),
                    _section(self.diff.title, self.diff.widget, "sag2wb-diff-section"),
                ),
                _section(self.trajectory.title, self.trajectory.widget, "sag2wb-trajectory-section"),
                _section("Export", self.export.widget, "sag2wb-export-section"),
            ],
            layout=w.Layout(width="100%", max_width="1240px", overflow="hidden"),
        )
        self.widget.add_class("sag2wb-dashboard")

    # ---- notebook display ------------------------------------------------------------------
    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    def display(self):
        from IPython.display import display

        display(self.widget)

    # ---- conveniences for notebooks --------------------------------------------------------
    @property
    def trace(self):
        return self.model.trace

    @property
    def frames(self) -> dict:
        return self.model.frames


def dashboard_for(
    corpus=None,
    questions=None,
    judge: str | None = None,
    *,
    question: str | None = None,
    db=None,
    params: Params | None = None,
    **kwargs,
) -> Dashboard:
    """Index a folder of .md/.txt documents (or a corpus.json, or a folder holding one) and
    open the dashboard on `question` (an id; default the first). `questions`: a .jsonl path,
    Question objects or plain strings; by default the `<folder>.questions.jsonl` next to the
    folder or a `questions.jsonl` inside. With no corpus: the bundled teaching example
    (`workbench.runs.examples.default_example()`, the encyclopedia's enc-33, semantic judge).
    Gold naming no document of the index, or an unknown question id, is refused by name.
    The index goes to `.sag2wb/<name>.sqlite` (git-ignored) unless `db` says otherwise.

    >>> dashboard_for("sample_corpora/internal_docs").trace.question_id
    'docs-01'
    >>> dashboard_for("sample_corpora/internal_docs", question="docs-09").trace.question_id
    'docs-09'
    >>> dashboard_for("sample_corpora/internal_docs", questions=["How are refunds approved?"]).trace.question
    'How are refunds approved?'
    >>> sorted(p.name for p in Path(".sag2wb").iterdir())
    ['internal_docs.sqlite']
    >>> dashboard_for("sample_corpora/internal_docs", question="docs-99")
    Traceback (most recent call last):
    widgets.model.UnknownQuestion: unknown question 'docs-99'; the questions are docs-01, docs-02, ...
    """
    if corpus is None:
        example = default_example()
        corpus, default_questions = bundled_paths(example.corpus)
        if questions is None:
            questions = default_questions
            question = question or example.question_id
        judge = judge or example.judge
    judge = judge or "auto"
    path = Path(corpus)
    source = path / "corpus.json" if path.is_dir() and (path / "corpus.json").is_file() else path
    units = load_corpus(source)
    db = Path(db) if db else Path(".sag2wb") / f"{path.name or 'corpus'}.sqlite"
    questions_path = questions if isinstance(questions, (str, Path)) and str(questions).endswith(".jsonl") else None
    if questions is None:
        questions_path = find_questions(path)
        if questions_path is None:
            raise ValueError(f"{path}: no questions file found next to it; pass questions=[...]")
    if questions_path is not None:
        questions = load_questions(questions_path)
    elif isinstance(questions, str):
        questions = [questions]
    questions = [q if isinstance(q, Question) else Question(f"q{i + 1}", str(q)) for i, q in enumerate(questions)]
    if question is not None and question not in {q.id for q in questions}:
        raise UnknownQuestion(question, [q.id for q in questions])  # before the index is built
    index, _ = open_or_build(units, db, source=str(source))
    # the CLI's check (eval, ablate): gold that names nothing here would score 0 silently
    check_gold(questions, set(index.documents.values()), questions_path or "questions")
    return Dashboard(index, questions, judge=judge, params=params, question=question, **kwargs)
