"""The run layer's older call forms, kept working through its package face (`workbench.runs`)
with a DeprecationWarning (docs/deprecations.md). Code in this repository uses the new forms.

>>> import warnings
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     old = evaluate(index, questions, "lexical", progress=False)
>>> old.metrics == evaluation.evaluate(index, questions, "lexical", options=RunOptions(progress=False)).metrics
True
>>> caught[0].category.__name__
'DeprecationWarning'
"""

from __future__ import annotations

import contextlib

from workbench.deprecation import deprecated
from workbench.index.units import Question
from workbench.judges.registry import JudgeSpec
from workbench.judgment import JudgeError
from workbench.params import Params
from workbench.runs import evaluation
from workbench.runs.options import RunOptions, from_keywords
from workbench.runs.records import EVALUATION, EXPERIMENT
from workbench.runs.tasks import judge_spec
from workbench.trace import Trace


def evaluate(
    index,
    questions: list[Question],
    judge: str | JudgeSpec = "lexical",
    params: Params | None = None,
    options: RunOptions | None = None,
    **keywords,
) -> evaluation.EvalResult:
    """`evaluation.evaluate`, also taking the older keywords (deprecated): RunOptions' fields
    (`progress=`, `resume_path=`, `executor=`, ...), Hooks' callbacks (`judge_for=`,
    `map_outcomes=`, `on_arrival=`) and JEV's options (`endpoint=`, `cache_dir=`, ...)."""
    options, judge_options = from_keywords(options, keywords, "evaluate")
    if judge_options:  # into the spec, as before only for jev; the result names the judge as given
        if isinstance(judge, str) and options.label is None:
            options = options.replace(label=judge)
        with contextlib.suppress(JudgeError):  # raised (or stood in for by judge_for) where evaluate parses it
            judge = judge_spec(judge, judge_options)
    return evaluation.evaluate(index, questions, judge, params, options)


def question_record(question: Question, trace: Trace, config: str | None = None) -> dict:
    """An evaluation's record (`config=None`) or configuration `config`'s row (deprecated: the
    record shapes make them, `EVALUATION.record(...)` / `EXPERIMENT.record(...)`)."""
    deprecated(
        "question_record is deprecated: use EVALUATION.record(question, trace, name) or "
        "EXPERIMENT.record(question, trace, config) (workbench.runs.records)"
    )
    if config is None:
        return EVALUATION.record(question, trace, "eval")
    return EXPERIMENT.record(question, trace, config)
