"""Building at scale without losing anything: streamed corpora, refused --db targets, stale
build files, damaged index files, Ctrl-C during a build. Real files and real processes."""

import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from workbench.index.corpora import iter_corpus, load_corpus
from workbench.index.store import Index, IndexProblem, remove_stale_builds
from workbench.index.units import CorpusError

from .conftest import REPO, sag2wb, units_from
from .reliability_world import default_sigint

SAG2WB = [sys.executable, "-m", "workbench.cli"]


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_corpus(path, n: int) -> None:
    path.write_text(
        json.dumps([{"title": f"Passage {i}", "text": f"word{i % 97} shared text number {i} here"} for i in range(n)]),
        encoding="utf-8",
    )


def test_streamed_corpus_gives_the_same_units_and_errors(tmp_path):
    encyclopedia = REPO / "sample_corpora" / "encyclopedia" / "corpus.json"
    assert list(iter_corpus(encyclopedia)) == load_corpus(encyclopedia)
    docs = REPO / "sample_corpora" / "internal_docs"
    assert list(iter_corpus(docs)) == load_corpus(docs)
    cases = {
        "dup.json": '[{"title": "A", "text": "x"}, {"title": "A", "text": "y"}]',
        "cut.json": '[{"title": "A", "text": "x"}, {"title": "B", "te',
        "dict.json": '{"title": "A"}',
        "empty.json": "[]",
        "number.json": '[{"title": "A", "text": 3}]',
    }
    for name, text in cases.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        with pytest.raises(CorpusError) as whole:
            load_corpus(tmp_path / name)
        with pytest.raises(CorpusError) as streamed:
            list(iter_corpus(tmp_path / name))
        assert str(streamed.value) == str(whole.value), name


@pytest.mark.slow
def test_db_that_is_not_an_index_is_refused_and_kept(tmp_path):
    corpus = tmp_path / "corpus.json"
    write_corpus(corpus, 5)
    before = digest(corpus)
    done = sag2wb("index", "corpus.json", "--db", "corpus.json", cwd=tmp_path)
    assert done.returncode == 2 and digest(corpus) == before
    assert "--db corpus.json is an input of this command" in done.stderr
    assert "Traceback" not in done.stderr
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    done = sag2wb("demo", "--db", "notes.txt", cwd=tmp_path)
    assert done.returncode == 2 and notes.read_text() == "my notes\n"
    assert "--db notes.txt exists and is not a SAG2 workbench index" in done.stderr
    (tmp_path / "folder").mkdir()
    assert sag2wb("index", "corpus.json", "--db", "folder", cwd=tmp_path).returncode == 2
    # an index of ours is replaced
    assert sag2wb("index", "corpus.json", "--db", "ix.sqlite", cwd=tmp_path).returncode == 0
    write_corpus(corpus, 7)
    done = sag2wb("index", "corpus.json", "--db", "ix.sqlite", cwd=tmp_path)
    assert done.returncode == 0 and Index(tmp_path / "ix.sqlite").N == 7


def test_stale_build_files_of_dead_processes_are_removed(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    alive = subprocess.Popen(["sleep", "60"])
    try:
        stale = tmp_path / f".ix.sqlite.building-{dead.pid}"
        running = tmp_path / f".ix.sqlite.building-{alive.pid}"
        other = tmp_path / f".other.sqlite.building-{dead.pid}"
        for f in (stale, running, other):
            f.write_bytes(b"half a build")
        Index.build(units_from([("A", "alpha")]), tmp_path / "ix.sqlite")
        assert not stale.exists()  # its process is gone
        assert running.exists() and other.exists()  # a build still running; another index's
        assert remove_stale_builds(tmp_path / "other.sqlite") == [other]
    finally:
        alive.kill()
        alive.wait()


def _garble(path, keep: int = 4 * 4096) -> None:
    """Everything after the first `keep` bytes overwritten (the data pages, not the header)."""
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.seek(keep)
        f.write(bytes((i * 37 + 11) % 256 for i in range(size - keep)))


@pytest.mark.slow
def test_damaged_index_is_a_named_error(tmp_path):
    corpus = REPO / "sample_corpora" / "encyclopedia" / "corpus.json"
    ix = Index.build(corpus, tmp_path / "ix.sqlite")
    ix.close()
    _garble(tmp_path / "ix.sqlite")
    with pytest.raises(IndexProblem) as err:
        index = Index(tmp_path / "ix.sqlite")
        index.search('"film" OR "director"', 10)
        Index(tmp_path / "ix.sqlite", max_postings=0).search('"film" OR "director"', 10)
    assert str(tmp_path / "ix.sqlite") in str(err.value) and "rebuild" in str(err.value)
    done = sag2wb("search", "--db", "ix.sqlite", "Who directed the film?", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "ix.sqlite" in done.stderr and "Traceback" not in done.stderr
    # and a damaged index may be rebuilt in place: with --force, since its bytes are no longer what sag2wb wrote
    assert sag2wb("index", str(corpus), "--db", "ix.sqlite", "--force", cwd=tmp_path).returncode == 0


@pytest.mark.slow
def test_ctrl_c_during_a_build_keeps_the_old_index(tmp_path):
    corpus = tmp_path / "corpus.json"
    write_corpus(corpus, 3)
    assert sag2wb("index", "corpus.json", "--db", "ix.sqlite", cwd=tmp_path).returncode == 0
    old = digest(tmp_path / "ix.sqlite")
    # long enough that the interrupt below lands inside the build: 30,000 of these short passages built in
    # 0.9 s once the diversity df was summed in memory (2026-12-06), within the 1 s wait; 200,000 take ~5 s
    write_corpus(corpus, 200_000)
    proc = subprocess.Popen(
        [*SAG2WB, "index", "corpus.json", "--db", "ix.sqlite", "--workers", "2"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=default_sigint,
    )
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob(".ix.sqlite.building-*")) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    time.sleep(1.0)  # inside the build (the first chunk, or the pool)
    assert proc.poll() is None, "the build ended before it could be interrupted"
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole process group
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert digest(tmp_path / "ix.sqlite") == old and Index(tmp_path / "ix.sqlite").N == 3
    assert not list(tmp_path.glob(".ix.sqlite.building-*"))
