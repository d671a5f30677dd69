"""The SAG2 procedure (SPEC §3) as small steps over plain data, and a Run that steps them.

>>> from workbench.judges import LexicalJudge
>>> run = Run(enc_index, "Where was the director of Glass Harbour born?", judge=LexicalJudge(enc_index))
>>> state = run.step()          # round 0: BM25 candidates, scored
>>> state.round, len(state.candidates), state.judgments
(0, 42, 42)
>>> trace = run.run()           # to the end (H expansion rounds or an early stop)
>>> trace.stop, trace.documents()[:2]
('max rounds reached (H)', ['The Glass Harbour Affair', 'Glass Harbour'])
>>> again = run.rerun(params=run.params.replace(L=10))   # from the first affected round
>>> again.params.L, again.trace().documents()[:2]
(10, ['Glass Harbour Bridge', 'Glass Harbour'])

Each step function, in the order of the paper: `initial_candidates`, `score_round`, `rank`,
`select_seeds`, `select_terms`, `retrieve_expansion`, `build_pool`, `build_context`,
`diversify` (workbench/diversity.py). Only the index and the judge do I/O.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, replace

import numpy as np

from workbench import text as textlib
from workbench.diversity import diversify as diversify
from workbench.diversity import final_ranking
from workbench.index.row_sets import places, union, unseen
from workbench.index.store import UNIT_CACHE_LIMIT, Index, bm25_order, normalize_title, query_expression, quote
from workbench.index.units import Question
from workbench.judgment import JudgeError, JudgmentMemo
from workbench.params import Params, earliest_affected_round
from workbench.protocols import can_explain, counts_per_call, usage_of
from workbench.run_arguments import judge_from, params_from, pin_change_rounds, pins_from, round_from
from workbench.terms import SeedView, TermWeightingError, analyze_body, choose_terms, get_term_weighting
from workbench.trace import (
    NEAR_MISSES,
    STOP_BM25,
    STOP_EMPTY_QUESTION,
    STOP_JUDGE_ERROR,
    STOP_MAX_ROUNDS,
    STOP_NO_CANDIDATES,
    STOP_NO_NEW_CANDIDATES,
    STOP_NO_SEEDS,
    STOP_NO_TERMS,
    STOP_TERM_WEIGHTING_ERROR,
    Candidate,
    ContextEntry,
    PoolEntry,
    RoundState,
    Seed,
    Trace,
    UnitInfo,
    term_rows,
)
from workbench.usage import UsageScope


def dedupe(*lists) -> list:
    seen, out = set(), []
    for lst in lists:
        for x in lst:
            if x not in seen:
                seen.add(x)
                out.append(x)
    return out


# ---- name repair (SPEC §3) -----------------------------------------------------------------
def repair_names(index: Index, text: str, seen=frozenset()) -> str:
    """Replace accent-alias spans by their title when only the title has an unseen match.

    >>> repair_names(enc_index, "Where was Jose Arriaga born?")
    'Where was josé arriaga born?'
    """
    out, last = [], 0
    for start, end in index.alias_spans(text):  # stored keys: nothing grows with the corpus here
        span = text[start:end]
        title = index.aliases.get(normalize_title(span))
        if title is None:
            continue
        if not index.has_unseen_match(textlib.phrase(span), seen) and index.has_unseen_match(
            textlib.phrase(title), seen
        ):
            out.append(text[last:start])
            out.append(title)
            last = end
    out.append(text[last:])
    return "".join(out)


# ---- round 0 -------------------------------------------------------------------------------
def question_expression(index: Index, question: str, params: Params) -> tuple[str, str]:
    """(repaired question, OR of its first `query_tokens` distinct tokens as phrases)."""
    repaired = repair_names(index, question)
    tokens = list(dict.fromkeys(textlib.tokenize(repaired)))[: params.query_tokens]
    return repaired, query_expression(tokens)


def initial_candidates(index: Index, expression: str, params: Params) -> tuple[Candidate, ...]:
    """C0: the first B units by BM25 of the question expression (ties: lower id)."""
    rows = index.search(expression, params.B, params.field_weights)
    return tuple(Candidate(u, i + 1, s) for i, (u, s) in enumerate(rows))


# ---- scoring and ranking -------------------------------------------------------------------
def judge_items(index: Index, unit_ids, previous: dict | None = None) -> list[dict]:
    items = []
    for rec in index.units(unit_ids):
        u = rec.id
        item = {"unit_id": u, "title": rec.title, "text": rec.body, "document": rec.document}
        if previous is not None:
            item["previous_score"] = previous[u]
        items.append(item)
    return items


def score_round(index, judge, memo: JudgmentMemo, question: str, pool, context, pins: dict) -> tuple[list[float], int]:
    """A fresh probability for every pool unit in context E_r (pinned units keep their pin).
    Returns (scores, judgments made)."""
    ids = [e.unit_id for e in pool]
    todo = [u for u in ids if u not in pins]
    ctx = context_items(index, context)
    got = dict(zip(todo, memo.judge(judge, question, judge_items(index, todo), ctx))) if todo else {}
    return [pins[u] if u in pins else got[u] for u in ids], len(todo)


def context_items(index, context) -> list[dict]:
    """The judge's view of context E_r: unit items, with previous scores where known."""
    return [
        {**item, **({"previous_score": c.previous_score} if c.previous_score is not None else {})}
        for item, c in zip(judge_items(index, [c.unit_id for c in context]), context)
    ]


def explain_round(index, judge, question: str, pool, context, pins: dict) -> tuple:
    """(sentence, components) per pool entry from a judge that explains itself (`explains`
    true, `explain(question, candidates, context)`); None for pinned units. Explanations
    never change a score: they are asked for after the round is scored."""
    todo = [e.unit_id for e in pool if e.unit_id not in pins]
    got = (
        dict(zip(todo, judge.explain(question, judge_items(index, todo), context_items(index, context))))
        if todo
        else {}
    )
    return tuple(got.get(e.unit_id) for e in pool)


def rank(unit_ids, scores, fusion: dict, params: Params) -> tuple[int, ...]:
    """Sort by (score desc, fusion desc, unit id asc); keep the first B."""
    order = sorted(zip(unit_ids, scores), key=lambda x: (-x[1], -fusion[x[0]], x[0]))
    return tuple(u for u, _ in order[: params.B])


# ---- seeds and terms -----------------------------------------------------------------------
def select_seeds(ranking, expanded, params: Params) -> list[int]:
    """S_r: the first s ranked units never used as seeds before."""
    used = set(expanded)
    return [u for u in ranking if u not in used][: params.s]


def select_terms(index: Index, seeds: list[int], latest: dict, question: str, params: Params):
    """The seeds' eligible terms with their components, best first: the top L flagged
    selected, followed by the near misses the trace keeps."""
    qtokens = frozenset(textlib.tokenize(question))
    m = max(latest[u] for u in seeds)
    views = [
        SeedView(
            unit_id=rec.id,
            rank=i + 1,
            title=rec.title,
            score=latest[rec.id],
            max_score=m,
            sentences=analyze_body(rec.body),
            question_tokens=qtokens,
            body=rec.body,
        )
        for i, rec in enumerate(index.units(seeds))
    ]
    return choose_terms(views, index, params.term_weighting, params.L, keep=params.L * (1 + NEAR_MISSES))


def resolve_term(index: Index, term: str, kind: str, surface: str, seen) -> tuple[str, str]:
    """The phrase to search for a selected term, and how it was obtained (SPEC §3)."""
    if index.has_unseen_match(term, seen):
        return term, "as is"
    resolved, how = term, "as is"
    repaired = repair_names(index, surface if kind == "name" else term, seen)
    if repaired != (surface if kind == "name" else term):
        resolved, how = textlib.phrase(repaired), "name repair"
    if kind == "name" and not index.has_unseen_match(resolved, seen):
        toks = resolved.split(" ")
        subs = [
            tuple(toks[i:j])
            for i in range(len(toks))
            for j in range(i + 2, len(toks) + 1)
            if tuple(toks[i:j]) in index.title_phrases
        ]
        if subs:
            best = min(subs, key=lambda t: (-len(t), t))
            if index.has_unseen_match(" ".join(best), seen):
                resolved, how = " ".join(best), "title phrase"
    return resolved, how


def retrieve_expansion(index: Index, selected, round0_expression: str, seen, params: Params):
    """Per-term unseen matches ranked by BM25 of the whole expression, interleaved to B.
    Returns (expression, candidates, {term: (resolved, resolution)})."""
    postings = index.postings
    if postings is not None:  # the terms' unread tokens in one statement and one decoding pass, not one each
        postings.load_tokens([tok for toks in postings.split([t.term for t in selected]) for tok in toks or ()])
    resolutions = {t.term: resolve_term(index, t.term, t.kind, t.surface, seen) for t in selected}
    expression = " OR ".join([quote(resolutions[t.term][0]) for t in selected] + [round0_expression])
    # filter by each term separately: "term AND (...)" would count the term twice in BM25
    seen_ids = np.array(sorted(seen), dtype=np.int64)
    matched = [unseen(index.match_rows(resolutions[t.term][0]), seen_ids) for t in selected]
    among = union(matched)
    bm25 = index.bm25_among(expression, among, params.field_weights)
    lists = []
    for t, units, at in zip(selected, matched, places(among, matched)):  # each term's rows in `among`
        scores = bm25[at]
        # by BM25, equal scores lower id first; the interleaving below reaches depth < B only
        # (at depth d every list's first d units are taken, so d candidates are made)
        first = bm25_order(units, scores, params.B)
        lists.append((t.term, units[first].tolist(), scores[first].tolist()))
    candidates: list[Candidate] = []
    taken: set[int] = set()
    depth = 0
    while len(candidates) < params.B and any(depth < len(units) for _, units, _ in lists):
        for term, units, scores in lists:
            if depth < len(units) and units[depth] not in taken and len(candidates) < params.B:
                u = units[depth]
                taken.add(u)
                candidates.append(Candidate(u, len(candidates) + 1, scores[depth], term, depth + 1))
        depth += 1
    return expression, tuple(candidates), resolutions


# ---- pool and context ----------------------------------------------------------------------
@dataclass(frozen=True)
class History:
    """What earlier rounds leave behind, derived from their states."""

    seen: frozenset  # units scored in any round
    expanded: tuple  # seeds used so far (A), in order
    protected: tuple  # P: first p of C0
    latest: dict  # unit -> latest score
    fusion: dict  # unit -> 1 / (fusion_constant + retrieval rank) from the round that retrieved it
    previous_ranking: tuple


def add_fusion(fusion: dict, candidates, params: Params) -> dict:
    """fusion = 1 / (constant + retrieval rank), fixed by the round that first retrieved a unit."""
    for c in candidates:
        fusion.setdefault(c.unit_id, 1.0 / (params.fusion_constant + c.retrieval_rank))
    return fusion


def history(rounds, params: Params) -> History:
    seen: set[int] = set()
    expanded: list[int] = []
    latest: dict[int, float] = {}
    fusion: dict[int, float] = {}
    for r in rounds:
        add_fusion(fusion, r.candidates, params)
        expanded.extend(s.unit_id for s in r.seeds)
        if r.scored:
            for e, s in zip(r.pool, r.scores):
                latest[e.unit_id] = s
                seen.add(e.unit_id)
    protected = tuple(c.unit_id for c in rounds[0].candidates[: params.p]) if rounds else ()
    return History(
        frozenset(seen), tuple(dedupe(expanded)), protected, latest, fusion, rounds[-1].ranking if rounds else ()
    )


def build_pool(round_no: int, candidates, hist: History, params: Params) -> tuple[PoolEntry, ...]:
    """W_r (SPEC §3): C0; dedupe(P, A1, C1); final round: refill + up to 20 incoming."""
    new = [c.unit_id for c in candidates]
    if round_no == 0:
        return tuple(PoolEntry(u, "new") for u in new)

    def origin(u):
        return (
            "protected"
            if u in hist.protected
            else "seed"
            if u in hist.expanded
            else "history"
            if u in hist.seen
            else "new"
        )

    union = dedupe(hist.protected, hist.expanded, new)
    if round_no == 1:
        return tuple(PoolEntry(u, origin(u)) for u in union)
    incoming = [u for u in union if u not in hist.seen][: params.incoming_limit]
    by_score = sorted(hist.latest, key=lambda u: (-hist.latest[u], u))
    refill = dedupe([u for u in union if u in hist.seen], by_score)[: len(union) - len(incoming)]
    return tuple(PoolEntry(u, origin(u)) for u in refill) + tuple(PoolEntry(u, "new") for u in incoming)


def build_context(round_no: int, candidates, hist: History, params: Params) -> tuple[ContextEntry, ...]:
    """E0 = {}; E1 = dedupe(A1, first s of C1); E2 = previous top n with previous scores."""
    if round_no == 0 or not params.use_context:
        return ()
    if round_no == 1:
        return tuple(ContextEntry(u) for u in dedupe(hist.expanded, [c.unit_id for c in candidates[: params.s]]))
    return tuple(ContextEntry(u, hist.latest[u]) for u in hist.previous_ranking[: params.context_size])


# ---- the run -------------------------------------------------------------------------------
class Run:
    """A SAG2 trajectory for one question that can be stepped, read, rewound and re-run.

    `judge=None` is the BM25 baseline (C0 in lexical order, no judge). `pins` maps
    (round, unit_id) to a score the researcher fixes for that round. `explain=False`: a judge
    that explains itself is not asked why (runs that keep records, not traces)."""

    def __init__(
        self,
        index: Index,
        question,
        params: Params | None = None,
        judge=None,
        *,
        pins: dict | None = None,
        memo: JudgmentMemo | None = None,
        rounds=(),
        explain: bool = True,
    ):
        self.question_id: str | None
        if isinstance(question, Question):
            self.question_as_given, self.question_id, self.gold = question.question, question.id, question.gold
        else:
            self.question_as_given, self.question_id, self.gold = str(question), None, ()
        # BM25, terms and the trace read the question less surrounding whitespace; every judge call
        # receives it as given (SPEC §3: "as the user wrote it"; issue 34: JEV's original_question)
        self.question = self.question_as_given.strip()
        self.index = index
        self.params = params_from(params, Params())
        get_term_weighting(self.params.term_weighting)  # unknown variant: fail now, listing the known ones
        self.judge = judge_from(judge, index=index, gold=self.gold)
        self.pins = pins_from(pins)
        self.memo = memo or JudgmentMemo()
        self.rounds: list[RoundState] = list(rounds)
        # explanations never change a score: a run whose trace nobody reads can skip them
        self.explain = explain
        self._usage_start = usage_of(judge)
        self._usage = UsageScope()  # what this run's own judge calls cost (workbench/usage.py)

    # ---- reading ------------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        return bool(self.rounds) and self.rounds[-1].stop is not None

    @property
    def judge_name(self) -> str:
        return "bm25" if self.judge is None else self.judge.name

    def state(self, round_no: int) -> RoundState:
        return self.rounds[round_no]

    # ---- stepping -----------------------------------------------------------------------
    def step(self, state: RoundState | None = None) -> RoundState | None:
        """Compute the next round (None once the run has stopped), or record `state`, a round a
        policy computed itself (workbench/runs/policies.py final_only_trace), as the next one."""
        if self.finished:
            return None
        r = len(self.rounds)
        if state is None:
            state = self._round_zero() if r == 0 else self._expansion_round(r)
        self.rounds.append(state)
        return state

    def run(self) -> Trace:
        while self.step() is not None:
            pass
        return self.trace()

    def _round_zero(self) -> RoundState:
        repaired, expression = question_expression(self.index, self.question, self.params)
        if not expression:
            return RoundState(0, "", stop=STOP_EMPTY_QUESTION, repaired_question=repaired)
        candidates = initial_candidates(self.index, expression, self.params)
        if not candidates:
            return RoundState(0, expression, stop=STOP_NO_CANDIDATES, repaired_question=repaired)
        if self.judge is None:
            ranking = tuple(c.unit_id for c in candidates)
            return RoundState(0, expression, candidates, ranking=ranking, stop=STOP_BM25, repaired_question=repaired)
        state = RoundState(0, expression, candidates, repaired_question=repaired)
        return self._score(state, History(frozenset(), (), (), {}, {}, ()))

    def _score(self, state: RoundState, hist: History) -> RoundState:
        r = state.round
        pool = build_pool(r, state.candidates, hist, self.params)
        context = build_context(r, state.candidates, hist, self.params)
        pins = {u: s for (pr, u), s in self.pins.items() if pr == r}
        try:
            scores, judgments = self.score_pool(pool, context, pins)
        except JudgeError as exc:
            return replace(
                state, pool=pool, context=context, ranking=hist.previous_ranking, stop=STOP_JUDGE_ERROR, error=str(exc)
            )
        explanations = ()
        if self.explain and can_explain(self.judge):
            try:
                with self.counting():
                    explanations = explain_round(self.index, self.judge, self.question_as_given, pool, context, pins)
            except Exception as exc:
                return replace(
                    state,
                    pool=pool,
                    context=context,
                    ranking=hist.previous_ranking,
                    stop=STOP_JUDGE_ERROR,
                    error=f"judge {self.judge.name!r} could not explain: {type(exc).__name__}: {exc}",
                )
        fusion = add_fusion(dict(hist.fusion), state.candidates, self.params)
        ranking = rank([e.unit_id for e in pool], scores, fusion, self.params)
        return replace(
            state,
            pool=pool,
            context=context,
            scores=tuple(scores),
            ranking=ranking,
            scored=True,
            pinned=tuple(u for u in (e.unit_id for e in pool) if u in pins),
            judgments=judgments,
            stop=STOP_MAX_ROUNDS if r >= self.params.H else None,
            explanations=explanations,
        )

    def _expansion_round(self, r: int) -> RoundState:
        hist = history(self.rounds, self.params)
        seeds = select_seeds(hist.previous_ranking, hist.expanded, self.params)
        if not seeds:
            return RoundState(r, "", ranking=hist.previous_ranking, stop=STOP_NO_SEEDS)
        try:
            choices, weights = select_terms(self.index, seeds, hist.latest, self.question, self.params)
        except TermWeightingError as exc:  # a misbehaving variant: stop here, keep earlier rounds
            return RoundState(r, "", ranking=hist.previous_ranking, stop=STOP_TERM_WEIGHTING_ERROR, error=str(exc))
        seed_states = tuple(Seed(u, i + 1, hist.latest[u], weights.get(u)) for i, u in enumerate(seeds))
        selected = [c for c in choices if c.selected]
        if not selected:
            return RoundState(
                r,
                "",
                seeds=seed_states,
                terms=term_rows(choices, {}, self.params.L),
                ranking=hist.previous_ranking,
                stop=STOP_NO_TERMS,
            )
        expression, candidates, resolutions = retrieve_expansion(
            self.index, selected, self.rounds[0].expression, hist.seen, self.params
        )
        hist = replace(hist, expanded=tuple(dedupe(hist.expanded, seeds)))
        state = RoundState(
            r, expression, candidates, seeds=seed_states, terms=term_rows(choices, resolutions, self.params.L)
        )
        if not candidates:
            return replace(state, ranking=hist.previous_ranking, stop=STOP_NO_NEW_CANDIDATES)
        return self._score(state, hist)

    # ---- results ------------------------------------------------------------------------
    def trace(self) -> Trace:
        final = final_ranking(self.index, self.rounds, self.params, judged=self.judge is not None)
        named = set(final)
        for r in self.rounds:
            named.update(c.unit_id for c in r.candidates)
            named.update(e.unit_id for e in r.pool)
            named.update(c.unit_id for c in r.context)
            named.update(s.unit_id for s in r.seeds)
            named.update(t.seed for t in r.terms)
        units = unit_infos(self.index, sorted(named))
        return Trace(
            question=self.question,
            question_id=self.question_id,
            gold=tuple(self.gold),
            params=self.params,
            judge=self.judge_name,
            rounds=tuple(self.rounds),
            final_ranking=tuple(final),
            units=units,
            stats=self.stats(),
        )

    def stats(self) -> dict:
        """Judgments of this run, in-process cache hits, and the judge's own usage since the
        run started (a cached JEV judge adds requests, tokens, cost, disk-cache hits)."""
        mine = self._usage.snapshot()  # its own calls' counts, whatever other runs did meanwhile
        out = {
            "judgments": sum(r.judgments for r in self.rounds),
            "memo_hits": mine.get("memo_hits", 0),
            "memo_misses": mine.get("memo_misses", 0),
        }
        now = usage_of(self.judge)
        if counts_per_call(self.judge):  # the judge counts per call too (a JEV judge)
            out.update((k, mine.get(k, 0)) for k in now)
            return out
        for k, v in now.items():
            out[k] = v - self._usage_start.get(k, 0)
        return out

    def score_pool(self, pool, context=(), pins=None) -> tuple[list[float], int]:
        """`score_round` with this run's index, judge, memo and question as given, its calls counted
        in this run's stats: what a policy that builds a round itself (then records it with
        `step(state)`) calls to judge its pool. A JudgeError is the caller's."""
        with self.counting():
            return score_round(self.index, self.judge, self.memo, self.question_as_given, pool, context, pins or {})

    def counting(self):
        """A block whose judge calls count in this run's stats (a policy that scores a round itself,
        then records it with `step(state)`, makes its calls inside it)."""
        return self._usage.active()

    def rerun(
        self,
        from_round: int | None = None,
        *,
        params: Params | dict | None = None,
        judge="unchanged",
        pins: dict | None = None,
    ) -> Run:
        """A new Run that keeps rounds before `from_round` (default: the first round the
        change can affect) and steps again from there, reusing this run's judgments.
        `params`: a Params or a dict of overrides (`{"L": 10}`); `judge`: a judge object, a
        JudgeSpec (built for this index), or None for BM25; `pins`: {(round, unit_id): score}.
        Anything else is refused by name (workbench/run_arguments.py)."""
        from_round = round_from(from_round)
        new_params = params_from(params, self.params)
        unchanged = isinstance(judge, str) and judge == "unchanged"
        new_judge = self.judge if unchanged else judge_from(judge, index=self.index, gold=self.gold)
        new_pins = pins_from(pins, self.pins)
        if from_round is None:
            from_round = earliest_affected_round(self.params, new_params)
            if new_judge is not self.judge:
                from_round = 0
            from_round = min([from_round, *pin_change_rounds(self.pins, new_pins)])
        keep = [r for r in self.rounds[:from_round]]
        # the last kept round may carry a stop that the new parameters lift (e.g. larger H)
        if keep and keep[-1].stop == STOP_MAX_ROUNDS and keep[-1].round < new_params.H:
            keep[-1] = replace(keep[-1], stop=None)
        run = Run(
            self.index,
            self._question_obj(),
            new_params,
            new_judge,
            pins=new_pins,
            memo=self.memo,
            rounds=keep,
            explain=self.explain,
        )
        if keep and keep[-1].scored and keep[-1].round >= new_params.H:
            run.rounds[-1] = replace(keep[-1], stop=STOP_MAX_ROUNDS)
        return run

    def _question_obj(self):
        given = self.question_as_given
        return Question(self.question_id or "", given, tuple(self.gold)) if self.question_id else given

    def _repr_html_(self) -> str:
        return self.trace()._repr_html_()


_UNIT_INFOS: weakref.WeakKeyDictionary[Index, dict[int, UnitInfo]] = weakref.WeakKeyDictionary()


def unit_infos(index: Index, unit_ids) -> dict[int, UnitInfo]:
    """The trace's description of each unit, made once per unit and index."""
    known = _UNIT_INFOS.setdefault(index, {})
    todo = [u for u in unit_ids if u not in known]
    if len(known) + len(todo) > UNIT_CACHE_LIMIT:
        known.clear()
        todo = list(unit_ids)
    for rec in index.units(todo):
        known[rec.id] = UnitInfo(rec.title, rec.document, rec.source, rec.location)
    return {u: known[u] for u in unit_ids}
