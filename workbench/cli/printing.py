"""What the commands print: a ranking, the rounds of a trace explained, metrics and file sizes."""

from __future__ import annotations

from pathlib import Path


def fmt(v) -> str:
    return "–" if v is None else f"{v:.2f}"


def size(path: Path) -> str:
    return f"{path.stat().st_size / 2**20:.2f} MiB"


def print_ranking(trace, index, limit: int, gold=()) -> None:
    scores = trace.final_scores()
    gold = set(gold)
    print(f"question: {trace.question}")
    print(f"judge: {trace.judge}; judgments: {trace.judgments}; stop: {trace.stop}")
    if not trace.final_ranking:
        print("no results: " + (trace.stop or "nothing matched"))
        return
    for i, u in enumerate(trace.final_ranking[:limit], start=1):
        rec = index.unit(u)
        score = scores.get(u)
        where = f"{rec.source} {rec.location}".strip()
        mark = " *gold*" if rec.document in gold else ""
        print(f"{i:3d}. {rec.title}  [{where}]  score={f'{score:.4f}' if score is not None else 'bm25'}{mark}")


def explain(trace) -> None:
    for r in trace.rounds:
        print(
            f"\n-- round {r.round}: {len(r.candidates)} candidates, pool {len(r.pool)}, "
            f"context {len(r.context)}, judgments {r.judgments}" + (f", stop: {r.stop}" if r.stop else "")
        )
        if r.error:
            print(f"   error: {r.error}")
        if r.seeds:
            print(
                "   seeds: "
                + "; ".join(
                    f"{trace.units[s.unit_id].title} (score {s.score:.3f}, "
                    f"w {s.weight if s.weight is None else round(s.weight, 3)})"
                    for s in r.seeds
                )
            )
        sel = sorted((t for t in r.terms if t.selected), key=lambda t: t.order)
        for t in sel:
            res = f" -> {t.resolved!r} ({t.resolution})" if t.resolved and t.resolved != t.term else ""
            print(
                f"   term {t.order:2d}. {t.term!r}{res}  priority {t.priority:.3f} = (1+ln {t.tf})"
                f" x idf {t.idf:.3f} x (1+c {t.query_connection:.3f}) x w {t.seed_weight:.3f}"
                f"  from {trace.units[t.seed].title!r}"
            )
