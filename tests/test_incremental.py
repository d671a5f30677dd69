"""An index updated in place answers exactly as a full rebuild of the same documents:
same BM25 scores, rankings, statistics and whole trajectories (unit ids compared through
the documents they stand for)."""

import json
import shutil
import sqlite3
import subprocess
import sys

import pytest

from workbench.engine import Run
from workbench.index.corpora import load_corpus, load_questions
from workbench.index.store import Index, query_expression
from workbench.judges.lexical import LexicalJudge
from workbench.params import Params

from .conftest import REPO, sag2wb

DOCS = REPO / "sample_corpora" / "internal_docs"
ENCYCLOPEDIA = REPO / "sample_corpora" / "encyclopedia"


def identity(index: Index) -> dict[int, tuple]:
    """unit id -> what the unit is (its document, place and text)."""
    return {r[-1]: r[:-1] for r in index.db.execute("SELECT document, source, location, heading, body, id FROM units")}


def statistics(path) -> dict:
    db = sqlite3.connect(path)
    out = {
        t: sorted(db.execute(f"SELECT * FROM {t}").fetchall())
        for t in ("terms", "title_phrases", "aliases", "diversity_df")
    }
    out["meta"] = {
        k: v for k, v in db.execute("SELECT key, value FROM meta") if k in ("units", "documents", "fingerprint")
    }
    db.close()
    return out


UNIT_FIELDS = {"unit_id", "seed", "ranking", "final_ranking"}  # trace fields that hold unit ids


def canonical_trace(trace, index) -> str:
    """The trace's JSON with every unit id replaced by the unit it stands for."""
    ids = identity(index)

    def swap(value, key=None):
        if isinstance(value, dict):
            return {k: swap(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [swap(v, key) for v in value]
        if key in UNIT_FIELDS and isinstance(value, int) and not isinstance(value, bool):
            return list(ids[value])
        return value

    d = json.loads(trace.to_json(stats=False))
    d["units"] = sorted((list(ids[int(k)]), v) for k, v in d["units"].items())
    return json.dumps(swap(d), sort_keys=True, ensure_ascii=False)


def assert_same_answers(updated: Index, rebuilt: Index, questions, expressions) -> None:
    a, b = identity(updated), identity(rebuilt)
    assert sorted(a.values()) == sorted(b.values())
    assert updated.N == rebuilt.N and updated.D == rebuilt.D
    # relative order of ids (what breaks ties) is the same
    assert [a[u] for u in sorted(a)] == [b[u] for u in sorted(b)]
    for expression in expressions:
        got = {a[u]: s for u, s in updated.bm25_all(expression).items()}
        want = {b[u]: s for u, s in rebuilt.bm25_all(expression).items()}
        assert got == want, expression
        assert [a[u] for u, _ in updated.search(expression, 10)] == [b[u] for u, _ in rebuilt.search(expression, 10)]
        fts = Index(updated.path, max_postings=0)
        assert {a[u]: s for u, s in fts.bm25_all(expression).items()} == want, expression  # FTS5's own statistics too
    assert statistics(updated.path) == statistics(rebuilt.path)
    for q in questions:
        x = Run(updated, q, Params(), LexicalJudge(updated)).run()
        y = Run(rebuilt, q, Params(), LexicalJudge(rebuilt)).run()
        assert canonical_trace(x, updated) == canonical_trace(y, rebuilt), q.id


@pytest.mark.slow
def test_folder_update_with_an_added_a_changed_and_a_removed_file(tmp_path):
    folder = tmp_path / "docs"
    shutil.copytree(DOCS, folder)
    assert sag2wb("index", "docs", "--db", "ix.sqlite", cwd=tmp_path).returncode == 0
    files = sorted(p for p in folder.rglob("*.md"))
    removed, changed = files[0], files[len(files) // 2]
    removed.unlink()
    changed.write_text(
        changed.read_text(encoding="utf-8") + "\n\nA new paragraph about role_id and billing retries.\n",
        encoding="utf-8",
    )
    (folder / "api" / "added-notes.md").write_text(
        "# Added notes\n\nThe gateway reads role_id from the session.\n", encoding="utf-8"
    )
    done = sag2wb("index", "docs", "--db", "ix.sqlite", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "1 added, 1 changed, 1 removed" in done.stdout
    assert sag2wb("index", "docs", "--db", "full.sqlite", cwd=tmp_path).returncode == 0
    updated, rebuilt = Index(tmp_path / "ix.sqlite"), Index(tmp_path / "full.sqlite")
    questions = load_questions(REPO / "sample_corpora" / "internal_docs.questions.jsonl")
    expressions = [
        query_expression(t)
        for t in (["role_id"], ["billing", "retries"], ["gateway", "session"], ["paragraph"], ["权限"])
    ]
    assert_same_answers(updated, rebuilt, questions, expressions)
    # nothing changed: nothing tokenized
    done = sag2wb("index", "docs", "--db", "ix.sqlite", cwd=tmp_path)
    assert "0 added, 0 changed, 0 removed document(s); 0 units tokenized" in done.stdout


@pytest.mark.slow
def test_passages_added_replaced_and_removed_by_title(tmp_path):
    items = json.loads((ENCYCLOPEDIA / "corpus.json").read_text(encoding="utf-8"))
    (tmp_path / "corpus.json").write_text(json.dumps(items[:-2]), encoding="utf-8")
    assert sag2wb("index", "corpus.json", "--db", "ix.sqlite", cwd=tmp_path).returncode == 0
    replaced = {"title": items[3]["title"], "text": items[3]["text"] + " It was later renamed."}
    extra = [items[-2], replaced, items[-1]]
    (tmp_path / "extra.json").write_text(json.dumps(extra), encoding="utf-8")
    gone = items[10]["title"]
    done = sag2wb("index", "corpus.json", "--db", "ix.sqlite", "--add", "extra.json", "--remove", gone, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "2 added, 1 changed, 1 removed" in done.stdout
    # the same passages built at once: the index's order, replaced in place, new ones last
    base = load_corpus(tmp_path / "corpus.json")
    added = load_corpus(tmp_path / "extra.json")
    by_title = {u.title: u for u in added}
    units = [by_title.get(u.title, u) for u in base if u.title != gone] + [added[0], added[2]]
    rebuilt = Index.build(units, tmp_path / "full.sqlite")
    updated = Index(tmp_path / "ix.sqlite")
    questions = load_questions(ENCYCLOPEDIA / "questions.jsonl")
    expressions = [query_expression(t) for t in (["renamed"], ["film", "director"], ["born"], [items[-1]["title"]])]
    assert_same_answers(updated, rebuilt, questions[:12], expressions)
    bad = sag2wb("index", "corpus.json", "--db", "ix.sqlite", "--remove", "No Such Title", cwd=tmp_path)
    assert bad.returncode == 2 and "No Such Title" in bad.stderr


@pytest.mark.slow
def test_killed_update_leaves_the_old_index(tmp_path):
    import hashlib
    import os
    import signal
    import time

    (tmp_path / "corpus.json").write_text(json.dumps([{"title": "A", "text": "alpha words"}]), encoding="utf-8")
    assert sag2wb("index", "corpus.json", "--db", "ix.sqlite", cwd=tmp_path).returncode == 0
    before = hashlib.sha256((tmp_path / "ix.sqlite").read_bytes()).hexdigest()
    (tmp_path / "extra.json").write_text(
        json.dumps([{"title": f"P{i}", "text": f"word{i} text {i}"} for i in range(20_000)]), encoding="utf-8"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "workbench.cli", "index", "corpus.json", "--db", "ix.sqlite", "--add", "extra.json"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    journal = tmp_path / "ix.sqlite-journal"
    deadline = time.monotonic() + 240
    while not journal.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "the update ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)  # mid-transaction
    proc.wait()
    index = Index(tmp_path / "ix.sqlite")  # rolls the journal back
    assert index.N == 1  # (a journal left without a valid header is not hot: nothing to roll back)
    assert hashlib.sha256((tmp_path / "ix.sqlite").read_bytes()).hexdigest() == before
    assert index.search(query_expression(["alpha"]), 5)[0][0] == 1
