"""The corpus graph's memory at scale (issue 33): the phrase table made in the postings' stored
order by one merged pass over the blocks (`graph_table.stored_order_table`), without a dict of
every term's blobs beside it, equals the table of one look-up per phrase under the renumbered
phrase ids, on one block and on several; the caches the table filled are let go; and
`build_graph` does not load `Index.documents` before its scoring workers fork."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

from tests.conftest import units_from
from tests.test_graph_scale import corpora  # noqa: F401 (the fixture)
from tests.test_graph_table import assert_equal_tables
from workbench.feedback import build_graph, graph_kernel, graph_scoring, graph_table
from workbench.index import Index, build
from workbench.index.postings import K1

THREE = [("Harbour", "glass boats"), ("Quay", "vellor and vellor"), ("Vellor", "boats")]


def _one_block_per_unit(folder, passages) -> Index:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(build, "CHUNK_UNITS", 1)
        patch.setattr(build, "BLOCK_CHUNKS", 1)
        return Index.build(units_from(passages), folder / "blocks.sqlite")


def _question_texts(questions) -> list[list[str]]:
    return [[questions.vocabulary[p] for p in questions.of(i).tolist()] for i in range(len(questions.ids))]


def check_stored_order(index: Index, weights=(2.0, 2.0, 1.0)) -> graph_scoring.PhraseTable:
    ids = np.array(sorted(index.documents), dtype=np.int64)
    questions = graph_scoring.questions_of(index, ids, 80, 1)
    texts = _question_texts(questions)
    postings = index.postings
    assert postings is not None
    _, n_single = graph_table.table_order(postings, questions.vocabulary)
    table = graph_table.stored_order_table(postings, questions, weights)
    assert _question_texts(questions) == texts  # the same questions under the new ids
    assert questions.vocabulary[:n_single] == sorted(questions.vocabulary[:n_single])
    assert_equal_tables(table, graph_scoring.phrase_table(postings, questions.vocabulary, weights))
    return table


@pytest.mark.parametrize("batch_bytes", [1, 300, 4 << 20])
@pytest.mark.parametrize("corpus", ["encyclopedia", "internal_docs"])
def test_the_stored_order_table_equals_one_look_up_per_phrase(corpora, corpus, batch_bytes, monkeypatch):  # noqa: F811
    monkeypatch.setattr(graph_table, "BATCH_BYTES", batch_bytes)
    table = check_stored_order(corpora[corpus])
    assert len(table.rows) > 1000
    check_stored_order(corpora[corpus], (1.0, 0.5, 3.0))


def test_several_blocks_merge_into_term_order(corpora, tmp_path):  # noqa: F811
    """Each unit its own block: a term's rows come from several cursors, merged in block order."""
    passages = [(u.title, u.body) for u in corpora["internal_docs"].units(sorted(corpora["internal_docs"].documents))]
    many = _one_block_per_unit(tmp_path, passages)
    assert len(many.postings.blocks) > 10  # a chunk per document
    check_stored_order(many)


def test_a_hand_checked_stream_over_three_blocks(tmp_path):
    """'boats' in units 1 and 3, 'vellor' in 2 and 3: each term's blobs together, in block order."""
    index = _one_block_per_unit(tmp_path, THREE)
    postings = index.postings
    stream = [(t, b) for t, b, _ in graph_table._term_stream(postings, None)]
    assert stream == sorted(stream) and len(postings.blocks) == 3
    assert [b for t, b in stream if t == "vellor"] == [1, 2] and [b for t, b in stream if t == "boats"] == [0, 2]
    lengths, rows, impacts = graph_table.streamed_parts(postings, ["boats", "nothing", "vellor"], (2.0, 2.0, 1.0))
    assert lengths.tolist() == [2, 0, 2]
    assert np.concatenate(rows).tolist() == [1, 3, 2, 3]  # unit ids are rows
    idf = 1e-6  # log((3 - 2 + 0.5) / (2 + 0.5)) < 0: bm25()'s floor
    assert math.log(1.5 / 2.5) < 0
    for at, f in ((2, 2.0), (3, 2.0)):  # vellor: two body instances at weight 1; one title instance at 2
        norm = postings.row_norm[int(np.concatenate(rows)[at])]
        assert np.concatenate(impacts)[at] == idf * ((f * (K1 + 1.0)) / (f + norm))


def test_the_table_lets_the_postings_caches_go(corpora):  # noqa: F811
    index = Index(corpora["internal_docs"].path)
    ids = np.array(sorted(index.documents), dtype=np.int64)
    questions = graph_scoring.questions_of(index, ids, 80, 1)
    # phrases FTS5 splits ('1%', 'a.b-c') read their tokens' positions, which the postings keep
    assert any(not graph_table.single_token(index.postings, p) for p in questions.vocabulary)
    graph_table.stored_order_table(index.postings, questions, (2.0, 2.0, 1.0))
    assert not index.postings._token_keys and not index.postings._terms and not index.postings._phrases


def test_the_scoring_forks_without_the_documents_loaded_nor_the_index_mapped(corpora, monkeypatch):  # noqa: F811
    """Neither the documents' strings nor the index file's mapped pages are in the parent's memory
    when the scoring workers fork; the map is set back after."""
    index = Index(corpora["encyclopedia"].path)
    mapped = index.db.raw.execute("PRAGMA mmap_size").fetchone()[0]
    seen = []
    run = graph_scoring._run

    def spy(func, shares, workers):
        if func is graph_scoring._score_share:
            seen.append(("documents" in vars(index), index.db.raw.execute("PRAGMA mmap_size").fetchone()[0]))
        return run(func, shares, workers)

    monkeypatch.setattr(graph_scoring, "_run", spy)
    graph = build_graph(index, progress=False, workers=2)
    assert seen == [(False, 0)] and mapped > 0
    assert index.db.raw.execute("PRAGMA mmap_size").fetchone()[0] == mapped
    assert graph.ids.tolist() == sorted(index.documents)


def test_questions_sharing_their_rarest_phrase_are_scored_together():
    """Phrase rows: p0 1 (only its own passage), p1 2, p2 5, p3 2, p4 3. Questions: 0 {p2, p1},
    1 {p4}, 2 {p0, p3}, 3 {p1, p4}, 4 {} (none), 5 {p3, p2}, 6 {p0}. Keys (fewest rows >= 2,
    then lower id): 0 -> p1, 1 -> p4, 2 -> p3, 3 -> p1, 5 -> p3; 4 and 6 have none: last."""
    from workbench.feedback.graph_order import locality_order

    table_offsets = np.cumsum([0, 1, 2, 5, 2, 3])
    questions = [[2, 1], [4], [0, 3], [1, 4], [], [3, 2], [0]]
    offsets = np.cumsum([0] + [len(q) for q in questions])
    phrases = np.array([p for q in questions for p in q], dtype=np.int32)
    assert locality_order(table_offsets, offsets, phrases).tolist() == [0, 3, 2, 5, 1, 4, 6]


def test_the_kernel_in_another_order_puts_each_list_in_its_row(corpora):  # noqa: F811
    lib = graph_kernel.load()
    if lib is None:
        pytest.skip("no compiled kernel (SAG2WB_GRAPH_KERNEL=numpy or no C compiler)")
    index = corpora["encyclopedia"]
    ids = np.array(sorted(index.documents), dtype=np.int64)
    questions = graph_scoring.questions_of(index, ids, 80, 1)
    table = graph_table.stored_order_table(index.postings, questions, (2.0, 2.0, 1.0))
    n_rows = len(index.postings.row_norm)
    levels = [graph_scoring.Level(0.0, table.offsets, None, None)]
    graph_kernel.phrase_bounds(table, levels[0])
    signatures = graph_kernel.row_signatures(lib, table, n_rows)
    constants = (graph_scoring.MARGIN, graph_scoring.EXTRA, 0.8, 0.9, graph_scoring.SEED_POSITIONS, 0.9)
    skip = np.zeros(len(ids), dtype=np.uint8)
    args = (lib, table, signatures, levels, questions, skip, 8)
    plain = graph_kernel.score_share(*args, 0, len(ids), constants)
    order = np.random.default_rng(5).permutation(len(ids)).astype(np.int64)
    mixed = graph_kernel.score_share(*args, 3, len(ids), constants, order=order)  # order[3:] only
    assert np.array_equal(mixed[0], plain[0][order[3:]]) and mixed[1].tobytes() == plain[1][order[3:]].tobytes()
    assert (plain[0][:, 0] >= 0).sum() > 100  # real lists


@pytest.mark.parametrize("corpus", ["encyclopedia", "internal_docs"])
def test_the_table_by_two_processes_equals_the_one_process_table(corpora, corpus, monkeypatch):  # noqa: F811
    """Two forked processes, each a run of the one-token phrases at a time written to a file and
    read back in term order: the same table, bit for bit, and the same renumbered questions; the
    files are gone after."""
    # two fresh indexes: which phrases count as one token depends on what the postings have split
    # before (their memory of FTS5's tokens), and with it the phrases' order in the table
    first, second = Index(corpora[corpus].path), Index(corpora[corpus].path)
    ids = np.array(sorted(first.documents), dtype=np.int64)
    one = graph_scoring.questions_of(first, ids, 80, 1)
    two = graph_scoring.questions_of(second, ids, 80, 1)
    folders = []
    made = graph_table.tempfile.TemporaryDirectory

    def spy(*args, **kwargs):
        folders.append(made(*args, **kwargs))
        return folders[-1]

    monkeypatch.setattr(graph_table.tempfile, "TemporaryDirectory", spy)
    serial = graph_table.stored_order_table(first.postings, one, (2.0, 2.0, 1.0))
    assert not folders  # one process: no files
    parallel = graph_table.stored_order_table(second.postings, two, (2.0, 2.0, 1.0), workers=2)
    assert len(folders) == 1 and not os.path.exists(folders[0].name)
    assert_equal_tables(parallel, serial)
    assert two.phrases.tolist() == one.phrases.tolist() and two.vocabulary == one.vocabulary
    assert len(serial.rows) > 1000 and serial.missing.sum() < len(serial.missing)


def test_the_questions_left_to_the_search_are_those_with_a_missing_phrase():
    """Questions 0 [p0 p1], 1 [], 2 [p2 p0 p3], 3 [p3], 4 [], 5 [p1]; p1 and p3 missing: 0, 2, 3
    and 5 go to Index.search (an empty question before a run changes nothing)."""
    offsets = np.array([0, 2, 2, 5, 6, 6, 7])
    phrases = np.array([0, 1, 2, 0, 3, 3, 1], dtype=np.int32)
    missing = np.array([False, True, False, True])
    assert graph_scoring.skipped_questions(offsets, phrases, missing).tolist() == [1, 0, 1, 1, 0, 1]
    assert graph_scoring.skipped_questions(offsets, phrases, np.zeros(4, dtype=bool)).tolist() == [0] * 6
    assert graph_scoring.skipped_questions(np.zeros(1, dtype=np.int64), phrases[:0], missing).tolist() == []
