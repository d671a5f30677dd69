"""A no-change folder update decides from one digest of the walk's listing (issue 33): equal
exactly when every document is there with the stat recorded; recorded only when every file
was settled; recorded once for an index that has none; and an edit still found."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import time
from pathlib import Path

from workbench.index.files import listing_digest, settled, walk_folder
from workbench.index.store import Index
from workbench.index.update import LISTING, update_folder

from .test_incremental import DOCS
from .test_update_stat import settle

A = ("a.md", (5, 10**18, 10**18 + 7, 3, 2049))
B = ("b/c.md", (6, 10**18 + 1, 10**18 + 9, 8, 2049))


def test_the_listing_digest_is_equal_exactly_for_the_same_files_and_stats_in_the_same_order():
    digest = listing_digest([A, B], 123)
    # the same values built anew (no object shared with the first list) give the same digest
    parts = (["a.", "md"], A[1]), (["b/", "c.md"], B[1])
    again = [("".join(rel), tuple(int(str(v)) for v in st)) for rel, st in parts]
    assert listing_digest(again, 123) == digest
    ctime_moved = ("b/c.md", (6, 10**18 + 1, 10**18 + 10, 8, 2049))
    new_inode = ("b/c.md", (6, 10**18 + 1, 10**18 + 9, 9, 2049))
    for other in ([A, ctime_moved], [A, new_inode], [A], [A, B, ("d.md", A[1])], [B, A]):
        assert listing_digest(other, 123) != digest
    assert listing_digest([A, B], 124) != digest  # another walk's start


def test_settled_means_every_stamp_older_than_the_start_less_its_granularity():
    start = 10**18 + 10**9 + 5
    fine = ("f.md", (1, start - 100_000_001, start - 100_000_001, 1, 1))  # 100 ms and 1 ns before: settled
    assert settled([fine], start)
    assert not settled([fine, ("g.md", (1, start - 200_000_000, start - 50_000_000, 2, 1))], start)  # ctime 50 ms
    whole = ("w.md", (1, 10**18, 10**18, 3, 1))  # whole seconds: a 2 s window, and it is 1 s before
    assert not settled([fine, whole], start)
    assert settled([fine, whole], 10**18 + 2 * 10**9 + 1)
    assert settled([], start)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def listing(db: Path):
    con = sqlite3.connect(db)
    try:
        row = con.execute("SELECT value FROM meta WHERE key = ?", (LISTING,)).fetchone()
    finally:
        con.close()
    return row[0] if row else None


def test_a_settled_build_records_the_listing_and_an_index_without_one_records_it_once(tmp_path):
    folder = Path(shutil.copytree(DOCS, tmp_path / "docs"))
    settle(folder)
    db = tmp_path / "ix.sqlite"
    Index.build(folder, db).close()
    recorded = listing(db)
    assert recorded is not None
    before = sha(db)
    changes = update_folder(db, folder)
    assert (changes.changed, changes.hashed, changes.checked) == ([], 0, len(walk_folder(folder).documents))
    assert sha(db) == before
    # an index of the workbench before the listing: compared file by file, the listing recorded
    con = sqlite3.connect(db)
    con.execute("DELETE FROM meta WHERE key = ?", (LISTING,))
    con.commit()
    con.close()
    changes = update_folder(db, folder)
    assert (changes.changed, changes.hashed) == ([], 0)
    assert listing(db) == recorded
    before = sha(db)
    update_folder(db, folder)
    assert sha(db) == before


def test_a_racy_file_leaves_no_listing_and_an_edit_after_a_listing_is_found(tmp_path):
    folder = Path(shutil.copytree(DOCS, tmp_path / "docs"))
    target = folder / "auth" / "sso.md"
    future = time.time_ns() + 10 * 10**9  # stamped after the build's start: racy
    os.utime(target, ns=(future, future))
    db = tmp_path / "ix.sqlite"
    Index.build(folder, db).close()
    assert listing(db) is None
    os.utime(target, ns=(future - 3600 * 10**9, future - 3600 * 10**9))
    settle(folder)
    update_folder(db, folder)  # the racy file hashed once; its new stat recorded, and the listing
    assert listing(db) is not None
    # a same-size edit with the mtime put back: the ctime moved, so the listing differs
    st = target.stat()
    text = target.read_text(encoding="utf-8")
    target.write_text(text.replace("a", "b", 1) if "a" in text else text.upper(), encoding="utf-8")
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert target.stat().st_size == st.st_size
    changes = update_folder(db, folder)
    assert changes.changed == ["auth/sso.md"]
