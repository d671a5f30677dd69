"""Any `ir_measures` measure by name (nDCG@10, RR, AP@100, ...) over the same runs and gold
as the paper's R@k / AE@k, plus the pandas frames PyTerrier and ir_measures read.

The run is each question's ranking of unique documents (first occurrences kept: the dedup
of R@k), scored `depth - rank + 1` so the tools' sort-by-score order is our rank order;
the qrels are the gold documents with relevance 1. A question with gold but no retrieved
document counts 0 (as `trec_eval -c` and pt.Experiment count it); a question without gold
is left out (as R@k leaves it out). Values stay on ir_measures' own scale (0-1), while the
paper's metrics stay percentages, computed by workbench/metrics.py exactly as before.

>>> from workbench.runs import RunOptions, evaluate
>>> result = evaluate(index, questions, "lexical", options=RunOptions(progress=False))
>>> compute_measures(result.records, questions, ["nDCG@10", "RR"])
{'nDCG@10': 0.74939..., 'RR': 0.84259...}
"""

from __future__ import annotations

import math
from pathlib import Path

from workbench.formats import run_rows, write_trec_qrels, write_trec_run
from workbench.index.readers import FormatError
from workbench.index.units import Question
from workbench.safeio import Outputs


def _ir_measures():
    try:
        import ir_measures
    except ImportError:
        raise FormatError("--measure needs ir_measures (pip install 'sag2-workbench[pyterrier]')") from None
    return ir_measures


def parse_measures(names) -> list:
    """ir_measures objects from their names; an unknown name is a named error."""
    irm = _ir_measures()
    out = []
    for name in names:
        try:
            out.append(irm.parse_measure(name))
        except (ValueError, NameError, SyntaxError, TypeError, AttributeError) as exc:
            raise FormatError(
                f"--measure {name!r}: not an ir_measures measure ({exc}); e.g. nDCG@10, RR, AP, R@10"
            ) from None
    return out


def topics_frame(questions: list[Question]):
    """PyTerrier topics: one row per question (qid, query)."""
    import pandas as pd

    return pd.DataFrame({"qid": [q.id for q in questions], "query": [q.question for q in questions]})


def qrels_frame(questions: list[Question]):
    """PyTerrier / ir_measures qrels: (qid, docno, label=1) per gold document."""
    import pandas as pd

    rows = [(q.id, g, 1) for q in questions for g in q.gold]
    return pd.DataFrame(rows, columns=["qid", "docno", "label"])


def run_frame(records: list[dict]):
    """An evaluation's rankings as a results frame (qid, docno, rank 0-based as in PyTerrier, score)."""
    import pandas as pd

    rows = [(qid, doc, rank - 1, score) for qid, doc, rank, score in run_rows(records)]
    return pd.DataFrame(rows, columns=["qid", "docno", "rank", "score"])


def per_question(records: list[dict], questions: list[Question], names) -> dict[str, dict[str, float]]:
    """{question id: {measure name: value}} for the questions with gold and a record."""
    irm = _ir_measures()
    measures = parse_measures(names)
    # only questions that have a record: a question that failed (--keep-going) is never a 0
    recorded = {rec["_id"] for rec in records}
    gold_questions = [q for q in questions if q.gold and q.id in recorded]
    qrels = [irm.Qrel(q.id, g, 1) for q in gold_questions for g in q.gold]
    run = [irm.ScoredDoc(qid, doc, score) for qid, doc, _, score in run_rows(records)]
    out = {q.id: {str(m): 0.0 for m in measures} for q in gold_questions}
    for metric in irm.iter_calc(measures, qrels, run):
        out[metric.query_id][str(metric.measure)] = float(metric.value)
    return out


def compute_measures(records: list[dict], questions: list[Question], names) -> dict[str, float]:
    """Mean of each measure over the questions with gold (unrounded)."""
    values = per_question(records, questions, names)
    return {
        str(m): (sum(v[str(m)] for v in values.values()) / len(values) if values else math.nan)
        for m in parse_measures(names)
    }


def measure_name(name: str) -> str:
    """argparse `type=` for --measure: refuses an unknown name before any work starts."""
    import argparse

    try:
        parse_measures([name])
    except FormatError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return name


def eval_extras(
    result,
    questions: list[Question],
    *,
    run=None,
    qrels=None,
    measures=(),
    tag: str = "sag2wb",
    inputs=(),
    out=None,
    force: bool = False,
) -> list[str]:
    """What `sag2wb eval --run/--qrels/--measure` add to a finished evaluation: the TREC run
    and qrels files, and each measure per question (`record["measures"]`) and as a mean (in
    `result.stats["measures"]`). Returns lines for the CLI to print.

    >>> from workbench.runs import RunOptions, evaluate
    >>> result = evaluate(index, questions, "lexical", options=RunOptions(progress=False))
    >>> eval_extras(result, questions, run="sag2.trec", measures=["nDCG@10"])
    ['nDCG@10 0.7494', 'run -> sag2.trec (9 questions)']
    """
    # checked as `sag2wb eval` checks them before its work (workbench/safeio.py: Outputs): an
    # existing file is replaced only when recorded as ours, and each write records its file
    io = Outputs(force=force)
    for path in inputs:
        io.input("", path)
    if out is not None:
        io.output("--out", out, existing_ok=True)  # written by this command already, or about to be
    if run is not None:
        io.output("--run", run)
    if qrels is not None:
        io.output("--qrels", qrels)
    io.check()
    lines = []
    if measures:
        values = per_question(result.records, questions, measures)
        for rec in result.records:
            # their own key: "R@10" is also a paper metric (a percentage) in the same record
            if rec["_id"] in values:
                rec["measures"] = values[rec["_id"]]
        means = compute_measures(result.records, questions, measures)
        result.stats["measures"] = {k: round(v, 4) for k, v in means.items()}
        lines.append("  ".join(f"{k} {v:.4f}" for k, v in means.items()))
    for path in (run, qrels):
        if path is not None:  # the folder is created as --out's is (its place was checked before any work)
            Path(path).parent.mkdir(parents=True, exist_ok=True)
    if run is not None:
        write_trec_run(run, run_rows(result.records), tag=tag, record="eval --run")
        lines.append(f"run -> {run} ({len(result.records)} questions)")
    if qrels is not None:
        write_trec_qrels(qrels, questions, record="eval --qrels")
        lines.append(f"qrels -> {qrels} ({sum(len(q.gold) for q in questions)} gold documents)")
    return lines
