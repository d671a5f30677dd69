"""Self-contained HTML pages of the workbench's results: open them from a file, with no
kernel, no install and no network (docs/reports.md).

`write_trajectory_page(trace, path, index=None)` writes the page of one trajectory: the
round stepper, the candidate pool, seeds, term priorities with their components, context,
score changes, the seed → term → passage Sankey and a passage view, drawn from the same
view data as the dashboard (`workbench.viewdata`). The command is `sag2wb report TRACE
--out PAGE.html [--db DB]`, or `trace.to_html(path, index)`. `write_experiment_page(results,
path, index)` writes the page of `eval`/`ablate` results (`read_result(path)`; the command is
`sag2wb report A.json [--compare B.json]`), `Results.to_html(path)` that of an experiment in memory.

>>> from workbench.engine import Run
>>> from workbench.judges import LexicalJudge
>>> trace = Run(index, questions[1], judge=LexicalJudge(index)).run()
>>> write_trajectory_page(trace, "docs-02.html", index)
PosixPath('docs-02.html')
>>> text = open("docs-02.html", encoding="utf-8").read()
>>> read_data(text)["rounds"][1]["selected"][:3], "<script src" in text, "<link" in text
(['验证', '不', '只'], False, False)
"""

from __future__ import annotations

from pathlib import Path

from workbench.report.experiment import experiment_data, experiment_page
from workbench.report.inputs import read_trace
from workbench.report.page import Page, read_blocks, read_data, render
from workbench.report.results_input import from_results, read_result
from workbench.report.trajectory import trajectory_data, trajectory_page
from workbench.safeio import atomic_write_text, check_output

__all__ = [
    "Page",
    "experiment_data",
    "experiment_html",
    "experiment_page",
    "read_blocks",
    "read_data",
    "read_result",
    "read_trace",
    "render",
    "trajectory_data",
    "trajectory_html",
    "trajectory_page",
    "write_experiment_page",
    "write_results_page",
    "write_trajectory_page",
]


def trajectory_html(trace, index=None, *, source: str | None = None, title: str | None = None) -> str:
    """The whole trajectory page of `trace` as HTML text (index: passage texts, surface forms)."""
    return render(trajectory_page(trace, index, source=source, title=title))


def write_trajectory_page(
    trace, path, index=None, *, force: bool = False, source: str | None = None, record: str = "report --out"
) -> Path:
    """Write the trajectory page of `trace` to `path` atomically; an existing file that sag2wb
    did not write is refused (workbench.safeio.OutputError) unless `force`."""
    out = check_output(path, force=force, what="page")
    atomic_write_text(out, trajectory_html(trace, index, source=source), record=record)
    return out


def experiment_html(results, index=None, *, metric: str = "R@10", paper: str = "auto") -> str:
    """The whole experiment page of `results` (`read_result(...)` of one or two result files)."""
    return render(experiment_page(results, index, metric=metric, paper=paper))


def write_experiment_page(
    results,
    path,
    index=None,
    *,
    metric: str = "R@10",
    paper: str = "auto",
    force: bool = False,
    record: str = "report --out",
) -> Path:
    """Write the experiment page of `results` to `path` atomically (refused as for the trajectory page)."""
    out = check_output(path, force=force, what="page")
    atomic_write_text(out, experiment_html(results, index, metric=metric, paper=paper), record=record)
    return out


def write_results_page(results, path, *, traces=None, index=None, metric: str = "R@10", force: bool = False) -> Path:
    """Write the experiment page of an in-memory `Results` (`Results.to_html(path)` calls this);
    `traces`: {config: {question id: Trace}} (`experiment.traces`), the trajectories it opens."""
    result = from_results(results, traces)
    out = check_output(path, force=force, what="page")
    atomic_write_text(out, experiment_html([result], index, metric=metric), record="Results.to_html")
    return out
