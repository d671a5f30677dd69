"""Self-contained HTML pages of the workbench's results: open them from a file, with no
kernel, no install and no network (docs/reports.md).

`write_trajectory_page(trace, path, index=None)` writes the page of one trajectory: the
round stepper, the candidate pool, seeds, term priorities with their components, context,
score changes, the seed → term → passage Sankey and a passage view, drawn from the same
view data as the dashboard (`workbench.viewdata`). The command is `sag2wb report TRACE
--out PAGE.html [--db DB]`. (`Trace` itself stays a leaf of the package and has no
`to_html`: `Trace._repr_html_` is the notebook's table fragment, this is the page.)

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

from workbench.report.inputs import read_trace
from workbench.report.page import Page, read_data, render
from workbench.report.trajectory import trajectory_data, trajectory_page
from workbench.safeio import atomic_write_text, check_output

__all__ = [
    "Page",
    "read_data",
    "read_trace",
    "render",
    "trajectory_data",
    "trajectory_html",
    "trajectory_page",
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
