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
import os
import sqlite3
from pathlib import Path

import ipywidgets as w

from workbench.index.corpora import check_gold, find_questions, load_corpus, load_questions
from workbench.index.store import open_or_build
from workbench.index.units import Question
from workbench.judgment import describe_value
from workbench.params import Params
from workbench.runs.examples import bundled_paths, default_example, examine
from workbench.safeio import InputError

from . import chart_views, views
from .chart import loader
from .controls import JudgeControls, ParamsControls, PinControls
from .export import ExportControls
from .feedback_view import FeedbackView, MethodControls
from .model import DashboardModel, UnknownQuestion, question_list

HEADING = (
    "<div class='sag2wb-heading' style='line-height:1.4'><div style='font-size:16px;font-weight:600'>"
    "SAG2 trajectory: seed → term → passage</div>"
    "<div style='font-size:13px;color:#444;max-width:70em'>Round 0 is a plain BM25 search for the question. "
    "In every later round the best passages so far (the <i>seeds</i>) give <i>terms</i>, often names and "
    "identifiers the question never mentions; each term is searched on its own and brings new passages, which "
    "the judge scores. Step through the rounds to see which term brought which passage; ★ marks gold evidence."
    "</div></div>"
)


def opening_note(dash: Dashboard) -> str:
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
        params: Params | dict | None = None,
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
        m.background = background
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
    params: Params | dict | None = None,
    **kwargs,
) -> Dashboard:
    """Index a folder of .md/.txt documents (or a corpus.json, or a folder holding one) and
    open the dashboard on `question` (an id; default the first). `questions`: a questions file
    or BEIR folder (a `Path`, or a string naming one: `"q.jsonl"`), Question objects, question
    texts, or ids of the corpus's own questions (`["docs-03", "docs-05"]`), alone or in a list;
    by default the `<folder>.questions.jsonl` next to the folder or a `questions.jsonl` inside.
    `judge`: a name (`"lexical"`), a JudgeSpec, a judge object or a function; `params`: a Params
    or a dict of overrides (`{"L": 10}`). With no corpus: the bundled teaching example
    (`workbench.runs.examples.default_example()`, the encyclopedia's enc-33, semantic judge).
    A missing questions file, gold naming no document of the index, an unknown question id, a
    `db` that cannot be written or a value of another type is refused by name (an InputError).
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
    unknown = sorted(set(kwargs) - DASHBOARD_OPTIONS)
    if unknown:
        raise InputError(f"dashboard_for: unknown argument(s) {', '.join(unknown)}; known: {', '.join(KNOWN)}")
    if corpus is None:
        example = default_example()
        corpus, default_questions = bundled_paths(example.corpus)
        if questions is None:
            questions = default_questions
            question = question or example.question_id
        judge = judge or example.judge
    judge = judge or "auto"
    path = _path("corpus", corpus, "a folder of .md/.txt files or a corpus.json")
    question = _question_id(question)
    source = path / "corpus.json" if path.is_dir() and (path / "corpus.json").is_file() else path
    units = load_corpus(source)
    db = _path("db", db, "a file path for the index") if db not in (None, "") else None
    db = db or Path(".sag2wb") / f"{path.name or 'corpus'}.sqlite"
    if db.is_dir():
        raise InputError(f"db={db}: is a folder; give a file path for the index (e.g. {db / 'index.sqlite'})")
    questions, questions_path = resolve_questions(questions, path)
    if question is not None and question not in {q.id for q in questions}:
        raise UnknownQuestion(question, [q.id for q in questions])  # before the index is built
    try:
        index, _ = open_or_build(units, db, source=str(source))
    except (OSError, sqlite3.Error) as exc:  # a read-only or full folder: named, not our temporary file
        why = getattr(exc, "strerror", None) or exc
        raise InputError(
            f"db={db}: cannot write the index there ({why}); pass db= a path in a writable folder"
        ) from None
    # the CLI's check (eval, ablate): gold that names nothing here would score 0 silently
    check_gold(questions, set(index.documents.values()), questions_path or "questions")
    return Dashboard(index, questions, judge=judge, params=params, question=question, **kwargs)


DASHBOARD_OPTIONS = {"jev_options", "judges", "background"}
KNOWN = ["corpus", "questions", "judge", "question", "db", "params", *sorted(DASHBOARD_OPTIONS)]
# a string with one of these endings (and no spaces) names a questions file, never a question
QUESTION_FILE_SUFFIXES = (".jsonl", ".json", ".ndjson", ".txt", ".tsv", ".csv")


def _path(name: str, value, what: str) -> Path:
    if isinstance(value, (str, os.PathLike)) and "\0" not in str(value) and str(value):
        return Path(value)
    raise InputError(f"{name}={describe_value(value)}: give {what} (a path)")


def _question_id(value) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)  # ids are strings once read ("_id": 5 is "5")
    raise InputError(f"question={describe_value(value)}: give a question id, e.g. 'docs-01'")


def _source(value) -> Path | str | None:
    """The questions file or folder `value` names (or `irds:NAME`); None: it names none."""
    if isinstance(value, os.PathLike):
        return Path(value)
    if not isinstance(value, str) or "\0" in value or any(c.isspace() for c in value) or not value:
        return None
    if value.startswith("irds:"):
        return value
    p = Path(value)
    return p if p.exists() or p.suffix.lower() in QUESTION_FILE_SUFFIXES or os.sep in value else None


def resolve_questions(value, corpus: Path) -> tuple[list[Question], Path | str | None]:
    """(the questions, the file they came from) for dashboard_for's `questions` (see there)."""
    source = find_questions(corpus) if value is None else _source(value)
    if value is None and source is None:
        raise InputError(f"{corpus}: no questions file found next to it; pass questions=[...] or a questions file")
    if source is not None:
        if isinstance(source, Path) and not source.exists():
            raise InputError(f"questions={str(source)!r}: no such file or folder; give a questions .jsonl")
        try:
            loaded = load_questions(source)
        except OSError as exc:
            raise InputError(f"questions={source}: cannot read it ({exc.strerror or exc})") from None
        if not loaded:
            raise InputError(f"questions={source}: no questions in it")
        return loaded, source
    items = question_list(value)  # a Question or text alone, or a list of them; anything else refused
    texts = [(i, q.question) for i, q in enumerate(items) if not q.id]
    own = _own_questions(corpus) if texts else {}
    ids = [(i, t) for i, t in texts if t in own]
    if ids:  # ids of the corpus's own questions: every string must be one
        for _i, t in texts:
            if t not in own:
                raise UnknownQuestion(t, list(own)) from None
        return [own[q.question] if not q.id else q for q in items], find_questions(corpus)
    return [q if q.id else Question(f"q{i + 1}", q.question) for i, q in enumerate(items)], None


def _own_questions(corpus: Path) -> dict[str, Question]:
    """The corpus's own questions by id (its default questions file), {} when it has none."""
    found = find_questions(corpus)
    try:
        return {q.id: q for q in load_questions(found)} if found is not None else {}
    except (ValueError, OSError):  # unreadable: the strings are question texts, as without a file
        return {}
