"""How long a parameter change takes to re-render every dashboard view, with cached judgments.

    python benchmarks/bench_widgets.py            # prints figures, asserts nothing

Target (issue #5): <= 0.5 s per change on the sample corpora. Each change is applied
through the model (what the controls call): re-run from the earliest affected round with
the shared judgment memo, then every view redraws from the new trace frames. Each value is
first visited once, so the timed pass is the "cached judgments" case.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from widgets import Dashboard
from workbench.index.corpora import load_corpus, load_questions
from workbench.index.store import open_or_build

ROOT = Path(__file__).resolve().parents[1]
CORPORA = {
    "internal_docs": (
        ROOT / "sample_corpora" / "internal_docs",
        ROOT / "sample_corpora" / "internal_docs.questions.jsonl",
    ),
    "encyclopedia": (
        ROOT / "sample_corpora" / "encyclopedia" / "corpus.json",
        ROOT / "sample_corpora" / "encyclopedia" / "questions.jsonl",
    ),
}
CHANGES = [
    {"L": 10},
    {"L": 20},
    {"s": 5},
    {"s": 10},
    {"H": 1},
    {"H": 2},
    {"B": 50},
    {"B": 100},
    {"field_weights": (1.0, 1.0, 1.0)},
    {"field_weights": (2.0, 2.0, 1.0)},
    {"term_weighting": "no_idf"},
    {"term_weighting": "sag2"},
    {"diversity": False},
    {"diversity": True},
]


def main():
    work = Path(tempfile.mkdtemp(prefix="sag2wb-bench-"))
    print(
        f"{'corpus':14s} {'question':9s} {'changes':>7s} {'median s':>9s} {'p90 s':>7s} {'max s':>7s} "
        f"{'engine s':>9s} {'frames+views s':>14s}"
    )
    for name, (corpus, qfile) in CORPORA.items():
        index, _ = open_or_build(load_corpus(corpus), work / f"{name}.sqlite")
        questions = load_questions(qfile)
        for q in [*questions[:3], questions[-1]]:
            dash = Dashboard(index, [q], judge="lexical")
            m = dash.model
            m.set_round(1 if m.rounds_count > 1 else 0)
            for change in CHANGES:  # warm: every configuration judged once
                m.set_params(**change)
            totals, engine = [], []
            for change in CHANGES:
                start = time.perf_counter()
                m.set_params(**change)
                totals.append(time.perf_counter() - start)
                engine.append(m.last_recompute["seconds"] if m.last_recompute else 0.0)
            views = [t - e for t, e in zip(totals, engine)]
            totals_sorted = sorted(totals)
            print(
                f"{name:14s} {q.id:9s} {len(totals):7d} {statistics.median(totals):9.3f} "
                f"{totals_sorted[int(0.9 * (len(totals) - 1))]:7.3f} {max(totals):7.3f} "
                f"{statistics.median(engine):9.3f} {statistics.median(views):14.3f}"
            )
            misses = m.memo.misses
        print(f"  (last question: {misses} judgments computed in total, {m.memo.hits} answered from the memo)")
    print("\nround slider (per-round views only):")
    dash = Dashboard(index, [questions[0]], judge="lexical")
    times = []
    for r in [1, 2, 0, 1, 2, 0] * 3:
        start = time.perf_counter()
        dash.model.set_round(r)
        times.append(time.perf_counter() - start)
    print(f"  median {statistics.median(times):.3f} s, max {max(times):.3f} s over {len(times)} moves")


if __name__ == "__main__":
    main()
