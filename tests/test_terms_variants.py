"""Term-weighting variants (SPEC §3 "Term selection", issue 6): every shipped variant on one
hand-checked seed, the registry, FILE.py:NAME plug-ins, and the bad-input errors.

The seed is built directly from sentences (units = 𝔅(u), tokens = T(u)), so the figures
below depend only on the formulas, not on the tokenizer:

    N = 100, idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))
    df: kestrel 1, harbour 9, porto calven 2, director 19, film 49, river 30, 7 5
    question tokens {film, director}
    u1: units kestrel film kestrel "porto calven"   T = kestrel film porto calven  c = idf(film)
    u2: units harbour director harbour              T = harbour director           c = idf(director)
    u3: units kestrel river 7                       T = kestrel river 7            c = 0
    tf: kestrel 3, harbour 2, porto calven 1, river 1, 7 1   (film, director: question tokens)
    c(kestrel) = max(idf(film), 0) = idf(film); c(porto calven) = idf(film); c(harbour) = idf(director)
    seed score 0.6, m = 0.8  ->  w = 0.5 + 0.5 * 0.6 / 0.8 = 0.875
"""

import math

import pytest

from workbench import terms
from workbench.terms import (
    TERM_WEIGHTINGS,
    SeedView,
    Sentence,
    TermWeight,
    TermWeightingError,
    choose_terms,
    get_term_weighting,
    register_term_weighting,
    variant_fingerprint,
)

N = 100
DF = {"kestrel": 1, "harbour": 9, "porto calven": 2, "director": 19, "film": 49, "river": 30, "7": 5}
IDF_1 = 4.209655408733095  # ln(1 + 99.5 / 1.5)   kestrel
IDF_9 = 2.3638287182347644  # ln(1 + 91.5 / 9.5)  harbour
IDF_2 = 3.6988297849671046  # ln(1 + 98.5 / 2.5)  porto calven
IDF_19 = 1.6447060512715583  # ln(1 + 81.5 / 19.5) director
IDF_49 = 0.713147847266615  # ln(1 + 51.5 / 49.5)  film
IDF_30 = 1.1973938332278935  # ln(1 + 70.5 / 30.5) river
IDF_5 = 2.9103724246028344  # ln(1 + 95.5 / 5.5)   7
LN3, LN2 = math.log(3), math.log(2)


class Stats:
    def __init__(self, df, n=N):
        self.N, self._df = n, dict(df)

    def df(self, term):
        return self._df.get(term, 0)

    def idf(self, term):
        df = self.df(term)
        return math.log(1 + (self.N - df + 0.5) / (df + 0.5))


SENTENCES = (
    Sentence(
        "s1",
        ("kestrel", "film", "kestrel", "porto calven"),
        (("porto calven", "Porto Calven"),),
        ("kestrel", "film", "porto", "calven"),
    ),
    Sentence("s2", ("harbour", "director", "harbour"), (), ("harbour", "director")),
    Sentence("s3", ("kestrel", "river", "7"), (), ("kestrel", "river", "7")),
)
ELIGIBLE = frozenset({"kestrel", "harbour", "porto calven", "river", "7"})


def seed(score=0.6, max_score=0.8, unit_id=1, rank=1, sentences=SENTENCES):
    return SeedView(
        unit_id=unit_id,
        rank=rank,
        title="T",
        score=score,
        max_score=max_score,
        sentences=sentences,
        question_tokens=frozenset({"film", "director"}),
        candidate_terms=ELIGIBLE,
    )


def priorities(name, s=None):
    return {t: w.priority for t, w in get_term_weighting(name)(s or seed(), Stats(DF)).items()}


def test_idf_constants_are_the_spec_formula():
    st = Stats(DF)
    for term, value in [
        ("kestrel", IDF_1),
        ("harbour", IDF_9),
        ("porto calven", IDF_2),
        ("director", IDF_19),
        ("film", IDF_49),
        ("river", IDF_30),
        ("7", IDF_5),
    ]:
        assert st.idf(term) == pytest.approx(value, rel=1e-12)


def test_sag2_rule_hand_checked():
    w = 0.875
    got = get_term_weighting("sag2")(seed(), Stats(DF))
    assert set(got) == ELIGIBLE  # question tokens film/director are not proposed
    k = got["kestrel"]
    assert (k.tf, k.df, k.seed_weight, k.seed_score) == (3, 1, w, 0.6)
    assert k.query_connection == pytest.approx(IDF_49)
    expected = {
        "kestrel": (1 + LN3) * IDF_1 * (1 + IDF_49) * w,  # 2.0986 * 4.2097 * 1.7131 * 0.875 = 13.2429
        "harbour": (1 + LN2) * IDF_9 * (1 + IDF_19) * w,  # 1.6931 * 2.3638 * 2.6447 * 0.875 = 9.2618
        "porto calven": 1 * IDF_2 * (1 + IDF_49) * w,  # 3.6988 * 1.7131 * 0.875 = 5.5446
        "river": 1 * IDF_30 * 1 * w,  # 1.0477
        "7": 1 * IDF_5 * 1 * w,  # 2.5466
    }
    for t, v in expected.items():
        assert got[t].priority == pytest.approx(v, rel=1e-12), t
    assert got["kestrel"].priority == pytest.approx(13.24286, abs=1e-4)
    assert got["harbour"].priority == pytest.approx(9.26182, abs=1e-4)
    assert got["porto calven"].priority == pytest.approx(5.54456, abs=1e-4)


def test_no_query_connection_drops_the_sentence_factor():
    got = priorities("no_query_connection")
    assert got["kestrel"] == pytest.approx((1 + LN3) * IDF_1 * 0.875)  # 7.7301
    assert got["harbour"] == pytest.approx((1 + LN2) * IDF_9 * 0.875)  # 3.5019
    assert got["porto calven"] == pytest.approx(IDF_2 * 0.875)


def test_uniform_seed_weight_ignores_the_judge_score():
    got = priorities("uniform_seed_weight")
    assert got["kestrel"] == pytest.approx((1 + LN3) * IDF_1 * (1 + IDF_49))  # 15.1347
    assert priorities("uniform_seed_weight", seed(score=0.0)) == got  # score no longer matters
    assert priorities("sag2", seed(score=0.0))["kestrel"] == pytest.approx(got["kestrel"] * 0.5)


def test_no_idf_drops_rarity():
    got = priorities("no_idf")
    assert got["kestrel"] == pytest.approx((1 + LN3) * (1 + IDF_49) * 0.875)  # 3.1458
    assert got["harbour"] == pytest.approx((1 + LN2) * (1 + IDF_19) * 0.875)
    assert got["river"] == pytest.approx(0.875)


def test_tf_only_is_one_plus_log_tf():
    got = priorities("tf_only")
    assert got == pytest.approx({"kestrel": 1 + LN3, "harbour": 1 + LN2, "porto calven": 1.0, "river": 1.0, "7": 1.0})


def test_bm25_feedback_rm3_like_definition():
    got = get_term_weighting("bm25_feedback")(seed(), Stats(DF))
    # river: df 30 > 10% of N -> dropped; "7": one character -> dropped; the name phrase stays
    assert set(got) == {"kestrel", "harbour", "porto calven"}
    length = 4 + 3 + 3  # expansion units of the seed
    norm = 1.2 * (1 - 0.75 + 0.75 * length / 100)  # 0.39
    assert norm == pytest.approx(0.39)
    bm25 = {
        "kestrel": 3 * 2.2 / (3 + norm) * IDF_1,
        "harbour": 2 * 2.2 / (2 + norm) * IDF_9,
        "porto calven": 1 * 2.2 / (1 + norm) * IDF_2,
    }
    for t, v in bm25.items():
        assert got[t].priority == pytest.approx(v * 0.6, rel=1e-12), t
        assert dict(got[t].extra)["bm25_weight"] == pytest.approx(v)
        assert got[t].query_connection == 0.0 and got[t].seed_weight == 0.6
    assert got["kestrel"].priority == pytest.approx(4.91747, abs=1e-4)  # 8.19579 * 0.6


def test_choose_terms_max_over_seeds_and_collation_tie_break():
    st = Stats({**DF, "alpha": 3, "beta": 3})
    tie = (Sentence("t", ("beta", "alpha"), (), ("beta", "alpha")),)
    first = seed(score=0.4, max_score=0.8, unit_id=1, rank=1, sentences=SENTENCES + tie)
    second = seed(score=0.8, max_score=0.8, unit_id=2, rank=2, sentences=SENTENCES[1:2])
    choices, weights = choose_terms([first, second], st, "sag2", L=3)
    by_term = {c.term: c for c in choices}
    assert by_term["harbour"].seed == 2  # higher seed weight wins (1.0 > 0.75)
    assert by_term["kestrel"].seed == 1
    assert weights == {1: 0.75, 2: 1.0}
    # alpha and beta have equal priorities: the collation key orders them
    order = [c.term for c in choices]
    assert order.index("alpha") < order.index("beta")
    assert [c.term for c in choices if c.selected] == order[:3]
    # a later seed with an equal priority does not take the term over
    same = seed(score=0.4, max_score=0.8, unit_id=3, rank=2, sentences=SENTENCES)
    choices, _ = choose_terms([first, same], st, "sag2", L=3)
    assert {c.term: c.seed for c in choices}["kestrel"] == 1


def test_register_and_select_a_notebook_variant():
    def half_idf(s, stats):
        return {t: TermWeight(0.5 * stats.idf(t), idf=stats.idf(t)) for t in s.candidate_terms}

    register_term_weighting("half_idf_test", half_idf)
    try:
        assert get_term_weighting("half_idf_test") is half_idf
        choices, _ = choose_terms([seed()], Stats(DF), "half_idf_test", L=2)
        assert [c.term for c in choices if c.selected] == ["kestrel", "porto calven"]
        # plain numbers are accepted as priorities too
        register_term_weighting("plain_test", lambda s, stats: {t: 1.0 for t in s.candidate_terms})
        choices, weights = choose_terms([seed()], Stats(DF), "plain_test", L=2)
        assert all(c.weight.priority == 1.0 for c in choices) and weights == {1: None}
    finally:
        TERM_WEIGHTINGS.pop("half_idf_test", None)
        TERM_WEIGHTINGS.pop("plain_test", None)


def test_unknown_variant_lists_the_registered_ones():
    with pytest.raises(TermWeightingError) as err:
        get_term_weighting("no_such_rule")
    for name in ("sag2", "no_query_connection", "uniform_seed_weight", "no_idf", "tf_only", "bm25_feedback"):
        assert name in str(err.value)
    with pytest.raises(TermWeightingError, match="not callable"):
        register_term_weighting("x", 3)
    with pytest.raises(TermWeightingError, match="non-empty"):
        register_term_weighting("", lambda s, st: {})


@pytest.mark.parametrize("bad", [float("nan"), -1.0, float("inf"), "high"])
def test_misbehaving_priorities_are_named(bad):
    register_term_weighting("broken_test", lambda s, stats: {t: TermWeight(bad) for t in s.candidate_terms})
    try:
        with pytest.raises(TermWeightingError) as err:
            choose_terms([seed()], Stats(DF), "broken_test", L=5)
        msg = str(err.value)
        assert "'broken_test'" in msg and "finite and >= 0" in msg and "seed 1" in msg
    finally:
        TERM_WEIGHTINGS.pop("broken_test", None)


def test_variant_returning_a_non_dict_is_named():
    register_term_weighting("listy_test", lambda s, stats: [1.0])
    try:
        with pytest.raises(TermWeightingError, match="'listy_test' returned list"):
            choose_terms([seed()], Stats(DF), "listy_test", L=5)
    finally:
        TERM_WEIGHTINGS.pop("listy_test", None)


def test_file_variant_is_loaded_once_and_reloaded_when_edited(tmp_path):
    f = tmp_path / "my_rules.py"
    f.write_text(
        "from workbench.terms import sag2_rule\n"
        "def doubled(seed, stats):\n"
        "    return {t: w.__class__(2 * w.priority) for t, w in sag2_rule(seed, stats).items()}\n"
    )
    spec = f"{f}:doubled"
    fn = get_term_weighting(spec)
    assert get_term_weighting(spec) is fn  # cached: not re-executed every round
    assert priorities(spec)["kestrel"] == pytest.approx(2 * priorities("sag2")["kestrel"])
    before = variant_fingerprint(spec)
    f.write_text("def doubled(seed, stats):\n    return {t: 1.0 for t in seed.candidate_terms}\n")
    import os

    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 10**9))
    assert get_term_weighting(spec) is not fn
    assert variant_fingerprint(spec) != before
    with pytest.raises(TermWeightingError, match="has no 'nope'"):
        get_term_weighting(f"{f}:nope")
    with pytest.raises(TermWeightingError, match="no such file"):
        get_term_weighting(f"{tmp_path / 'missing.py'}:x")


def test_fingerprint_is_stable_and_tells_variants_apart():
    assert variant_fingerprint("sag2") == variant_fingerprint("sag2")
    assert len({variant_fingerprint(n) for n in ("sag2", "no_idf", "tf_only", "bm25_feedback")}) == 4
    register_term_weighting("fp_test", lambda s, st: {t: 1.0 for t in s.candidate_terms})
    a = variant_fingerprint("fp_test")
    register_term_weighting("fp_test", lambda s, st: {t: 2.0 for t in s.candidate_terms})
    try:
        assert variant_fingerprint("fp_test") != a  # an edited notebook cell is a new variant
    finally:
        TERM_WEIGHTINGS.pop("fp_test", None)


def test_shipped_registry():
    assert set(TERM_WEIGHTINGS) >= {
        "sag2",
        "no_query_connection",
        "uniform_seed_weight",
        "no_idf",
        "tf_only",
        "bm25_feedback",
    }
    assert terms.RM3_MAX_DF_SHARE == 0.10


def _sample_traces(tmp_path, corpus, questions, variant, name):
    from workbench.engine import Run
    from workbench.index.corpora import load_corpus, load_questions
    from workbench.index.store import Index
    from workbench.judges.lexical import LexicalJudge
    from workbench.params import Params

    index = Index.build(load_corpus(corpus), tmp_path / f"{name}.sqlite")
    runs = [Run(index, q, Params(term_weighting=variant), LexicalJudge(index)) for q in load_questions(questions)]
    return [r.run().to_json(stats=False) for r in runs], len(index._df)


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["sag2", "bm25_feedback", "no_idf"])
def test_bounded_df_counting_keeps_the_same_rows(tmp_path, monkeypatch, variant):
    # Phrases are first weighed with df = 1 and counted only if that bound reaches the kept
    # rows; whole trajectories must equal those with every df counted, on both samples
    # (the docs sample has non-plain question tokens such as 'role_id' and Chinese ones).
    from .conftest import REPO

    samples = [
        (
            REPO / "sample_corpora" / "encyclopedia" / "corpus.json",
            REPO / "sample_corpora" / "encyclopedia" / "questions.jsonl",
        ),
        (REPO / "sample_corpora" / "internal_docs", REPO / "sample_corpora" / "internal_docs.questions.jsonl"),
    ]
    for k, (corpus, questions) in enumerate(samples):
        bounded, counted_bounded = _sample_traces(tmp_path, corpus, questions, variant, f"b{k}")
        with monkeypatch.context() as m:
            m.setattr(terms, "_IDF_MONOTONE", frozenset())  # every df counted
            full, counted_full = _sample_traces(tmp_path, corpus, questions, variant, f"f{k}")
        assert bounded == full
        if variant == "sag2":
            assert counted_bounded < counted_full  # some phrases were never counted


def test_bounded_counting_equals_full_counting_on_a_generated_corpus(tmp_path):
    # Bodies mix plain words, connected tokens (counted as phrases: 'ab_cd' is "ab cd" in
    # FTS5) and two-word names; questions contain connected tokens, so a query connection
    # depends on an idf that needs a count. For every keep, the kept rows must match.
    import random

    from workbench.index.store import Index
    from workbench.terms import SeedView, analyze_body
    from workbench.text import tokenize

    from .conftest import build_index

    rnd = random.Random(20261130)
    words = [f"w{i}" for i in range(40)]
    connected = [f"k{i}_x{i % 3}" for i in range(12)]
    names = [f"Name{i} Surname{i % 5}" for i in range(15)]
    passages = []
    for n in range(60):
        sentences = []
        for _ in range(rnd.randint(1, 4)):
            parts = rnd.sample(words, rnd.randint(2, 6)) + rnd.sample(connected, rnd.randint(0, 2))
            parts += [rnd.choice(names)] * rnd.randint(0, 2)
            rnd.shuffle(parts)
            sentences.append(" ".join(parts))
        passages.append((f"Passage {n}", ". ".join(sentences) + "."))
    path = build_index(tmp_path, passages).path
    for qi in range(15):
        question = " ".join(rnd.sample(connected, 2) + rnd.sample(words, 2))
        qtokens = frozenset(tokenize(question))
        chosen = rnd.sample(range(1, 61), 6)
        for keep in (1, 2, 3, 5, 8, 13):
            got = []
            for monotone in (terms._IDF_MONOTONE, frozenset()):
                ix = Index(path)  # fresh statistics: nothing counted yet
                ix.search('"w1"', 1)  # the engine has split the question's phrases by now
                for t in qtokens:
                    ix.postings.tokens(t)
                views = [
                    SeedView(
                        u,
                        r + 1,
                        ix.unit(u).title,
                        1.0 / (r + 1),
                        1.0,
                        analyze_body(ix.unit(u).body),
                        qtokens,
                        body=ix.unit(u).body,
                    )
                    for r, u in enumerate(chosen)
                ]
                saved, terms._IDF_MONOTONE = terms._IDF_MONOTONE, monotone
                try:
                    got.append(choose_terms(views, ix, "sag2", L=min(keep, 3), keep=keep)[0])
                finally:
                    terms._IDF_MONOTONE = saved
            assert got[0] == got[1], (qi, keep)


def test_a_variant_registered_under_a_builtin_name_sees_exact_statistics(tmp_path):
    from workbench.terms import SeedView, analyze_body, register_term_weighting

    from .conftest import build_index

    ix = build_index(tmp_path, [("A", "Mara Quell met Piet Oduya in Tessaly."), ("B", "Piet Oduya left.")])
    seen = []

    def mine(seed, stats):
        seen.extend((t, stats.df(t)) for t in sorted(seed.candidate_terms))
        return {t: 1.0 for t in seed.candidate_terms}

    original = terms.TERM_WEIGHTINGS["sag2"]
    register_term_weighting("sag2", mine)
    try:
        body = ix.unit(1).body
        view = SeedView(1, 1, "A", 1.0, 1.0, analyze_body(body), frozenset({"tessaly"}), body=body)
        choose_terms([view], ix, "sag2", L=2, keep=6)
    finally:
        terms.TERM_WEIGHTINGS["sag2"] = original
    assert ("piet oduya", 2) in seen and ("mara quell", 1) in seen  # counted, not bounded


class _CountingStats:
    """Corpus statistics that count each phrase's df on request (and note which were asked)."""

    N = 1000

    def __init__(self, dfs):
        self.dfs, self.counted = dfs, set()

    def df(self, term):
        if " " in term:
            self.counted.add(term)
        return self.dfs.get(term, 1)

    def idf(self, term):
        df = self.df(term)
        return math.log(1 + (self.N - df + 0.5) / (df + 0.5))

    def cheap_df(self, term):
        return None if " " in term else self.dfs[term]


def test_pending_phrases_are_counted_best_bound_first_until_the_floor_passes_them():
    # Nine names, each in 1 unit: 'ann bell' three times (priority (1 + ln 3) * idf(1)), the others
    # once (idf(1)). Weighed with df = 1 first, all nine reach the tokens' floor (keep = 1: 'met',
    # df 500), so all were counted; counted best bound first, eight at a time, the first batch
    # ('ann bell', then by term from 'quin ross' down to 'eve ford') lifts the floor to ann bell's
    # priority, above 'carl dunn''s bound: it is never counted, and the kept row is the same.
    from workbench.terms import SeedView, analyze_body, choose_terms

    body = (
        "Ann Bell met Ann Bell near Ann Bell. Carl Dunn met Eve Ford. Gus Hale met Ida Jones. "
        "Kai Lund met Max Nash. Ola Pratt met Quin Ross."
    )
    seed = SeedView(1, 1, "t", 1.0, 1.0, analyze_body(body), frozenset({"zzz"}), body=body)
    dfs = {"met": 500, "near": 400}
    bounded, full = _CountingStats(dfs), _CountingStats(dfs)
    (kept,), _ = choose_terms([seed], bounded, "no_query_connection", 1, keep=1)
    everything, _ = choose_terms([seed], full, "no_query_connection", 1)
    assert kept == everything[0] and kept.term == "ann bell" and kept.weight.df == 1
    assert math.isclose(kept.weight.priority, (1 + math.log(3)) * math.log(1 + 999.5 / 1.5))
    assert len(full.counted) == 9 and bounded.counted == full.counted - {"carl dunn"}
