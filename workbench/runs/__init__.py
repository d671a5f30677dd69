"""Runs of many questions: experiments (the one loop: resume, failures, progress), evaluation
(a one-configuration experiment), how a run goes (`RunOptions`, one frozen value), the
records' shape (`EVALUATION`, `EXPERIMENT`), candidate policies, resume files, results and
plots, and the one task type executors run for them.

>>> from workbench.runs import Config, Experiment, RunOptions, evaluate

This face also keeps the older call forms working, with a DeprecationWarning:
`evaluate(index, questions, judge, params, progress=..., **jev_options)` and `question_record`
(workbench/runs/legacy.py, docs/deprecations.md).
"""

from workbench.runs.evaluation import EvalResult
from workbench.runs.experiment import Experiment, paper_ablation, run_experiment
from workbench.runs.legacy import evaluate, question_record
from workbench.runs.options import Hooks, RunOptions
from workbench.runs.policies import POLICIES, Config, final_only_trace
from workbench.runs.records import (
    EVALUATION,
    EXPERIMENT,
    ExperimentError,
    JudgeFailed,
    Outcome,
    QuestionFailed,
    RecordShape,
)
from workbench.runs.results import Results, ablation_markdown, ablation_report, paired_interval
from workbench.runs.resume import load_resume, record_fingerprint
from workbench.runs.tasks import JudgeSource, QuestionTask

__all__ = [
    "EVALUATION",
    "EXPERIMENT",
    "POLICIES",
    "Config",
    "EvalResult",
    "Experiment",
    "ExperimentError",
    "Hooks",
    "JudgeFailed",
    "JudgeSource",
    "Outcome",
    "QuestionFailed",
    "QuestionTask",
    "RecordShape",
    "Results",
    "RunOptions",
    "ablation_markdown",
    "ablation_report",
    "evaluate",
    "final_only_trace",
    "load_resume",
    "paired_interval",
    "paper_ablation",
    "question_record",
    "record_fingerprint",
    "run_experiment",
]
