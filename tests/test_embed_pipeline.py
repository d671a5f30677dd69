"""Embedder.embed queues every new text at once and stores each batch in one transaction while the
model runs on (embeddings.MiniLM.forward_each). The vectors, the cache's contents and the progress
calls must be those of embedding each text alone; a bad vector stops the call with nothing of its
batch stored."""

from __future__ import annotations

import diskcache
import numpy as np
import pytest

from workbench.judges.embeddings import Embedder, EmbeddingModelError, load_model, text_key

TEXTS = [
    "Glass Harbour is a 1987 film directed by Mira Olsen.",
    "Mira Olsen",
    "The lighthouse keeper's daughter, a novel, was adapted for the screen twice, in 1961 and 1994. " * 3,
    "Refunds are approved by the finance team within five working days.",
    "北京是中华人民共和国的首都。",
    "x",
    "Who directed Glass Harbour?",
    "An archive of letters written between 1850 and 1890 by the harbour master.",
]


@pytest.fixture(scope="module")
def model():
    return load_model()


def test_pipelined_batches_store_what_each_text_alone_gives(model, tmp_path):
    alone = np.stack([Embedder(False, model=model).embed([t])[0] for t in TEXTS])
    seen: list[int] = []
    emb = Embedder(tmp_path / "c", model=model, batch_size=3)
    got = emb.embed(TEXTS + TEXTS[:2], progress=seen.append)  # repeats are embedded once
    assert np.array_equal(got[: len(TEXTS)], alone) and np.array_equal(got[len(TEXTS) :], alone[:2])
    assert seen == [3, 3, 2] and emb.stats()["embedded"] == len(TEXTS)
    emb.close()
    with diskcache.Cache(str(tmp_path / "c")) as cache:
        assert len(cache) == len(TEXTS)
        for text, vec in zip(TEXTS, alone):
            assert cache.get(text_key(model.id, text)) == vec.tobytes()
    again = Embedder(tmp_path / "c", model=model)
    assert np.array_equal(again.embed(TEXTS), alone) and again.stats()["disk_hits"] == len(TEXTS)


def test_a_non_finite_vector_stops_the_call_and_its_batch_is_not_stored(model, tmp_path, monkeypatch):
    bad = TEXTS[3]
    ids_bad = model.tokenize([bad])[0]
    real = model._one

    def one(ids):  # the model producing NaN for one text: a corrupt model file would
        return np.full(384, np.nan, dtype=np.float32) if ids == ids_bad else real(ids)

    monkeypatch.setattr(model, "_one", one)
    emb = Embedder(tmp_path / "c", model=model, batch_size=2)
    with pytest.raises(EmbeddingModelError, match="non-finite"):
        emb.embed(TEXTS)
    emb.close()
    # texts are run longest first; the batches before the bad text's are stored, its own and later ones not
    lengths = {t: len(model.tokenize([t])[0]) for t in TEXTS}
    order = sorted(TEXTS, key=lambda t: -lengths[t])
    stored_until = order.index(bad) // 2 * 2
    with diskcache.Cache(str(tmp_path / "c")) as cache:
        keys = set(cache.iterkeys())
        assert keys == {text_key(model.id, t) for t in order[:stored_until]}
        for k in keys:
            assert np.all(np.isfinite(np.frombuffer(cache.get(k), dtype=np.float32)))
