"""Reliability of the index layer, round 2 (issue 22 item 6, its messages; issue 24's own
folders): an edit that keeps size and mtime is found, an index is never emptied by
accident nor searched empty, a full disk is named as such with the old index intact, a
BEIR folder's missing corpus.jsonl and a questions file's JSON mistake are named, skipped
files are listed, and replay works from a cache on a read-only file system. Real files,
real processes (RLIMIT_FSIZE), a real read-only mount where the user is root."""

from __future__ import annotations

import gc
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from workbench.engine import Run
from workbench.index.corpora import load_corpus, load_questions
from workbench.index.store import Index, IndexProblem, query_expression
from workbench.index.units import CorpusError
from workbench.index.update import update_passages
from workbench.judges import FunctionJudge, jev
from workbench.judges.jev.server import JudgeServer

from .reliability_world import one_line_error, sag2wb
from .test_incremental import DOCS, ENCYCLOPEDIA, assert_same_answers
from .test_jev import PARAMS, QUESTION, scores_of
from .test_jev import corpus as towns

EXPRESSIONS = [query_expression(t) for t in (["role_id"], ["gateway", "session"], ["sso"], ["权限"])]


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def same_length_edit(text: str) -> str:
    """The text with one word swapped for another of the same byte length (size unchanged)."""
    for old, new in (("the", "our"), ("and", "but"), ("is", "as")):
        if f" {old} " in text:
            return text.replace(f" {old} ", f" {new} ", 1)
    raise AssertionError("no word to swap")


# ---- updates that see every edit ------------------------------------------------------------
@pytest.mark.slow
def test_edits_that_keep_size_and_mtime_are_found_and_equal_a_rebuild(tmp_path):
    folder = tmp_path / "docs"
    shutil.copytree(DOCS, folder)
    assert sag2wb("index", folder, "--db", tmp_path / "ix.sqlite").returncode == 0
    files = sorted(folder.rglob("*.md"))
    # 1: `cp -p` of an edited copy whose mtime was set to the original's
    a = files[3]
    edited = tmp_path / "edited.md"
    edited.write_text(same_length_edit(a.read_text(encoding="utf-8")), encoding="utf-8")
    subprocess.run(["touch", "-r", str(a), str(edited)], check=True)
    subprocess.run(["cp", "-p", str(edited), str(a)], check=True)
    # 2: edited in place, then `touch -r` back to a copy of its old stat
    b = files[len(files) // 2]
    ref = tmp_path / "ref"
    shutil.copy2(b, ref)
    b.write_text(same_length_edit(b.read_text(encoding="utf-8")), encoding="utf-8")
    subprocess.run(["touch", "-r", str(ref), str(b)], check=True)
    assert b.stat().st_size == ref.stat().st_size and b.stat().st_mtime_ns == ref.stat().st_mtime_ns
    done = sag2wb("index", folder, "--db", tmp_path / "ix.sqlite")
    assert done.returncode == 0, done.stderr
    assert "0 added, 2 changed, 0 removed" in done.stdout, done.stdout
    n = len(files)
    assert re.search(rf"{n} files stat-checked, ([2-9]|1\d) hashed", done.stdout)  # it says what it hashed
    for f in (a, b):
        assert f.relative_to(folder).as_posix() in done.stdout
    assert sag2wb("index", folder, "--db", tmp_path / "full.sqlite").returncode == 0
    questions = load_questions(DOCS.parent / "internal_docs.questions.jsonl")
    assert_same_answers(Index(tmp_path / "ix.sqlite"), Index(tmp_path / "full.sqlite"), questions, EXPRESSIONS)
    # nothing changed since: nothing tokenized, every file still hashed
    again = sag2wb("index", folder, "--db", tmp_path / "ix.sqlite")
    assert "0 added, 0 changed, 0 removed document(s); 0 units tokenized" in again.stdout
    assert f"{n} files stat-checked" in again.stdout  # hashed: only racy ones (tests/test_update_stat.py)


def test_a_touched_file_is_not_a_change(tmp_path):
    folder = tmp_path / "docs"
    shutil.copytree(DOCS, folder)
    assert sag2wb("index", folder, "--db", tmp_path / "ix.sqlite").returncode == 0
    os.utime(sorted(folder.rglob("*.md"))[0], ns=(1, 1))
    done = sag2wb("index", folder, "--db", tmp_path / "ix.sqlite")
    assert "0 added, 0 changed, 0 removed document(s); 0 units tokenized" in done.stdout


# ---- an index reduced to nothing -------------------------------------------------------------
def small_corpus(tmp_path, n=3):
    items = json.loads((ENCYCLOPEDIA / "corpus.json").read_text(encoding="utf-8"))[:n]
    (tmp_path / "corpus.json").write_text(json.dumps(items), encoding="utf-8")
    return [i["title"] for i in items]


def test_removing_every_passage_is_refused_and_an_empty_index_is_never_searched(tmp_path):
    titles = small_corpus(tmp_path)
    db = tmp_path / "ix.sqlite"
    assert sag2wb("index", tmp_path / "corpus.json", "--db", db).returncode == 0
    before = sha256(db)
    refused = sag2wb("index", tmp_path / "corpus.json", "--db", db, "--remove", *titles)
    assert refused.returncode != 0
    one_line_error(refused, str(db), "every passage", "--allow-empty", "nothing was changed")
    assert sha256(db) == before and Index(db).N == 3
    # forced: the update happens, and every entry point says the index has no passages
    forced = sag2wb("index", tmp_path / "corpus.json", "--db", db, "--remove", *titles, "--allow-empty")
    assert forced.returncode == 0, forced.stderr
    assert "now 0 units" in forced.stdout
    with pytest.raises(IndexProblem, match="has no passages"):
        Index(db)
    searched = sag2wb("search", "--db", db, "Where was the director born?")
    assert searched.returncode != 0
    one_line_error(searched, str(db), "has no passages")
    (tmp_path / "q.jsonl").write_text(
        json.dumps({"_id": "q1", "question": "Who?", "supporting_titles": [titles[0]]}) + "\n", encoding="utf-8"
    )
    evaluated = sag2wb("eval", "--db", db, "--questions", tmp_path / "q.jsonl", "--out", tmp_path / "out.json")
    assert evaluated.returncode != 0 and "has no passages" in evaluated.stderr
    assert not (tmp_path / "out.json").exists()
    # passages added back: the index answers as a build of them
    (tmp_path / "back.json").write_text(
        json.dumps(json.loads((tmp_path / "corpus.json").read_text(encoding="utf-8"))), encoding="utf-8"
    )
    back = sag2wb("index", tmp_path / "corpus.json", "--db", db, "--add", tmp_path / "back.json")
    assert back.returncode == 0, back.stderr
    rebuilt = Index.build(load_corpus(tmp_path / "back.json"), tmp_path / "rebuilt.sqlite")
    expression = query_expression(["film", "harbour"])
    updated = Index(db)
    docs_u, docs_r = updated.documents, rebuilt.documents
    assert {docs_u[u]: s for u, s in updated.bm25_all(expression).items()} == {
        docs_r[u]: s for u, s in rebuilt.bm25_all(expression).items()
    }


def test_an_update_that_adds_while_removing_everything_is_not_refused(tmp_path):
    titles = small_corpus(tmp_path, 2)
    db = tmp_path / "ix.sqlite"
    Index.build(tmp_path / "corpus.json", db).close()
    (tmp_path / "new.json").write_text(json.dumps([{"title": "Harrow Point", "text": "A ferry."}]), encoding="utf-8")
    changes = update_passages(db, tmp_path / "new.json", remove=titles)
    assert changes.removed == titles and Index(db).N == 1


# ---- a full disk -----------------------------------------------------------------------------
FSIZE = "import resource\nresource.setrlimit(resource.RLIMIT_FSIZE, ({0}, {0}))\n"


@pytest.mark.slow
def test_a_full_disk_during_index_is_named_and_the_old_index_is_intact(tmp_path):
    db = tmp_path / "x.db"
    assert sag2wb("index", ENCYCLOPEDIA / "corpus.json", "--db", db, process=True).returncode == 0
    before = sha256(db)
    full = sag2wb(
        "index", ENCYCLOPEDIA / "corpus.json", "--db", db, "--workers", "1", python_prelude=FSIZE.format(64 * 1024)
    )
    assert full.returncode != 0
    line = one_line_error(full, str(db), "disk full", "the old index", "intact")
    assert "damaged" not in line and "rebuild" not in line and ".building-" not in line
    assert sha256(db) == before
    assert not list(tmp_path.glob(".x.db.building-*"))
    index = Index(db)
    assert index.N == 169 and index.search(query_expression(["harbour"]), 3)
    # with no old index: says none was written, and leaves nothing behind
    new = tmp_path / "new.db"
    full = sag2wb("index", ENCYCLOPEDIA / "corpus.json", "--db", new, python_prelude=FSIZE.format(64 * 1024))
    one_line_error(full, str(new), "disk full", "no index was written")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".sag2wb-outputs.jsonl", "x.db"]  # x.db's record


@pytest.mark.slow
def test_a_full_disk_during_a_folder_update_rolls_back(tmp_path):
    folder = tmp_path / "docs"
    shutil.copytree(DOCS, folder)
    db = tmp_path / "ix.sqlite"
    assert sag2wb("index", folder, "--db", db).returncode == 0
    before = sha256(db)
    (folder / "new.md").write_text("# New\n\n" + "A long paragraph about role_id. " * 300 + "\n", encoding="utf-8")
    full = sag2wb("index", folder, "--db", db, python_prelude=FSIZE.format(4096))
    assert full.returncode != 0
    line = one_line_error(full, str(db), "disk full", "rolled back")
    assert "damaged" not in line
    assert sha256(db) == before and not (tmp_path / "ix.sqlite-journal").exists()
    assert Index(db).search(query_expression(["role_id"]), 3)


# ---- inputs named ----------------------------------------------------------------------------
def test_a_beir_folder_without_corpus_jsonl_names_it(tmp_path):
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "queries.jsonl").write_text('{"_id": "q1", "text": "Who?"}\n', encoding="utf-8")
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n", encoding="utf-8")
    done = sag2wb("index", beir, "--db", tmp_path / "x.db")
    assert done.returncode != 0
    line = one_line_error(done, "corpus.jsonl", "missing")
    assert "no .md or .txt" not in line
    with pytest.raises(CorpusError, match=re.escape("corpus.jsonl")):
        load_corpus(beir)


def test_a_trailing_comma_in_a_questions_file_is_named_with_line_and_column(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text(
        '{"_id": "q1", "question": "Who?", "supporting_titles": []}\n'
        '{"_id": "q2", "question": "Where?", "supporting_titles": ["A"],}\n',
        encoding="utf-8",
    )
    with pytest.raises(CorpusError) as err:
        load_questions(path)
    message = str(err.value)
    assert (
        f"{path}, line 2: not valid JSON at column 64:" in message
        and "trailing comma" in message
        and "remove the ','" in message
    )
    # a list spread over lines, single quotes: each its own words
    path.write_text('[\n{"_id": "q1", "question": "Who?"}\n]\n', encoding="utf-8")
    with pytest.raises(CorpusError, match=r"line 1: not valid JSON at column 2: a JSON list spread over lines"):
        load_questions(path)
    path.write_text("{'_id': 'q1', 'question': 'Who?'}\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="JSON needs double quotes"):
        load_questions(path)
    corpus = tmp_path / "corpus.json"
    corpus.write_text('[\n  {"title": "A", "text": "a"},\n]\n', encoding="utf-8")
    with pytest.raises(
        CorpusError, match=r"corpus.json, line 3: not valid JSON at column 1: a trailing comma before '\]'"
    ):
        load_corpus(corpus)


def test_skipped_files_are_counted_and_named(tmp_path):
    own = tmp_path / "own"
    own.mkdir()
    (own / "notes.md").write_text("# Notes\n\nThe gateway reads role_id.\n", encoding="utf-8")
    (own / "a.pdf").write_bytes(b"%PDF-1.4")
    (own / "b.docx").write_bytes(b"PK\x03\x04")
    (own / ".DS_Store").write_bytes(b"\x00")
    done = sag2wb("index", own, "--db", tmp_path / "x.db")
    assert done.returncode == 0, done.stderr
    assert "skipped 2 file(s)" in done.stdout and "a.pdf, b.docx" in done.stdout and ".DS_Store" not in done.stdout
    (own / "c.pdf").write_bytes(b"%PDF-1.4")
    done = sag2wb("index", own, "--db", tmp_path / "x.db")
    assert "3 skipped" in done.stdout and "a.pdf, b.docx, c.pdf" in done.stdout
    (own / "notes.md").unlink()
    done = sag2wb("index", own, "--db", tmp_path / "y.db")
    one_line_error(done, "no .md or .txt files found", "skipped 3 files", "a.pdf, b.docx, c.pdf")


# ---- replay from a read-only cache -----------------------------------------------------------
@pytest.fixture
def read_only(tmp_path):
    """make(dir) -> a read-only view of `dir` (a read-only bind mount as root, where chmod
    does not stop writes; chmod a-w otherwise); undone at the end."""
    undo = []

    def make(folder):
        if os.geteuid() != 0:
            for p in [folder, *folder.rglob("*")]:
                p.chmod(p.stat().st_mode & ~0o222)
            undo.append(lambda: [p.chmod(p.stat().st_mode | 0o200) for p in [folder, *folder.rglob("*")]])
            return folder
        view = tmp_path / "ro-view"
        view.mkdir()
        bind = subprocess.run(["mount", "--bind", str(folder), str(view)], capture_output=True, text=True)
        if bind.returncode != 0:
            pytest.skip(f"root, and no read-only mount possible here: {bind.stderr.strip()}")
        # (a lazy unmount if a descriptor is still open: the mount never outlives the test)
        undo.append(
            lambda: subprocess.run(["umount", str(view)]).returncode and subprocess.run(["umount", "-l", str(view)])
        )
        ro = subprocess.run(["mount", "-o", "remount,ro,bind", str(view)], capture_output=True, text=True)
        if ro.returncode != 0:
            pytest.skip(f"root, and no read-only remount possible here: {ro.stderr.strip()}")
        return view

    yield make
    # the recording judge's diskcache connections of finished threads keep cache.db's inode,
    # and SQLite defers closing our descriptors while they do: collect them before unmounting
    gc.collect()
    for u in reversed(undo):
        u()


RECORD = f"""
import sys
sys.path.insert(0, {str(DOCS.parent.parent)!r})
from tests.test_jev import PARAMS, QUESTION, corpus, scores_of
from workbench.engine import Run
from workbench.index.store import Index
from workbench.judges import FunctionJudge, jev
from workbench.judges.jev.server import JudgeServer
index = Index.build(corpus(), sys.argv[1] + "/towns.sqlite")
server = JudgeServer(FunctionJudge(scores_of, name="scores_of")).start()
judge = jev.make_jev_judge(endpoint=server.url, cache_dir=sys.argv[1] + "/cache", timeout=5, backoff_base=0.01)
print(list(Run(index, QUESTION, PARAMS, judge).run().final_ranking))
judge.close()
server.stop()
"""


@pytest.mark.slow
def test_cache_only_replays_from_a_read_only_file_system(read_only, tmp_path):
    # recorded in another process, as a study's cache is: no connection of ours is left open on it
    done = subprocess.run([sys.executable, "-c", RECORD, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    recorded = json.loads(done.stdout.strip().splitlines()[-1])
    index = Index(tmp_path / "towns.sqlite")
    view = read_only(tmp_path / "cache")
    listing = sorted(p.name for p in view.iterdir())
    with pytest.raises(OSError):
        (view / "probe").write_text("x")  # really read-only
    replay_judge = jev.make_jev_judge(endpoint="http://127.0.0.1:9/v1", cache_dir=view, cache_only=True)  # never asked
    replay = Run(index, QUESTION, PARAMS, replay_judge).run()
    assert list(replay.final_ranking) == recorded and replay.stats["http_requests"] == 0
    with pytest.raises(jev.JEVCacheMiss, match="cache-only"):
        replay_judge.judge("another question?", [{"unit_id": 0, "title": "Alder", "text": "A town."}], [])
    replay_judge.close()
    assert sorted(p.name for p in view.iterdir()) == listing  # nothing written, not even a lock file


def test_cache_only_never_writes_even_where_it_could(tmp_path):
    server = JudgeServer(FunctionJudge(scores_of, name="scores_of"), keep_bodies=10).start()
    try:
        judge = jev.make_jev_judge(endpoint=server.url, cache_dir=tmp_path / "cache", timeout=5, backoff_base=0.01)
        judge.judge("Q?", [{"unit_id": 0, "title": "Alder", "text": "A town."}], [])
        judge.close()
    finally:
        server.stop()
    stamp = {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in (tmp_path / "cache").iterdir()}
    replay = jev.make_jev_judge(endpoint=server.url, cache_dir=tmp_path / "cache", cache_only=True)
    replay.judge("Q?", [{"unit_id": 0, "title": "Alder", "text": "A town."}], [])
    replay.close()
    assert {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in (tmp_path / "cache").iterdir()} == stamp


@pytest.mark.slow
def test_cli_cache_only_from_a_read_only_cache(read_only, tmp_path):
    index = Index.build(towns(), tmp_path / "towns.sqlite")
    index.close()
    server = JudgeServer(FunctionJudge(scores_of, name="scores_of"), keep_bodies=10).start()
    args = ["search", "--db", tmp_path / "towns.sqlite", QUESTION, "--judge", "jev", "--jev-endpoint", server.url]
    try:
        recorded = sag2wb(*args, "--cache-dir", tmp_path / "cache", "--payload-style", "inline", process=True)
    finally:
        server.stop()
    assert recorded.returncode == 0, recorded.stderr
    view = read_only(tmp_path / "cache")
    replay = sag2wb(*args, "--cache-dir", view, "--payload-style", "inline", "--cache-only", process=True)
    assert replay.returncode == 0, replay.stderr
    assert "deleting" not in replay.stderr and "not a readable" not in replay.stderr
    ranked = [ln for ln in recorded.stdout.splitlines() if ln.lstrip()[:3].strip(". ").isdigit()]
    assert ranked and ranked == [ln for ln in replay.stdout.splitlines() if ln.lstrip()[:3].strip(". ").isdigit()]
