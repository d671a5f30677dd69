"""What each view shows, computed from the trace frames only: the dashboard's name for
`workbench.viewdata`, which the HTML page (workbench/report/) reads too, so both show the
same pool, seeds, term components, credited via-terms and score changes.

>>> from workbench.engine import Run
>>> from workbench.judges import LexicalJudge
>>> frames = view_frames(Run(index, questions[0], judge=LexicalJudge(index)).run(), index)
>>> pool_table(frames, round_no=1, show_gold=True)[["rank", "title", "via_terms"]].head(2)
   rank                         title via_terms
0     1  Onboarding for new engineers       NaN
1     2                Single sign-on       NaN
"""

from __future__ import annotations

from workbench.viewdata import (
    CREDIT_COLUMNS,
    GOLD_NODE,
    OTHER_NODE,
    POOL_VIEW_COLUMNS,
    SAME_FILE_LINK,
    TERM_COMPONENTS,
    TERM_LINK,
    TERM_NODE,
    TOP_NODE,
    context_table,
    diff_runs,
    expansion_note,
    highlight,
    mark_spans,
    no_trajectory_reason,
    opening_sentences,
    passage_detail,
    pool_table,
    ranking_compare,
    sankey_legend,
    seed_bars,
    seeds_by_round,
    short,
    short_label,
    slope_lines,
    term_components,
    term_label,
    trajectory_links,
    view_frames,
)

__all__ = [
    "CREDIT_COLUMNS",
    "GOLD_NODE",
    "OTHER_NODE",
    "POOL_VIEW_COLUMNS",
    "SAME_FILE_LINK",
    "TERM_COMPONENTS",
    "TERM_LINK",
    "TERM_NODE",
    "TOP_NODE",
    "context_table",
    "diff_runs",
    "expansion_note",
    "highlight",
    "mark_spans",
    "no_trajectory_reason",
    "opening_sentences",
    "passage_detail",
    "pool_table",
    "ranking_compare",
    "sankey_legend",
    "seed_bars",
    "seeds_by_round",
    "short",
    "short_label",
    "slope_lines",
    "term_components",
    "term_label",
    "trajectory_links",
    "view_frames",
]
