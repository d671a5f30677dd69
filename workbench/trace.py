"""Round states and traces: frozen data, pandas frames with fixed columns, JSON that round-trips.

>>> from workbench.engine import Run
>>> from workbench.judges import LexicalJudge
>>> trace = Run(enc_index, "Where was the director of Glass Harbour born?", judge=LexicalJudge(enc_index)).run()
>>> trace.stop, trace.judgments
('max rounds reached (H)', 92)
>>> trace.frames()["passages"].query("round == 1")[["unit_id", "title", "score"]].head(3)
    unit_id                     title     score
42      117      Glass Harbour Bridge  0.609098
43       67  The Glass Harbour Affair  0.628747
44       16  Glass Harbour Lighthouse  0.584522
>>> Trace.from_json(trace.to_json()) == trace
True
"""

from __future__ import annotations

import html
import json
from dataclasses import asdict, dataclass, field, fields

from workbench.params import Params

# Stop reasons (SPEC §3.5), one name each.
STOP_EMPTY_QUESTION = "empty question: no tokens after text processing"
STOP_NO_CANDIDATES = "no candidates: the question matches no unit"
STOP_MAX_ROUNDS = "max rounds reached (H)"
STOP_NO_SEEDS = "no new seeds"
STOP_NO_TERMS = "no expansion terms"
STOP_NO_NEW_CANDIDATES = "no new candidates"
STOP_JUDGE_ERROR = "judge error"
STOP_TERM_WEIGHTING_ERROR = "term weighting error"
STOP_BM25 = "BM25 baseline: no judge"


@dataclass(frozen=True)
class Candidate:
    unit_id: int
    retrieval_rank: int  # 1-based position in C_r (interleaved list in expansion rounds)
    bm25: float  # FTS5 bm25() of the round's ranking expression (lower is better)
    via_term: str | None = None  # the selected term whose list brought it
    term_rank: int | None = None  # its rank in that term's list


@dataclass(frozen=True)
class Seed:
    unit_id: int
    rank: int
    score: float
    weight: float | None  # w(d) as the term-weighting variant set it (0.5..1 for the paper's rule)


@dataclass(frozen=True)
class Term:
    term: str
    kind: str  # "token" or "name"
    surface: str
    seed: int
    tf: int
    df: int
    idf: float
    query_connection: float
    seed_score: float
    seed_weight: float
    priority: float
    selected: bool
    order: int  # 1-based priority order among selected terms, 0 when not selected
    resolved: str | None = None  # phrase actually searched
    resolution: str | None = None  # "as is", "name repair", "title phrase"
    extra: tuple = ()


@dataclass(frozen=True)
class PoolEntry:
    unit_id: int
    origin: str  # "new", "protected", "seed", "history"


@dataclass(frozen=True)
class ContextEntry:
    unit_id: int
    previous_score: float | None = None


@dataclass(frozen=True)
class RoundState:
    """Everything that happened in one round; later rounds derive their inputs from these."""

    round: int
    expression: str  # FTS5 expression that ranked this round's candidates
    candidates: tuple[Candidate, ...] = ()
    seeds: tuple[Seed, ...] = ()  # S_{r-1}: the seeds whose terms retrieved this round
    terms: tuple[Term, ...] = ()  # every eligible term of those seeds, selected ones flagged
    pool: tuple[PoolEntry, ...] = ()
    context: tuple[ContextEntry, ...] = ()
    scores: tuple[float, ...] = ()  # one per pool entry
    pinned: tuple[int, ...] = ()  # pool unit ids whose score was pinned by the researcher
    ranking: tuple[int, ...] = ()
    scored: bool = False
    stop: str | None = None
    error: str | None = None
    judgments: int = 0  # judge decisions this round (pinned units excluded)
    repaired_question: str | None = None  # round 0: the question after name repair
    # judges that explain themselves: (sentence, components) per pool entry, None when pinned;
    # empty for every other judge (and then absent from the JSON, which stays as it was)
    explanations: tuple = ()

    def score_of(self) -> dict[int, float]:
        return {e.unit_id: s for e, s in zip(self.pool, self.scores)}

    def _repr_html_(self) -> str:
        """One row of what matters in the round (a bare `state` at the end of a notebook cell).

        >>> import re
        >>> from workbench.engine import Run
        >>> from workbench.judges import LexicalJudge
        >>> run = Run(enc_index, "Where was the director of Glass Harbour born?", judge=LexicalJudge(enc_index))
        >>> _ = run.step()
        >>> page = run.step()._repr_html_()  # round 1
        >>> for name, cell in zip(re.findall("<th>(.*?)</th>", page), re.findall("<td>(.*?)</td>", page)):
        ...     print(f"{name}: {cell}".strip())
        round: 1
        candidates: 16
        pool: 26
        context: 20
        seeds: 10
        selected terms: 1996, footbridge, glass harbour affair, glass harbour bridge, glass harbour lig…
        judgments: 26
        stop:
        """
        selected = ", ".join(t.term for t in sorted((t for t in self.terms if t.selected), key=lambda t: t.order))
        if len(selected) > 80:
            selected = selected[:79] + "…"
        pinned = f" ({len(self.pinned)} pinned)" if self.pinned else ""
        cells = (
            self.round,
            len(self.candidates),
            len(self.pool),
            len(self.context),
            len(self.seeds),
            selected,
            f"{self.judgments}{pinned}",
            self.stop or self.error or "",
        )
        head = "".join(
            f"<th>{h}</th>"
            for h in ("round", "candidates", "pool", "context", "seeds", "selected terms", "judgments", "stop")
        )
        row = "".join(f"<td>{html.escape(str(c))}</td>" for c in cells)
        return f"<table><thead><tr>{head}</tr></thead><tbody><tr>{row}</tr></tbody></table>"


@dataclass(frozen=True)
class UnitInfo:
    title: str
    document: str
    source: str
    location: str


PASSAGE_COLUMNS = [
    "round",
    "unit_id",
    "title",
    "document",
    "source",
    "origin",
    "retrieval_rank",
    "via_term",
    "term_rank",
    "bm25",
    "score",
    "previous_score",
    "score_change",
    "rank",
    "pinned",
    "in_context",
    "gold",
    "explanation",
    "components",  # nullable: filled by judges that explain themselves (docs/judges.md)
]
TERM_COLUMNS = [
    "round",
    "term",
    "kind",
    "surface",
    "seed",
    "seed_title",
    "tf",
    "df",
    "idf",
    "query_connection",
    "seed_score",
    "seed_weight",
    "priority",
    "selected",
    "order",
    "resolved",
    "resolution",
]
SEED_COLUMNS = ["round", "rank", "unit_id", "title", "score", "weight", "gold"]
ROUND_COLUMNS = [
    "round",
    "scored",
    "candidates",
    "pool",
    "context",
    "seeds",
    "terms_selected",
    "judgments",
    "stop",
    "error",
]
CONTEXT_COLUMNS = ["round", "position", "unit_id", "title", "previous_score"]
RANKING_COLUMNS = ["position", "unit_id", "title", "document", "score", "rank_before_diversity", "gold"]


@dataclass(frozen=True)
class Trace:
    """A finished (or stopped) run: its inputs, its rounds and the final ranking."""

    question: str
    params: Params
    judge: str
    rounds: tuple[RoundState, ...]
    final_ranking: tuple[int, ...]  # after diversity (if on)
    units: dict = field(default_factory=dict)  # unit_id -> UnitInfo for every unit named
    question_id: str | None = None
    gold: tuple[str, ...] = ()
    stats: dict = field(default_factory=dict)  # judgments, cache hits, requests, tokens, cost

    # ---- convenience ----------------------------------------------------------------------
    @property
    def stop(self) -> str | None:
        return self.rounds[-1].stop if self.rounds else None

    @property
    def judgments(self) -> int:
        return sum(r.judgments for r in self.rounds)

    def final_scores(self) -> dict[int, float]:
        for r in reversed(self.rounds):
            if r.scored:
                return r.score_of()
        return {}

    def ranking_before_diversity(self) -> tuple[int, ...]:
        return self.rounds[-1].ranking if self.rounds else ()

    def documents(self, ranking=None) -> list[str]:
        """Unique original documents of a ranking, first occurrences kept (SPEC §3 Evaluation)."""
        out = []
        for u in self.final_ranking if ranking is None else ranking:
            d = self.units[u].document
            if d not in out:
                out.append(d)
        return out

    def titles(self, ids) -> list[str]:
        return [self.units[u].title for u in ids]

    # ---- frames ---------------------------------------------------------------------------
    def frames(self) -> dict:
        """Long DataFrames with the fixed columns above: passages, terms, seeds, rounds,
        context, ranking. A round's seeds are S_(r-1), whose terms retrieved that round."""
        import pandas as pd

        gold = set(self.gold)
        passages, terms, rounds, context, seeds = [], [], [], [], []
        latest: dict[int, float] = {}
        for r in self.rounds:
            cand = {c.unit_id: c for c in r.candidates}
            rank = {u: i + 1 for i, u in enumerate(r.ranking)} if r.scored else {}
            in_context = {c.unit_id for c in r.context}
            pinned = set(r.pinned)
            rows = r.pool if r.scored else [PoolEntry(c.unit_id, "new") for c in r.candidates]
            scores = r.scores if r.scored else [None] * len(rows)
            explained = r.explanations if r.scored and r.explanations else [None] * len(rows)
            for entry, score, why in zip(rows, scores, explained):
                c = cand.get(entry.unit_id)
                info = self.units[entry.unit_id]
                prev = latest.get(entry.unit_id)
                passages.append(
                    {
                        "round": r.round,
                        "unit_id": entry.unit_id,
                        "title": info.title,
                        "document": info.document,
                        "source": f"{info.source} {info.location}".strip(),
                        "origin": entry.origin,
                        "retrieval_rank": c.retrieval_rank if c else None,
                        "via_term": c.via_term if c else None,
                        "term_rank": c.term_rank if c else None,
                        "bm25": c.bm25 if c else None,
                        "score": score,
                        "previous_score": prev,
                        "score_change": None if score is None or prev is None else score - prev,
                        "rank": rank.get(entry.unit_id),
                        "pinned": entry.unit_id in pinned,
                        "in_context": entry.unit_id in in_context,
                        "gold": (info.document in gold) if gold else None,
                        "explanation": why[0] if why else None,
                        "components": dict(why[1]) if why else None,
                    }
                )
            for entry, score in zip(r.pool, r.scores):
                latest[entry.unit_id] = score
            for t in r.terms:
                terms.append(
                    {
                        "round": r.round,
                        "term": t.term,
                        "kind": t.kind,
                        "surface": t.surface,
                        "seed": t.seed,
                        "seed_title": self.units[t.seed].title,
                        "tf": t.tf,
                        "df": t.df,
                        "idf": t.idf,
                        "query_connection": t.query_connection,
                        "seed_score": t.seed_score,
                        "seed_weight": t.seed_weight,
                        "priority": t.priority,
                        "selected": t.selected,
                        "order": t.order,
                        "resolved": t.resolved,
                        "resolution": t.resolution,
                    }
                )
            for s in r.seeds:
                info = self.units[s.unit_id]
                seeds.append(
                    {
                        "round": r.round,
                        "rank": s.rank,
                        "unit_id": s.unit_id,
                        "title": info.title,
                        "score": s.score,
                        "weight": s.weight,
                        "gold": (info.document in gold) if gold else None,
                    }
                )
            for i, ctx in enumerate(r.context, start=1):
                context.append(
                    {
                        "round": r.round,
                        "position": i,
                        "unit_id": ctx.unit_id,
                        "title": self.units[ctx.unit_id].title,
                        "previous_score": ctx.previous_score,
                    }
                )
            rounds.append(
                {
                    "round": r.round,
                    "scored": r.scored,
                    "candidates": len(r.candidates),
                    "pool": len(r.pool),
                    "context": len(r.context),
                    "seeds": len(r.seeds),
                    "terms_selected": sum(t.selected for t in r.terms),
                    "judgments": r.judgments,
                    "stop": r.stop,
                    "error": r.error,
                }
            )
        final_scores = self.final_scores()
        before = {u: i + 1 for i, u in enumerate(self.ranking_before_diversity())}
        ranking = [
            {
                "position": i + 1,
                "unit_id": u,
                "title": self.units[u].title,
                "document": self.units[u].document,
                "score": final_scores.get(u),
                "rank_before_diversity": before.get(u),
                "gold": (self.units[u].document in gold) if gold else None,
            }
            for i, u in enumerate(self.final_ranking)
        ]
        return {
            "passages": pd.DataFrame(passages, columns=PASSAGE_COLUMNS),
            "terms": pd.DataFrame(terms, columns=TERM_COLUMNS),
            "seeds": pd.DataFrame(seeds, columns=SEED_COLUMNS),
            "rounds": pd.DataFrame(rounds, columns=ROUND_COLUMNS),
            "context": pd.DataFrame(context, columns=CONTEXT_COLUMNS),
            "ranking": pd.DataFrame(ranking, columns=RANKING_COLUMNS),
        }

    # ---- JSON -----------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "question": self.question,
            "question_id": self.question_id,
            "gold": list(self.gold),
            "params": self.params.to_dict(),
            "judge": self.judge,
            "rounds": [_round_to_dict(r) for r in self.rounds],
            "final_ranking": list(self.final_ranking),
            "units": {str(k): asdict(v) for k, v in sorted(self.units.items())},
            "stats": self.stats,
        }

    def to_json(self, stats: bool = True) -> str:
        """Canonical JSON: same inputs and judge give byte-identical text. `stats` (cache
        hits, requests, tokens) describe how this run was computed, not the trajectory:
        leave them out to compare trajectories computed with warm and cold caches."""
        d = self.to_dict()
        if not stats:
            d.pop("stats")
        return json.dumps(d, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)

    def to_html(self, path, index=None, *, force: bool = False):
        """Write this trajectory's self-contained page (no kernel, no network: docs/reports.md) to
        `path` and return its Path; `index`, the index it was made on, adds the passage texts.
        An existing file sag2wb did not write is refused (safeio.OutputError) unless `force`.
        (`_repr_html_` stays the notebook's table fragment of the run.)"""
        # the one import up the layers from here, declared in pyproject.toml's layer contract:
        # the page code reads the trace; the trace only hands itself to it
        from workbench.report import write_trajectory_page

        return write_trajectory_page(self, path, index, force=force, record="Trace.to_html")

    @classmethod
    def from_dict(cls, d: dict) -> Trace:
        return cls(
            question=d["question"],
            question_id=d.get("question_id"),
            gold=tuple(d.get("gold", ())),
            params=Params.from_dict(d["params"]),
            judge=d["judge"],
            rounds=tuple(_round_from_dict(r) for r in d["rounds"]),
            final_ranking=tuple(d["final_ranking"]),
            units={int(k): UnitInfo(**v) for k, v in d["units"].items()},
            stats=d.get("stats", {}),
        )

    @classmethod
    def from_json(cls, text: str) -> Trace:
        return cls.from_dict(json.loads(text))

    def summary(self) -> dict:
        """The CLI contract's per-question record (titles, not ids)."""
        rounds = []
        for r in self.rounds:
            rounds.append(
                {
                    "round": r.round,
                    "candidates": self.titles(c.unit_id for c in r.candidates),
                    "terms": [t.term for t in sorted((t for t in r.terms if t.selected), key=lambda t: t.order)],
                    "seeds": self.titles(s.unit_id for s in r.seeds),
                    "pool": self.titles(e.unit_id for e in r.pool),
                    "context": self.titles(c.unit_id for c in r.context),
                    "scores": {self.units[e.unit_id].title: s for e, s in zip(r.pool, r.scores)},
                    "judgments": r.judgments,
                    "stop": r.stop,
                    **({"error": r.error} if r.error else {}),
                }
            )
        return {
            "_id": self.question_id,
            "question": self.question,
            "ranking": self.documents()[:100],
            "judgments": self.judgments,
            "stop": self.stop,
            "rounds": rounds,
        }

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{r.round}</td><td>{len(r.candidates)}</td><td>{len(r.pool)}</td><td>{len(r.context)}</td>"
            f"<td>{html.escape(', '.join(t.term for t in r.terms if t.selected)[:120])}</td><td>{r.judgments}</td>"
            f"<td>{html.escape(r.stop or r.error or '')}</td></tr>"
            for r in self.rounds
        )
        gold = set(self.gold)
        top = "".join(
            f"<li>{'★ ' if self.units[u].document in gold else ''}{html.escape(self.units[u].title)}</li>"
            for u in self.final_ranking[:10]
        )
        return (
            f"<div><b>{html.escape(self.question)}</b> — judge <code>{html.escape(self.judge)}</code>"
            f"<table><thead><tr><th>round</th><th>candidates</th><th>pool</th><th>context</th><th>selected terms</th>"
            f"<th>judgments</th><th>stop</th></tr></thead>{rows}</table><ol>{top}</ol></div>"
        )


def _round_to_dict(r: RoundState) -> dict:
    d = asdict(r)
    if not d["explanations"]:
        del d["explanations"]  # judges that do not explain: the JSON of before, byte for byte
    else:
        d["explanations"] = [None if e is None else [e[0], e[1]] for e in d["explanations"]]
    for t in d["terms"]:
        t["extra"] = [list(x) for x in t["extra"]]
    return d


def _round_from_dict(d: dict) -> RoundState:
    d = dict(d)
    d["candidates"] = tuple(Candidate(**c) for c in d["candidates"])
    d["seeds"] = tuple(Seed(**s) for s in d["seeds"])
    d["terms"] = tuple(Term(**{**t, "extra": tuple(tuple(x) for x in t.get("extra", ()))}) for t in d["terms"])
    d["pool"] = tuple(PoolEntry(**e) for e in d["pool"])
    d["context"] = tuple(ContextEntry(**c) for c in d["context"])
    for key in ("scores", "pinned", "ranking"):
        d[key] = tuple(d[key])
    d["explanations"] = tuple(None if e is None else (e[0], dict(e[1])) for e in d.get("explanations", ()))
    names = {f.name for f in fields(RoundState)}
    return RoundState(**{k: v for k, v in d.items() if k in names})


NEAR_MISSES = 2  # unselected terms kept in the trace: this many times L (the "why not" view)


def term_rows(choices, resolutions, L: int) -> tuple[Term, ...]:
    """Trace rows for a round's terms: the selected ones and the best near misses."""
    out = []
    for c in choices[: L * (1 + NEAR_MISSES)]:
        resolved, how = resolutions.get(c.term, (None, None))
        w = c.weight
        out.append(
            Term(
                term=c.term,
                kind=c.kind,
                surface=c.surface,
                seed=c.seed,
                tf=w.tf,
                df=w.df,
                idf=w.idf,
                query_connection=w.query_connection,
                seed_score=w.seed_score,
                seed_weight=w.seed_weight,
                priority=w.priority,
                selected=c.selected,
                order=c.order,
                resolved=resolved,
                resolution=how,
                extra=tuple(w.extra),
            )
        )
    return tuple(out)
