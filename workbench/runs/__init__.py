"""Runs of many questions: experiments (the one loop: resume, failures, progress), evaluation
(a one-configuration experiment), candidate policies, resume files, results and plots, and
the one task type executors run for them.

>>> from workbench.runs import Config, Experiment, evaluate
"""

from workbench.runs.evaluation import EvalResult, evaluate
from workbench.runs.experiment import Experiment, paper_ablation, run_experiment
from workbench.runs.policies import POLICIES, Config, final_only_trace
from workbench.runs.records import ExperimentError, JudgeFailed, Outcome, QuestionFailed, question_record
from workbench.runs.results import Results, ablation_markdown, ablation_report, paired_interval
from workbench.runs.resume import load_resume, record_fingerprint
from workbench.runs.tasks import JudgeSource, QuestionTask

__all__ = [
    "POLICIES",
    "Config",
    "EvalResult",
    "Experiment",
    "ExperimentError",
    "JudgeFailed",
    "JudgeSource",
    "Outcome",
    "QuestionFailed",
    "QuestionTask",
    "Results",
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
