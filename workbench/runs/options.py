"""How a run goes, as one frozen value: `RunOptions` (progress, resume file, trace folder, traces
kept, failures, the shared memo, the executor, the bar's label) with the caller's callbacks
grouped in `Hooks`. `evaluate(index, questions, judge, params, options)` and
`Experiment(index, questions, configs, options)` both take it; what a run computes (params,
the judge and its options, the policy) is in the configuration, never here.

>>> options = RunOptions(progress=False, keep_going=True)
>>> options.replace(resume_path="runs.jsonl").resume_path
'runs.jsonl'
>>> RunOptions(hooks=Hooks(judge_for=print)).one_configuration_only()
['hooks.judge_for']
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from workbench.deprecation import deprecated
from workbench.judgment import JudgmentMemo


@dataclass(frozen=True)
class Hooks:
    """The caller's callbacks. `judge_for(question) -> judge`: the judge of a one-configuration run
    instead of building it (its `key` attribute names its answers for resume); `map_outcomes(fn,
    questions)`: how the questions to run are mapped to `Outcome`s (a thread pool's ordered map
    runs them at once; consumed in question order); `on_arrival(outcome)`: sees each task outcome
    as it arrives from an executor's worker."""

    judge_for: Callable[[Any], Any] | None = None
    map_outcomes: Callable[[Callable, list], Any] | None = None
    on_arrival: Callable[[Any], None] | None = None


@dataclass(frozen=True)
class RunOptions:
    """How a run goes. `resume_path`: a JSONL file receiving one record per finished question
    (reused when its fingerprint is unchanged); `trace_dir`: each question's trace as JSON there;
    `keep_traces`: traces kept in memory; `keep_going`: failed questions listed, not raised;
    `memo`: a JudgmentMemo to share with the caller; `executor`: a workbench.executors executor
    (threads, processes, Dask: results identical to a sequential run); `label`: the progress
    bar's name (an evaluation's judge, as its result names it)."""

    progress: bool = True
    resume_path: str | Path | None = None
    trace_dir: str | Path | None = None
    keep_traces: bool = False
    keep_going: bool = False
    memo: JudgmentMemo | None = None
    executor: Any = None
    label: str | None = None
    hooks: Hooks = field(default_factory=Hooks)

    def replace(self, **changes) -> RunOptions:
        return replace(self, **changes)

    def one_configuration_only(self) -> list[str]:
        """The options given that only a one-configuration run can honour (trace files are named
        by question; the judge and map hooks stand for one configuration's)."""
        given = [name for name in ("judge_for", "map_outcomes") if getattr(self.hooks, name) is not None]
        return (["trace_dir"] if self.trace_dir is not None else []) + [f"hooks.{name}" for name in given]


RUN_FIELDS = frozenset(f.name for f in fields(RunOptions)) - {"hooks"}
HOOK_FIELDS = frozenset(f.name for f in fields(Hooks))


def from_keywords(options: RunOptions | None, keywords: dict, what: str) -> tuple[RunOptions, dict]:
    """The older keyword form (`progress=False, resume_path=..., judge_for=..., endpoint=...`) as
    (RunOptions, the rest: a judge's options), with a DeprecationWarning naming the new form;
    (options, {}) when no keyword is given."""
    options = options if options is not None else RunOptions()
    if not keywords:
        return options, {}
    deprecated(
        f"{what}'s option keywords ({', '.join(sorted(keywords))}) are deprecated: pass "
        f"options=RunOptions(...) (callbacks in Hooks), and a judge's options in its JudgeSpec",
        stacklevel=4,
    )
    run = {k: v for k, v in keywords.items() if k in RUN_FIELDS}
    hooks = {k: v for k, v in keywords.items() if k in HOOK_FIELDS}
    rest = {k: v for k, v in keywords.items() if k not in RUN_FIELDS and k not in HOOK_FIELDS}
    if hooks:
        run["hooks"] = replace(options.hooks, **hooks)
    return replace(options, **run), rest
