"""SPEC §3: each step of the procedure on small hand-checked examples, and the Run API."""

import math

import pytest

from workbench.engine import (
    History,
    Run,
    build_context,
    build_pool,
    diversify,
    question_expression,
    rank,
    repair_names,
    resolve_term,
    retrieve_expansion,
    select_seeds,
)
from workbench.judges import FunctionJudge
from workbench.judges.lexical import LexicalJudge
from workbench.params import Params
from workbench.runs.policies import truncated_trace
from workbench.terms import SeedView, analyze_body, choose_terms
from workbench.trace import (
    STOP_EMPTY_QUESTION,
    STOP_JUDGE_ERROR,
    STOP_MAX_ROUNDS,
    STOP_NO_CANDIDATES,
    STOP_NO_NEW_CANDIDATES,
    STOP_NO_SEEDS,
    Candidate,
    PoolEntry,
    Trace,
)

from .conftest import BRIDGE_WORLD, build_index, title_judge

QUESTION = "Where was the director of Glass Harbour born?"
SCORES = {"Glass Harbour": 0.9, "Mara Quell": 0.8, "Tessaly": 0.7}


@pytest.fixture
def bridge(tmp_path):
    return build_index(tmp_path, BRIDGE_WORLD)


def bridge_run(ix, **params):
    p = Params(**{"s": 1, "L": 6, "p": 1, **params})
    return Run(ix, QUESTION, p, FunctionJudge(title_judge(SCORES)))


# ---- round 0 ---------------------------------------------------------------------------
def test_round0_expression_is_distinct_question_tokens_or_joined(bridge):
    assert question_expression(bridge, QUESTION, Params())[1] == '"director" OR "glass" OR "harbour" OR "born"'
    assert question_expression(bridge, "glass glass harbour born", Params(query_tokens=2))[1] == '"glass" OR "harbour"'


def test_round0_candidates_in_bm25_order_scored_without_context(bridge):
    state = bridge_run(bridge).step()
    assert [c.unit_id for c in state.candidates] == [5, 1, 4]  # "director ... born" + "glass harbour" + "glass"
    assert [c.retrieval_rank for c in state.candidates] == [1, 2, 3]
    assert state.context == () and [e.origin for e in state.pool] == ["new"] * 3
    assert state.scores == (0.1, 0.9, 0.1)
    # score desc, then fusion 1/(60+rank) desc: 5 (rank 1) before 4 (rank 3)
    assert state.ranking == (1, 5, 4)


@pytest.mark.parametrize("question", ["", "   ", "?!...", "the of and", "的 了"])
def test_question_without_tokens_stops_with_a_reason(bridge, question):
    trace = Run(bridge, question, Params(), FunctionJudge(title_judge({}))).run()
    assert trace.final_ranking == () and trace.stop == STOP_EMPTY_QUESTION and trace.judgments == 0


def test_question_with_no_match_stops_with_a_reason(bridge):
    trace = Run(bridge, "zebra quantum", Params(), FunctionJudge(title_judge({}))).run()
    assert trace.stop == STOP_NO_CANDIDATES and trace.final_ranking == ()


def test_fts5_operators_in_question_are_text(bridge):
    trace = Run(bridge, 'NEAR("glass" AND harbour*) OR ^born: -x', Params(H=0), None).run()
    assert 1 in trace.final_ranking


# ---- name repair -----------------------------------------------------------------------
def test_name_repair_replaces_unmatched_span_by_accented_title(tmp_path):
    ix = build_index(tmp_path, [("José Arriaga", "José Arriaga was a composer."), ("Lumen", "a village")])
    assert repair_names(ix, "Where was Jose Arriaga born?") == "Where was josé arriaga born?"
    assert repair_names(ix, "where was JOSE ARRIAGA born?") == "where was josé arriaga born?"
    # the title's phrase has no unseen match once unit 1 is seen: keep the text
    assert repair_names(ix, "Jose Arriaga", seen={1}) == "Jose Arriaga"


def test_name_repair_keeps_a_span_that_matches_itself(tmp_path):
    ix = build_index(tmp_path, [("José Arriaga", "a composer"), ("Other", "Jose Arriaga, unaccented, also here")])
    assert repair_names(ix, "Jose Arriaga") == "Jose Arriaga"


def test_name_repair_needs_whole_words(tmp_path):
    ix = build_index(tmp_path, [("José Arriaga", "a composer")])
    assert repair_names(ix, "xJose Arriagas") == "xJose Arriagas"


# ---- ranking and seeds -------------------------------------------------------------------
def test_rank_sorts_by_score_then_fusion_then_id_and_keeps_b():
    fusion = {1: 1 / 61, 2: 1 / 62, 3: 1 / 61, 4: 1 / 70}
    assert rank([4, 3, 2, 1], [0.5, 0.5, 0.5, 0.9], fusion, Params()) == (1, 3, 2, 4)
    assert rank([4, 3, 2, 1], [0.5, 0.5, 0.5, 0.9], fusion, Params(B=2)) == (1, 3)


def test_select_seeds_skips_units_already_expanded():
    assert select_seeds((5, 1, 4, 2), expanded=(1,), params=Params(s=2)) == [5, 4]
    assert select_seeds((1,), expanded=(1,), params=Params()) == []


# ---- term selection ---------------------------------------------------------------------
def _view(ix, unit, score, m, question=QUESTION):
    from workbench.text import tokenize

    return SeedView(
        unit, 1, ix.unit(unit).title, score, m, analyze_body(ix.unit(unit).body), frozenset(tokenize(question))
    )


def test_term_priority_components_hand_checked(bridge):
    choices, weights = choose_terms([_view(bridge, 1, 0.9, 0.9)], bridge, "sag2", L=5)
    by = {c.term: c for c in choices}

    # N = 8; df(glass) = 3 (units 1, 4 ... 'glass harbor' body of 4 says "Glass Harbor is a band")
    def idf(df):
        return math.log(1 + (8 - df + 0.5) / (df + 0.5))

    c = idf(bridge.df("glass")) + idf(bridge.df("harbour"))  # the sentence's question tokens, in order
    t = by["1961"].weight
    assert (t.tf, t.df, t.seed_weight) == (1, 1, 1.0)
    assert t.idf == idf(1) and t.query_connection == c
    assert t.priority == (1 + math.log(1)) * idf(1) * (1 + c) * 1.0
    assert by["mara quell"].kind == "name" and by["mara quell"].surface == "Mara Quell"
    # question tokens are excluded; names' words are not counted as ordinary tokens
    assert "glass" not in by and "harbour" not in by and "mara" not in by and "quell" not in by
    # equal priorities: pyuca collation order; the top 5 are selected
    assert [c.term for c in choices if c.selected] == ["1961", "directed", "drama", "film", "mara quell"]
    assert weights == {1: 1.0}


def test_seed_weight_and_later_seed_needs_strictly_higher_priority(tmp_path):
    ix = build_index(tmp_path, [("A", "zeta appears here."), ("B", "zeta appears here."), ("C", "other")])
    views = [_view(ix, 1, 0.4, 0.8, "question"), _view(ix, 2, 0.8, 0.8, "question")]
    choices, weights = choose_terms(views, ix, "sag2", L=10)
    assert weights == {1: 0.5 + 0.5 * 0.4 / 0.8, 2: 1.0}
    assert {c.term: c.seed for c in choices}["zeta"] == 2  # strictly higher: seed 2 wins
    equal = [_view(ix, 1, 0.8, 0.8, "question"), _view(ix, 2, 0.8, 0.8, "question")]
    assert {c.term: c.seed for c in choose_terms(equal, ix, "sag2", L=10)[0]}["zeta"] == 1  # tie: earlier seed


def test_zero_max_score_gives_weight_one_half(tmp_path):
    ix = build_index(tmp_path, [("A", "zeta"), ("B", "other")])
    assert choose_terms([_view(ix, 1, 0.0, 0.0, "q")], ix, "sag2", L=3)[1] == {1: 0.5}


def test_collation_tie_break_is_pyuca_not_code_points(tmp_path):
    ix = build_index(tmp_path, [("A", "zebra ß"), ("B", "other")])
    order = [c.term for c in choose_terms([_view(ix, 1, 1.0, 1.0, "q")], ix, "sag2", L=1)[0] if c.selected]
    assert order == ["ß"]  # collates as 'ss'; code points would put 'zebra' (0x7a) before 'ß' (0xdf)


# ---- expansion retrieval ------------------------------------------------------------------
def test_term_resolution_title_subphrase(tmp_path):
    ix = build_index(tmp_path, [("Glass Harbour", "a film"), ("Other", "the glass harbour pier")])
    # 'old glass harbour' has no match; its longest title sub-phrase 'glass harbour' has one
    assert resolve_term(ix, "old glass harbour", "name", "Old Glass Harbour", seen=set()) == (
        "glass harbour",
        "title phrase",
    )
    assert resolve_term(ix, "old glass harbour", "name", "Old Glass Harbour", seen={1, 2}) == (
        "old glass harbour",
        "as is",
    )
    assert resolve_term(ix, "film", "token", "film", seen=set()) == ("film", "as is")


def test_term_resolution_name_repair(tmp_path):
    ix = build_index(tmp_path, [("José Arriaga", "composer"), ("Other", "text")])
    assert resolve_term(ix, "jose arriaga", "name", "Jose Arriaga", seen=set()) == ("jos é arriaga", "name repair")


def test_expansion_interleaves_per_term_lists_of_unseen_units(tmp_path):
    from workbench.trace import Term

    ix = build_index(
        tmp_path, [("A", "alpha"), ("B", "alpha beta"), ("C", "beta"), ("D", "alpha alpha"), ("E", "gamma")]
    )
    terms = [
        Term("alpha", "token", "alpha", 1, 1, 3, 1.0, 0, 1, 1, 2.0, True, 1),
        Term("beta", "token", "beta", 1, 1, 2, 1.0, 0, 1, 1, 1.0, True, 2),
    ]
    expr, cands, _res = retrieve_expansion(ix, terms, '"gamma"', seen={1}, params=Params())
    assert expr == '"alpha" OR "beta" OR "gamma"'
    bm25 = ix.bm25_all(expr)
    alpha = sorted([2, 4], key=lambda u: (bm25[u], u))
    # rank 1 of alpha, rank 1 of beta, rank 2 of alpha (duplicates skipped)
    beta = sorted([2, 3], key=lambda u: (bm25[u], u))
    expected = []
    for pair in zip(alpha, beta):
        for u in pair:
            if u not in expected:
                expected.append(u)
    assert [c.unit_id for c in cands] == expected
    assert all(c.via_term in ("alpha", "beta") and c.term_rank >= 1 for c in cands)
    assert [c.retrieval_rank for c in cands] == list(range(1, len(cands) + 1))
    _, capped, _ = retrieve_expansion(ix, terms, '"gamma"', seen={1}, params=Params(B=2))
    assert len(capped) == 2


# ---- pools and context --------------------------------------------------------------------
def _hist(**kw):
    base = dict(
        seen=frozenset({1, 4, 5}),
        expanded=(1,),
        protected=(5,),
        latest={1: 0.9, 5: 0.1, 4: 0.1},
        fusion={},
        previous_ranking=(1, 5, 4),
    )
    base.update(kw)
    return History(**base)


def test_round1_pool_and_context():
    cands = [Candidate(2, 1, -1.0), Candidate(3, 2, -0.5)]
    pool = build_pool(1, cands, _hist(), Params(s=1))
    assert pool == (PoolEntry(5, "protected"), PoolEntry(1, "seed"), PoolEntry(2, "new"), PoolEntry(3, "new"))
    ctx = build_context(1, cands, _hist(), Params(s=1))
    assert [(c.unit_id, c.previous_score) for c in ctx] == [(1, None), (2, None)]  # A1 then first s of C1
    assert build_context(1, cands, _hist(), Params(s=1, use_context=False)) == ()


def test_final_round_pool_refills_from_history_and_limits_incoming():
    hist = _hist(
        seen=frozenset({1, 2, 4, 5}),
        expanded=(1, 2),
        latest={1: 0.9, 2: 0.8, 5: 0.1, 4: 0.1},
        previous_ranking=(1, 2, 5),
    )
    cands = [Candidate(8, 1, -1.0), Candidate(3, 2, -0.5)]
    pool = build_pool(2, cands, hist, Params(incoming_limit=1))
    # U2 = [5, 1, 2, 8, 3]; incoming = [8]; 4 refill slots: scored members of U2 first, then by score (ties: id)
    assert pool == (
        PoolEntry(5, "protected"),
        PoolEntry(1, "seed"),
        PoolEntry(2, "seed"),
        PoolEntry(4, "history"),
        PoolEntry(8, "new"),
    )
    ctx = build_context(2, cands, hist, Params(context_size=2))
    assert [(c.unit_id, c.previous_score) for c in ctx] == [(1, 0.9), (2, 0.8)]


# ---- the whole run ------------------------------------------------------------------------
def test_bridge_is_reached_through_the_name_term(bridge):
    trace = bridge_run(bridge).run()
    r1, r2 = trace.rounds[1], trace.rounds[2]
    assert [c.unit_id for c in r1.candidates] == [2] and r1.candidates[0].via_term == "mara quell"
    assert [s.unit_id for s in r1.seeds] == [1]
    assert [(e.unit_id, e.origin) for e in r1.pool] == [(5, "protected"), (1, "seed"), (2, "new")]
    assert [c.unit_id for c in r1.context] == [1, 2]
    assert r1.ranking == (1, 2, 5)
    assert [s.unit_id for s in r2.seeds] == [2]
    assert [c.unit_id for c in r2.candidates] == [8, 3]  # via 'rivers' then 'tessaly'
    assert [c.via_term for c in r2.candidates] == ["rivers", "tessaly"]
    assert [(c.unit_id, c.previous_score) for c in r2.context] == [(1, 0.9), (2, 0.8), (5, 0.1)]
    assert r2.ranking[:3] == (1, 2, 3) and trace.stop == STOP_MAX_ROUNDS
    assert trace.judgments == 3 + 3 + 5
    assert [r.judgments for r in trace.rounds] == [3, 3, 5]


def test_stop_when_no_new_candidates_keeps_previous_ranking(bridge):
    trace = Run(bridge, QUESTION, Params(s=1, L=3, p=1), FunctionJudge(title_judge(SCORES))).run()
    assert trace.rounds[-1].stop == STOP_NO_NEW_CANDIDATES and not trace.rounds[-1].scored
    assert trace.rounds[-1].ranking == trace.rounds[-2].ranking


def test_stop_when_expansion_reaches_only_seen_units(tmp_path):
    ix = build_index(tmp_path, [("A", "alpha beta"), ("B", "gamma")])
    trace = Run(ix, "alpha", Params(s=5, H=2), FunctionJudge(title_judge({}))).run()
    # By hand: C0 = [A] (only A contains "alpha"); round 0 ranks (A,). Round 1: A is a new seed
    # (so not "no new seeds"); its one eligible term is "beta" ("alpha" is the question's own
    # token), so there is a term (not "no expansion terms"); but "beta" matches only A, which
    # was scored in round 0, and B shares no token with A: no unseen candidate, so the run
    # stops with "no new candidates", keeping round 0's ranking.
    assert [r.stop for r in trace.rounds] == [None, STOP_NO_NEW_CANDIDATES]
    r1 = trace.rounds[1]
    assert [s.unit_id for s in r1.seeds] == [1] and [(t.term, t.selected) for t in r1.terms] == [("beta", True)]
    assert r1.candidates == () and not r1.scored and r1.ranking == trace.rounds[0].ranking == (1,)


def test_stop_when_no_new_seeds(tmp_path):
    ix = build_index(tmp_path, [("A", "alpha beta"), ("B", "beta gamma")])
    trace = Run(ix, "alpha", Params(B=1, H=2), FunctionJudge(title_judge({"A": 0.9, "B": 0.2}))).run()
    # By hand, with B=1 (one candidate and one ranked unit per round): round 0 ranks (A,).
    # Round 1 expands seed A by "beta", retrieves B, scores the pool [A (protected), B]:
    # A 0.9 > B 0.2, and the ranking keeps only A. Round 2's seeds are round 1's ranked units
    # never used as seeds: A was, and there is no other, so the run stops with "no new seeds".
    assert [r.stop for r in trace.rounds] == [None, None, STOP_NO_SEEDS]
    assert [c.unit_id for c in trace.rounds[1].candidates] == [2] and trace.rounds[1].ranking == (1,)
    assert trace.rounds[2].seeds == () and trace.rounds[2].ranking == (1,) and trace.final_ranking == (1,)


def test_judge_error_stops_at_that_round_and_keeps_earlier_rounds(bridge):
    calls = []

    def flaky(question, candidates, context):
        calls.append(len(candidates))
        if len(calls) > 1:
            raise TimeoutError("judge timed out")
        return [0.5] * len(candidates)

    trace = Run(bridge, QUESTION, Params(s=1, L=6, p=1), FunctionJudge(flaky, "flaky")).run()
    assert trace.rounds[0].scored and trace.rounds[1].stop == STOP_JUDGE_ERROR
    assert "flaky" in trace.rounds[1].error and "TimeoutError" in trace.rounds[1].error
    assert trace.final_ranking[0] in trace.rounds[0].ranking


@pytest.mark.parametrize("bad", [[1.5], [float("nan")], [], ["x"]])
def test_bad_probabilities_name_the_judge(bridge, bad):
    trace = Run(bridge, QUESTION, Params(), FunctionJudge(lambda q, c, x: bad * len(c) if bad else [], "mine")).run()
    assert trace.stop == STOP_JUDGE_ERROR and "'mine'" in trace.rounds[0].error


def test_pins_fix_a_score_in_a_round(bridge):
    run = bridge_run(bridge, H=0)
    run.pins = {(0, 4): 1.0}
    state = run.step()
    assert state.ranking[0] == 4 and state.pinned == (4,) and state.judgments == 2


def test_rerun_from_affected_round_reuses_judgments(bridge):
    run = bridge_run(bridge)
    first = run.run()
    again = run.rerun(params=run.params.replace(incoming_limit=1))
    assert again.rounds[:2] == run.rounds[:2]  # rounds 0-1 kept as data
    hits_before = run.memo.hits
    second = again.run()
    assert second.rounds[2].pool != first.rounds[2].pool
    assert run.memo.hits > hits_before  # round 2's refill units were judged before in that context


def test_rerun_with_larger_h_continues_a_finished_run(bridge):
    run = bridge_run(bridge, H=0)
    run.run()
    more = run.rerun(params=run.params.replace(H=2))
    trace = more.run()
    assert len(trace.rounds) == 3 and trace.rounds[0] == run.rounds[0].__class__(
        **{**run.rounds[0].__dict__, "stop": None}
    )


def test_truncated_trace_reads_h1_from_the_same_trajectory(bridge):
    trace = bridge_run(bridge).run()
    h1 = truncated_trace(bridge, trace, 1)
    assert len(h1.rounds) == 2 and h1.rounds[-1].stop == STOP_MAX_ROUNDS
    assert h1.judgments == 6 and h1.params.H == 1


def test_same_inputs_give_byte_identical_json_that_round_trips(bridge):
    a = bridge_run(bridge).run().to_json()
    b = bridge_run(bridge).run().to_json()
    assert a == b
    assert Trace.from_json(a).to_json() == a
    run = bridge_run(bridge)
    first = run.run()
    warm = Run(bridge, QUESTION, run.params, run.judge, memo=run.memo).run()  # every judgment from the memo
    assert warm.stats["memo_hits"] == warm.judgments and first.to_json() != warm.to_json()
    assert first.to_json(stats=False) == warm.to_json(stats=False)


def test_frames_have_documented_columns(bridge):
    from workbench.trace import PASSAGE_COLUMNS, SEED_COLUMNS, TERM_COLUMNS

    frames = bridge_run(bridge).run().frames()
    assert list(frames["passages"].columns) == PASSAGE_COLUMNS
    assert list(frames["terms"].columns) == TERM_COLUMNS
    assert list(frames["seeds"].columns) == SEED_COLUMNS
    assert frames["seeds"][["round", "rank", "unit_id", "score", "weight"]].values.tolist() == [
        [1, 1, 1, 0.9, 1.0],
        [2, 1, 2, 0.8, 1.0],
    ]
    p = frames["passages"]
    row = p[(p["round"] == 2) & (p["unit_id"] == 1)].iloc[0]
    assert row["previous_score"] == 0.9 and row["score_change"] == 0.0 and row["origin"] == "seed"


def test_lexical_judge_uses_context(bridge):
    judge = LexicalJudge(bridge)
    cand = [{"unit_id": 2, "title": "Mara Quell", "text": bridge.unit(2).body, "document": "Mara Quell"}]
    alone = judge.judge(QUESTION, cand, [])[0]
    ctx = [{"unit_id": 1, "title": "Glass Harbour", "text": bridge.unit(1).body}]
    assert judge.judge(QUESTION, cand, ctx)[0] > alone


# ---- diversity ------------------------------------------------------------------------------
def test_diversity_moves_a_near_duplicate_down(tmp_path):
    ix = build_index(tmp_path, [("A", "red apple fruit"), ("B", "red apple fruit"), ("C", "blue ocean wave")])
    out = diversify(ix, (1, 2, 3), {1: 0.9, 2: 0.85, 3: 0.8})
    assert out == (1, 3, 2)  # first kept; the duplicate's residual is ~0 after picking A


def test_diversity_keeps_order_when_all_residuals_vanish(tmp_path):
    ix = build_index(tmp_path, [("A", "same words"), ("B", "same words"), ("C", "same words")])
    assert diversify(ix, (3, 1, 2), {1: 0.5, 2: 0.5, 3: 0.5}) == (3, 1, 2)


def test_diversity_only_touches_top_n(tmp_path):
    ix = build_index(tmp_path, [(f"T{i}", f"word{i} common") for i in range(12)])
    ranking = tuple(range(1, 13))
    out = diversify(ix, ranking, {u: 1.0 - u / 100 for u in ranking}, n=10)
    assert out[10:] == ranking[10:] and set(out[:10]) == set(ranking[:10]) and out[0] == 1


def test_step_records_a_round_computed_outside_the_run_and_stops_with_it(tmp_path):
    """The hook final-only uses (workbench/runs/policies.py): rounds a policy computed itself are
    recorded in order through `step(state)`; nothing outside Run assigns its rounds."""
    index = build_index(tmp_path, BRIDGE_WORLD)
    question = "Where was the director of Glass Harbour born?"
    judge = FunctionJudge(title_judge({"Mara Quell": 0.9}))
    computed = Run(index, question, Params(H=2), judge).run().rounds
    run = Run(index, question, Params(H=2), judge)
    assert [run.step(state) for state in computed] == list(computed)
    assert run.finished and run.step(computed[0]) is None
    assert run.trace().rounds == computed
