"""Runs of many questions: experiments, evaluation (a one-configuration experiment), resume, results.

>>> from workbench.runs import Config, Experiment, evaluate
"""
from workbench.runs.evaluation import EvalResult, QuestionFailed, evaluate
from workbench.runs.experiment import (
    Config,
    Experiment,
    ExperimentError,
    Results,
    paired_interval,
    paper_ablation,
    run_experiment,
)

__all__ = [
    "Config", "EvalResult", "Experiment", "ExperimentError", "QuestionFailed", "Results", "evaluate",
    "paired_interval", "paper_ablation", "run_experiment",
]
