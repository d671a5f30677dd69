"""Evaluation (SPEC §3 "Evaluation"): R@k and AE@k over unique original passages, per type
and hop count, judgment counts, paired bootstrap intervals; resumable.

>>> result = evaluate(index, load_questions("q.jsonl"), "lexical")      # doctest: +SKIP
>>> result.metrics                                                       # doctest: +SKIP
{'R@5': 61.2, 'R@10': 70.0, 'AE@10': 40.0, 'questions': 30, 'judgments': 8123}
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from .corpora import Question
from .engine import Run
from .judges import JudgmentMemo, make_judge
from .params import Params
from .trace import Trace

METRICS = ("R@5", "R@10", "AE@10")
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20261015


def recall_at(ranking_docs, gold, k: int) -> float:
    """|G ∩ top-k| / |G| over unique documents (first occurrences kept)."""
    gold = set(gold)
    return len(gold & set(ranking_docs[:k])) / len(gold) if gold else float("nan")


def all_evidence_at(ranking_docs, gold, k: int) -> float:
    """1.0 when every gold document is in the top k."""
    gold = set(gold)
    return float(gold <= set(ranking_docs[:k])) if gold else float("nan")


def question_metrics(ranking_docs, gold) -> dict:
    return {
        "R@5": 100 * recall_at(ranking_docs, gold, 5),
        "R@10": 100 * recall_at(ranking_docs, gold, 10),
        "AE@10": 100 * all_evidence_at(ranking_docs, gold, 10),
    }


def mean_metrics(rows: list[dict]) -> dict:
    out = {}
    for m in METRICS:
        vals = [r[m] for r in rows if not math.isnan(r[m])]
        out[m] = round(sum(vals) / len(vals), 2) if vals else float("nan")
    return out


def paired_bootstrap(a, b, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> tuple[float, float, float]:
    """Mean of (a - b) and its paired 95% percentile interval over question resamples."""
    import numpy as np

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"paired bootstrap needs the same questions on both sides ({a.shape[0]} vs {b.shape[0]})")
    diff = a - b
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(diff), size=(resamples, len(diff)))
    means = diff[idx].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(diff.mean()), float(lo), float(hi)


def judge_factory(spec: str, index, **jev_options):
    """Question -> judge (None for bm25). One JEV client / lexical judge serves all questions."""
    if spec == "oracle":
        def oracle(q: Question):
            if not q.gold:
                raise ValueError(f"question {q.id!r} has no gold labels: the oracle judge needs them")
            return make_judge("oracle", index, gold=q.gold)
        return oracle
    shared = make_judge(spec, index, **jev_options)
    return lambda q: shared


@dataclass
class EvalResult:
    config: dict
    records: list[dict]  # one per question: _id, type, hops, metrics, judgments, ranking, rounds
    traces: dict = field(default_factory=dict)  # question id -> Trace (when kept)
    stats: dict = field(default_factory=dict)

    @property
    def metrics(self) -> dict:
        return {**mean_metrics(self.records), "questions": len(self.records),
                "judgments": sum(r["judgments"] for r in self.records)}

    def frame(self):
        """One row per question: _id, type, hops, R@5, R@10, AE@10, judgments, stop."""
        import pandas as pd

        cols = ["_id", "type", "hops", *METRICS, "judgments", "stop"]
        return pd.DataFrame([{c: r.get(c) for c in cols} for r in self.records], columns=cols)

    def by(self, column: str):
        """Mean metrics per question type or hop count."""
        df = self.frame()
        if df[column].isna().all():
            return df.iloc[0:0]
        g = df.groupby(column)
        return g[list(METRICS)].mean().round(2).join(g.size().rename("questions")).join(g["judgments"].sum())

    def to_dict(self) -> dict:
        out = {"config": self.config, "metrics": self.metrics, "stats": self.stats, "questions": self.records}
        for col in ("type", "hops"):
            table = self.by(col)
            if len(table):
                out[f"by_{col}"] = {str(k): {m: float(v) for m, v in row.items()} for k, row in table.iterrows()}
        return out


def evaluate(index, questions: list[Question], judge: str = "lexical", params: Params | None = None, *,
             progress: bool = True, resume_path: str | Path | None = None, trace_dir: str | Path | None = None,
             keep_traces: bool = False, memo: JudgmentMemo | None = None, judge_for=None, **jev_options) -> EvalResult:
    """Run SAG2 (or the BM25 baseline) over `questions`.

    `resume_path`: a JSONL file that receives one record per finished question; records of
    the same configuration already in it are reused, so an interrupted run resumes."""
    params = params or Params()
    judge_for = judge_for or judge_factory(judge, index, **jev_options)
    memo = memo or JudgmentMemo()
    config = {"judge": judge, "params": params.to_dict(), "index": index.meta.get("fingerprint")}
    config_key = json.dumps(config, sort_keys=True)
    done: dict[str, dict] = {}
    if resume_path is not None:
        resume_path = Path(resume_path)
        if resume_path.exists():
            for line in resume_path.read_text(encoding="utf-8").splitlines():
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut by an interruption
                if rec.get("config_key") == config_key:
                    done[rec["_id"]] = rec["record"]
    if trace_dir is not None:
        Path(trace_dir).mkdir(parents=True, exist_ok=True)
    records, traces = [], {}
    usage: dict = {}  # the judge's own counters summed over questions run now (requests, tokens, cost)
    bar = progress_bar(len(questions), f"{judge}", progress)
    try:
        for q in questions:
            if q.id in done:
                records.append(done[q.id])
                bar.update(1)
                continue
            trace = Run(index, q, params, judge_for(q), memo=memo).run()
            for k, v in trace.stats.items():
                if k not in ("judgments", "memo_hits", "memo_misses"):
                    usage[k] = usage.get(k, 0) + v
            rec = question_record(trace, q)
            records.append(rec)
            if keep_traces:
                traces[q.id] = trace
            if trace_dir is not None:
                (Path(trace_dir) / f"{_safe(q.id)}.json").write_text(trace.to_json(), encoding="utf-8")
            if resume_path is not None:
                with resume_path.open("a", encoding="utf-8") as f:
                    f.write(json.dumps({"config_key": config_key, "_id": q.id, "record": rec}, ensure_ascii=False) + "\n")
            bar.update(1)
    finally:
        bar.close()
    stats = {"judgments": sum(r["judgments"] for r in records), "memo_hits": memo.hits, "memo_misses": memo.misses,
             "resumed_questions": sum(1 for q in questions if q.id in done), **usage}
    return EvalResult(config, records, traces, stats)


def question_record(trace: Trace, q: Question) -> dict:
    docs = trace.documents()
    summary = trace.summary()
    return {
        "_id": q.id, "type": q.type, "hops": q.hops, **question_metrics(docs, q.gold), "judgments": trace.judgments,
        "stop": trace.stop, "gold": list(q.gold), "ranking": docs[:100], "rounds": summary["rounds"],
    }


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)[:120]


def progress_bar(total: int, desc: str, enabled: bool):
    """tqdm's notebook-aware bar, or a silent stand-in."""
    if enabled:
        try:
            from tqdm.auto import tqdm

            return tqdm(total=total, desc=desc, leave=False)
        except ImportError:
            pass

    class _Quiet:
        def update(self, n):
            pass

        def close(self):
            pass

    return _Quiet()
