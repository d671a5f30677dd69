"""The dashboard's one model of UI state: question, round, params, judge, pins.

Views subscribe to it and redraw from the trace frames; controls change it and ask the
engine to re-run. No ipywidgets here, so the model is tested without a browser.

>>> model = DashboardModel(index, questions, judge="lexical")
>>> model.set_params(L=10)       # re-runs from the first round the change affects
>>> model.frames["terms"].query("round == 1 and selected").shape[0]
10
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

from workbench.deprecation import keep_old_names
from workbench.engine import Run
from workbench.feedback import FeedbackRun
from workbench.index.units import Question
from workbench.judges.base import FunctionJudge
from workbench.judges.registry import JudgeSpec, UnknownJudge, picker_choices, valid_judges
from workbench.judgment import JudgeError, JudgmentMemo, describe_value
from workbench.params import Params, ParamsError, earliest_affected_round
from workbench.protocols import is_judge_object
from workbench.run_arguments import params_from, pins_from
from workbench.safeio import InputError
from workbench.terms import TERM_WEIGHTINGS, TermWeightingError
from workbench.trace import Trace

TRACE, ROUND, STATUS, PASSAGE = "trace", "round", "status", "passage"
keep_old_names(__name__, {"JEV_KEY_VARIABLES": "workbench.judges.jev.client:KEY_VARIABLES"})


def jev_configured(jev_options: dict | None = None) -> bool:
    """JEV is offered when an API key is in the environment or a judgment cache is configured
    (the jev kind's own readiness check, `JudgeSpec.unavailable`)."""
    return JudgeSpec.parse("jev", **(jev_options or {})).unavailable() is None


class UnknownQuestion(InputError):
    """A question id the questions do not have; the message lists a few that exist."""

    def __init__(self, question_id: str, ids: list[str]):
        shown = ", ".join(ids[:8]) + (f" … ({len(ids)} in all)" if len(ids) > 8 else "")
        super().__init__(f"unknown question {question_id!r}; the questions are {shown}")


def question_list(questions) -> list[Question]:
    """Questions as the dashboard holds them: a Question or a question text alone, or a list of
    them (texts get no id here: the model numbers them q1, q2, ...); anything else is refused.

    >>> [q.question for q in question_list("How are refunds approved?")]
    ['How are refunds approved?']
    >>> question_list([5])
    Traceback (most recent call last):
    ...
    workbench.safeio.InputError: questions[0]=5: give a Question or a question text (a string)
    """
    if isinstance(questions, (str, Question)):
        questions = [questions]
    if questions is None or isinstance(questions, (bytes, dict)) or not hasattr(questions, "__iter__"):
        raise InputError(f"questions={describe_value(questions)}: give a list of Question objects or question texts")
    out = []
    for i, q in enumerate(questions):
        if not isinstance(q, (str, Question)):
            raise InputError(f"questions[{i}]={describe_value(q)}: give a Question or a question text (a string)")
        out.append(q if isinstance(q, Question) else Question("", q))
    if not out:
        raise InputError("questions: none given; give at least one Question or question text")
    return out


class Interrupted(Exception):
    """The researcher pressed Stop; the previous trajectory stays."""


@dataclass
class Status:
    busy: bool = False
    done: int = 0  # rounds computed in the current recomputation
    total: int = 0
    message: str = ""
    error: str | None = None  # the last failure (judge, params, loading), shown in the dashboard
    seconds: float = 0.0


class DashboardModel:
    """UI state + the current Run/Trace. `subscribe(fn)` calls fn(model, what) with what in
    {"trace", "round", "status"}; views read `model.frames` and `model.round`.

    The judge is held as a value, `judge`: a JudgeSpec (its options checked by its kind's
    declaration once, when chosen), or the name of one of the notebook's own `judges`;
    `judge_spec` is its text, what the picker shows."""

    def __init__(
        self,
        index,
        questions,
        *,
        judge="lexical",
        params: Params | dict | None = None,
        jev_options: dict | None = None,
        judges: dict | None = None,
        question: str | None = None,
    ):
        self.index = index
        self.questions = question_list(questions)
        for i, q in enumerate(self.questions):
            if not q.id:
                self.questions[i] = Question(f"q{i + 1}", q.question, q.gold, q.type, q.hops, q.answer)
        self.has_gold = any(q.gold for q in self.questions)
        # options a kind gets in this dashboard (JEV's endpoint and cache), checked by its declaration now
        self.configured = {"jev": JudgeSpec.parse("jev", **jev_options)} if jev_options else {}
        self.extra_judges = dict(judges or {})  # name -> callable or judge object
        self.memo = JudgmentMemo()
        self._judges: dict = {}
        self._listeners: list = []
        self.background = False  # re-runs on a worker thread (the dashboard's Stop button can interrupt them)
        self._cancel = threading.Event()
        self._lock = threading.RLock()
        # one redraw cycle at a time: with background re-runs, a cycle on the worker thread and
        # one on the kernel's thread (a slider move) could interleave, and a view could end on
        # the older cycle's figure. Serialized, the last cycle to touch a view reads the newest
        # state, so it is what stays drawn.
        self._emit_lock = threading.RLock()
        self.status = Status()
        self.question = self.questions[0] if question is None else self._question(question)
        self.params = params_from(params, Params())
        self.judge: JudgeSpec | str = self._choice(judge)
        self.pins: dict = {}
        self.round = 0
        self.run: Run | FeedbackRun | None = None  # the run behind the shown (last good) trace
        self.trace: Trace | None = None
        self.frames: dict = {}
        self.selected_unit: int | None = None  # the passage the passage view shows
        # +1 per shown trace: charts stamp it, tests compare it with the stepper
        self.generation = 0
        self.reference: Trace | None = None  # a trace to diff against (the previous one unless fixed)
        self.reference_fixed = False
        self.last_recompute: dict = {}
        self.method = "sag2"  # or RM3 / GAR-BM25 (B.3): widgets/feedback_view.py
        self.recompute()

    # ---- subscription ----------------------------------------------------------------------
    def subscribe(self, fn):
        self._listeners.append(fn)
        return fn

    def _emit(self, what: str):
        failures = []
        with self._emit_lock:
            for fn in list(self._listeners):
                try:
                    fn(self, what)
                except Exception as exc:
                    # one broken view must not leave the others on the old state
                    failures.append(f"{getattr(fn, '__qualname__', fn)}: {type(exc).__name__}: {exc}")
        if failures:
            self.status.error = "a view failed to redraw: " + "; ".join(failures)
            if what != STATUS:
                self._emit(STATUS)
            if os.environ.get("SAG2WB_RAISE_VIEW_ERRORS") == "1":
                raise RuntimeError(self.status.error)

    # ---- what the pickers offer ------------------------------------------------------------
    def judge_options(self) -> list[str]:
        """The registry's choices (`picker_choices`: a judge that needs gold only when the question
        has gold, jev only when configured), then the notebook's own judges, then the current one."""
        out = picker_choices(gold=bool(self.question.gold), configured=self.configured)
        out.extend(self.extra_judges)
        if self.judge_spec not in out:
            out.append(self.judge_spec)
        return out

    @property
    def judge_spec(self) -> str:
        """The current judge's text, as the picker shows it (`judge` is the value)."""
        return str(self.judge)

    @staticmethod
    def term_weightings() -> list[str]:
        return list(TERM_WEIGHTINGS)

    @property
    def rounds_count(self) -> int:
        return len(self.trace.rounds) if self.trace else 0

    @property
    def show_gold(self) -> bool:
        return bool(self.question.gold)

    # ---- judges ----------------------------------------------------------------------------
    def _choice(self, judge) -> JudgeSpec | str:
        """A judge as the model holds it: a JudgeSpec (`auto` resolved for this corpus, the
        dashboard's options for its kind added), or the name of a notebook judge (an object or
        a function, offered under its name)."""
        if is_judge_object(judge) and isinstance(getattr(judge, "name", None), str):
            self.extra_judges[judge.name] = judge  # a judge object: offered under its own name
            return judge.name
        if callable(judge) and not isinstance(judge, str):
            name = getattr(judge, "__name__", "function")
            self.extra_judges[name] = judge
            return name
        if isinstance(judge, str) and judge in self.extra_judges:
            return judge
        if judge is not None and not isinstance(judge, (str, JudgeSpec)):
            raise JudgeError(
                f"judge={describe_value(judge)}: give a judge name ('lexical', 'semantic:gamma=0.5', ...), "
                "a JudgeSpec, a judge object or a function"
            )
        try:
            spec = JudgeSpec.parse(judge).resolve(self.index)  # "auto": the corpus's default judge
        except UnknownJudge:
            if not self.extra_judges:
                raise
            raise UnknownJudge(f"unknown judge {judge!r}; valid judges: {valid_judges(self.extra_judges)}") from None
        configured = self.configured.get(spec.name)
        return spec.with_options(**dict(configured.options)) if configured is not None else spec

    def judge_for(self, judge, question: Question):
        """The judge object for a choice (a JudgeSpec, its text or a notebook judge's name),
        kept, so re-runs see the same object and judge key."""
        choice = self._choice(judge)
        if isinstance(choice, str):
            if choice not in self._judges:
                obj = self.extra_judges[choice]
                self._judges[choice] = obj if is_judge_object(obj) else FunctionJudge(obj, name=choice)
            return self._judges[choice]
        if choice.kind.needs_gold:
            if not question.gold:
                raise JudgeError(f"judge {str(choice)!r} needs gold labels; this question has none")
            key = (choice, question.gold)
            if key not in self._judges:
                self._judges[key] = choice.build(self.index, gold=question.gold)
            return self._judges[key]
        if choice not in self._judges:
            problem = choice.unavailable()
            if problem is not None:
                raise JudgeError(f"{problem} (Dashboard(..., jev_options={{'cache_dir': ...}}) gives JEV a cache)")
            self._judges[choice] = choice.build(self.index)
        return self._judges[choice]

    # ---- changing the state ----------------------------------------------------------------
    def _question(self, question_id: str) -> Question:
        q = next((q for q in self.questions if q.id == question_id), None)
        if q is None:
            raise UnknownQuestion(question_id, [q.id for q in self.questions])
        return q

    def set_question(self, question_id: str):
        q = self._question(question_id)
        if q == self.question:
            return
        self.question, self.pins, self.run = q, {}, None
        if isinstance(self.judge, JudgeSpec) and not q.gold and self.judge.kind.needs_gold:
            self.judge = JudgeSpec.parse("lexical")
        self.recompute_later(new_question=True)

    def validate_params(self, **changes) -> Params:
        """The params with these changes, or ParamsError / TermWeightingError with the message."""
        params = params_from(changes, self.params, "set_params")  # an unknown name: ParamsError, not TypeError
        if params.term_weighting not in TERM_WEIGHTINGS and ":" not in params.term_weighting:
            raise ParamsError(
                f"unknown term weighting {params.term_weighting!r}; registered: {', '.join(sorted(TERM_WEIGHTINGS))}"
            )
        return params

    def set_params(self, **changes):
        """Apply parameter changes (raises ParamsError without changing anything when invalid)."""
        params = self.validate_params(**changes)
        if params == self.params:
            return
        self.params = params
        self.recompute_later()

    def set_judge(self, judge):
        """Choose the judge: a text ('semantic:gamma=0.5'), a JudgeSpec, a judge object or a function."""
        choice = self._choice(judge)
        self.judge_for(choice, self.question)  # fails now (JudgeError) for an unusable judge
        if choice == self.judge:
            return
        self.judge = choice
        self.recompute_later()

    def pin(self, round_no: int, unit_id: int, score: float):
        self.pins = {**self.pins, **pins_from({(round_no, unit_id): score})}  # refused by name: a score outside [0, 1]
        self.recompute_later()

    def clear_pins(self):
        if self.pins:
            self.pins = {}
            self.recompute_later()

    def set_round(self, round_no: int):
        round_no = max(0, min(int(round_no), self.rounds_count - 1))
        if round_no != self.round:
            self.round = round_no
            self._emit(ROUND)

    def select_unit(self, unit_id: int | None):
        """Show this passage in the passage view (a click on a table row, or the picker)."""
        unit_id = None if unit_id is None else int(unit_id)
        if unit_id != self.selected_unit:
            self.selected_unit = unit_id
            self._emit(PASSAGE)

    def fix_reference(self, fixed: bool = True):
        """Keep the current trace as the diff reference (otherwise: the previous trace)."""
        self.reference_fixed = fixed
        if fixed:
            self.reference = self.trace
        self._emit(TRACE)

    def interrupt(self):
        """Ask a running recomputation to stop after the current round."""
        self._cancel.set()

    # ---- the engine ------------------------------------------------------------------------
    def recompute(self, new_question: bool = False):
        """Re-run from the earliest affected round (judgments come from the shared memo).

        A judge that fails, or an interruption, keeps the last good trajectory on display and
        records the message in `status.error`."""
        with self._lock:
            self._cancel.clear()
            start = time.perf_counter()
            self.status = Status(busy=True, total=self.params.H + 1, message="running")
            self._emit(STATUS)
            try:
                judge = self.judge_for(self.judge, self.question)
                if self.run is None or new_question:
                    run = (
                        Run(self.index, self.question, self.params, judge, pins=self.pins, memo=self.memo)
                        if self.method == "sag2"
                        else FeedbackRun(self.method, self.index, self.question, self.params, judge, memo=self.memo)
                    )
                    from_round = 0
                else:
                    run = self.run.rerun(params=self.params, judge=judge, pins=self.pins)
                    from_round = len(run.rounds)
                self.status.done = len(run.rounds)
                while run.step() is not None:
                    self.status.done = len(run.rounds)
                    self._emit(STATUS)
                    if self._cancel.is_set() and not run.finished:
                        raise Interrupted(
                            f"interrupted after round {len(run.rounds) - 1}; showing the previous trajectory"
                        )
                trace = run.trace()
            except (JudgeError, TermWeightingError, ParamsError, Interrupted) as exc:
                self.status = Status(
                    error=str(exc), message="kept the last good trajectory", seconds=time.perf_counter() - start
                )
                self._emit(STATUS)
                return
            failed = next((r for r in trace.rounds if r.error), None)
            self.last_recompute = {"from_round": from_round, "seconds": time.perf_counter() - start, **trace.stats}
            if failed is not None:
                self.status = Status(
                    error=f"round {failed.round}: {failed.stop}: {failed.error}",
                    message="kept the last good trajectory" if self.trace is not None else "",
                    seconds=time.perf_counter() - start,
                )
                if self.trace is not None and not new_question:
                    self._emit(STATUS)
                    return
            else:
                self.status = Status(
                    message=f"re-ran from round {from_round}",
                    done=len(trace.rounds),
                    total=len(trace.rounds),
                    seconds=time.perf_counter() - start,
                )
            if not self.reference_fixed:
                self.reference = self.trace if not new_question else None
            self.run, self.trace = run, trace
            from .data import view_frames  # the frames plus surface forms and every retrieving term

            self.frames = view_frames(trace, self.index)
            self.generation += 1
            self.round = min(self.round, len(trace.rounds) - 1) if not new_question else 0
        self._emit(TRACE)
        self._emit(STATUS)

    def recompute_later(self, new_question: bool = False):
        """How a change asks for a re-run: now, on this thread, or on a worker thread when
        `background` is set (`recompute_in_background`)."""
        if self.background:
            self.recompute_in_background(new_question=new_question)
        else:
            self.recompute(new_question=new_question)

    def recompute_in_background(self, new_question: bool = False) -> threading.Thread:
        """Recompute on a worker thread so the Stop button stays responsive."""
        thread = threading.Thread(target=self.recompute, kwargs={"new_question": new_question}, daemon=True)
        thread.start()
        return thread

    # ---- derived data for views (all from frames) ------------------------------------------
    def affected_round(self, new: Params) -> int:
        return earliest_affected_round(self.params, new)
