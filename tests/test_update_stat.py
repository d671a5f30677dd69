"""A folder update decides by stat, as git does (issue 33): a no-change update reads no file
and leaves the index file as it was; every edit is still found — one that keeps size and
mtime (`touch -r` back), `cp -p`, `rsync -a`, a replaced inode, a hard link or a symbolic link
put in a file's place, a racy edit in the same timestamp tick as the update's stat (on a
real whole-second file system), a removed and an added file — and the updated index equals a
rebuild. An index of the older workbench (no ctime or inode recorded) is hashed once, then
recorded; a clock that went back makes every file hashed once. Real `sag2wb index`
processes; which files a process opens is counted by an audit hook installed before it runs."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from workbench.index.corpora import load_questions
from workbench.index.files import racy_window_ns, walk_folder
from workbench.index.store import Index, query_expression

from .reliability_world import one_line_error, sag2wb
from .test_incremental import DOCS, assert_same_answers
from .test_reliability_index2 import same_length_edit

# every test builds and updates a real folder index in its own folder (the stat rule needs fresh inodes)
pytestmark = pytest.mark.slow

EXPRESSIONS = [query_expression(t) for t in (["role_id"], ["gateway", "session"], ["sso"], ["权限"])]
QUESTIONS = load_questions(DOCS.parent / "internal_docs.questions.jsonl")[:4]


def settle(folder: Path) -> None:
    """Wait until no file of `folder` is racy for a walk starting now (its newest stamp is older
    than the racy window), so what an update then hashes is only what changed."""
    newest = 0
    for _, st in walk_folder(folder).documents:
        newest = max(newest, max(st[1], st[2]) + racy_window_ns(st[1], st[2]))
    while time.time_ns() <= newest:
        time.sleep(0.01)


def counting_opens(folder: Path, report: Path) -> str:
    """A prelude for `sag2wb`: every file under `folder` the process opens is listed in `report`
    (a folder the walk opens to list it is not)."""
    return f"""
import atexit, json, os, sys
_folder, _opened = {str(folder) + "/"!r}, []
def _hook(event, args):
    if event == "open" and args and isinstance(args[0], (str, os.PathLike)):
        path = os.fspath(args[0])
        if path.startswith(_folder) and not os.path.isdir(path):
            _opened.append(path[len(_folder):])
sys.addaudithook(_hook)
atexit.register(lambda: open({str(report)!r}, "w").write(json.dumps(sorted(set(_opened)))))
"""


def update(folder: Path, db: Path, tmp_path: Path, prelude: str = ""):
    """`sag2wb index FOLDER --db DB` as a process; (result, the folder's files it opened)."""
    report = tmp_path / "opened.json"
    report.unlink(missing_ok=True)
    done = sag2wb("index", folder, "--db", db, python_prelude=counting_opens(folder, report) + prelude)
    return done, json.loads(report.read_text()) if report.exists() else None


@pytest.fixture
def built(tmp_path):
    """A copy of the sample docs, settled, and its index built by a `sag2wb index` process."""
    folder = tmp_path / "docs"
    shutil.copytree(DOCS, folder)
    settle(folder)
    db = tmp_path / "ix.sqlite"
    assert sag2wb("index", folder, "--db", db, process=True).returncode == 0
    return folder, db


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_no_change_update_reads_no_file_and_leaves_the_index_as_it_was(built, tmp_path):
    folder, db = built
    before, stat = digest(db), db.stat()
    done, opened = update(folder, db, tmp_path)
    assert done.returncode == 0, done.stderr
    n = len(walk_folder(folder).documents)
    assert f"0 added, 0 changed, 0 removed document(s); 0 units tokenized; {n} files stat-checked, 0 hashed" in (
        done.stdout
    )
    assert opened == []  # not one document opened
    assert digest(db) == before and db.stat().st_mtime_ns == stat.st_mtime_ns


# ---- each kind of edit, found; nothing else read --------------------------------------------
def swap_words(path: Path) -> None:
    path.write_text(same_length_edit(path.read_text(encoding="utf-8")), encoding="utf-8")


def edited_copy(path: Path, beside: Path) -> Path:
    """A copy of `path` with one word swapped (same size) and `path`'s mtime."""
    copy = beside / path.name
    copy.write_text(same_length_edit(path.read_text(encoding="utf-8")), encoding="utf-8")
    subprocess.run(["touch", "-r", str(path), str(copy)], check=True)
    return copy


def touch_r_back(folder, staging):
    target = folder / "auth" / "sso.md"
    ref = staging / "ref"
    shutil.copy2(target, ref)
    swap_words(target)
    subprocess.run(["touch", "-r", str(ref), str(target)], check=True)
    return {"changed": ["auth/sso.md"]}


def cp_p(folder, staging):
    target = folder / "billing" / "plans.md"
    subprocess.run(["cp", "-p", str(edited_copy(target, staging)), str(target)], check=True)
    return {"changed": ["billing/plans.md"]}


def rsync_a(folder, staging):
    # rsync's own quick check skips a copy of the same size and mtime, hence -I to send it
    target = folder / "ops" / "deploys.md"
    subprocess.run(["rsync", "-a", "-I", str(edited_copy(target, staging)), str(target)], check=True)
    return {"changed": ["ops/deploys.md"]}


def rsync_a_newer(folder, staging):
    target = folder / "api" / "gateway.md"
    copy = edited_copy(target, staging)
    os.utime(copy, ns=(time.time_ns(), time.time_ns()))
    subprocess.run(["rsync", "-a", str(copy), str(target)], check=True)
    return {"changed": ["api/gateway.md"]}


def replaced_inode(folder, staging):
    target = folder / "access" / "roles.md"
    os.replace(edited_copy(target, staging), target)  # a same-size, same-mtime file renamed over it
    return {"changed": ["access/roles.md"]}


def hard_link(folder, staging):
    target = folder / "auth" / "login.md"
    copy = edited_copy(target, staging)
    target.unlink()
    os.link(copy, target)  # a hard link to a same-size, same-mtime file in its place
    return {"changed": ["auth/login.md"]}


def symlink_in_place(folder, staging):
    # a symbolic link is followed (today's rule): its target's stat is what is compared
    target = folder / "design" / "style_guide.md"
    copy = edited_copy(target, staging)
    target.unlink()
    target.symlink_to(copy)
    return {"changed": ["design/style_guide.md"]}


def removed_and_added(folder, staging):
    (folder / "CHANGELOG.md").unlink()
    (folder / "zz").mkdir()
    (folder / "zz" / "added.md").write_text("# Added\n\nThe gateway reads role_id from the session.\n")
    return {"added": ["zz/added.md"], "removed": ["CHANGELOG.md"], "read": ["zz/added.md"]}


EDITS = [touch_r_back, cp_p, rsync_a, rsync_a_newer, replaced_inode, hard_link, symlink_in_place, removed_and_added]


@pytest.mark.parametrize("edit", EDITS, ids=[e.__name__ for e in EDITS])
def test_each_edit_is_found_and_only_it_is_read(built, tmp_path, edit):
    if edit in (rsync_a, rsync_a_newer) and shutil.which("rsync") is None:
        reason = "rsync is not installed (apt-get install -y rsync)"
        if os.environ.get("SAG2WB_REQUIRE_RSYNC") == "1":  # .ci/run installs it: missing there is a failure
            pytest.fail(reason + " (SAG2WB_REQUIRE_RSYNC=1)")
        pytest.skip(reason)
    folder, db = built
    staging = tmp_path / "staging"
    staging.mkdir()
    want = edit(folder, staging)
    done, opened = update(folder, db, tmp_path)
    assert done.returncode == 0, done.stderr
    said = {k: sorted(listed(done.stdout, k)) for k in ("added", "changed", "removed")}
    assert said == {k: sorted(want.get(k, [])) for k in ("added", "changed", "removed")}, done.stdout
    assert opened == sorted(want.get("read", want.get("changed", []))), done.stdout
    rebuilt = Index.build(folder, tmp_path / "full.sqlite")
    assert_same_answers(Index(db), rebuilt, QUESTIONS, EXPRESSIONS)


def listed(stdout: str, label: str) -> list[str]:
    for line in stdout.splitlines():
        if line.strip().startswith(f"{label}: "):
            return line.split(": ", 1)[1].split(", ")
    return []


# ---- a racy edit: same size, same second, same inode as the stat the update recorded -------
@pytest.fixture
def whole_second_fs(tmp_path):
    """A real ext4 file system whose stamps are whole seconds (128-byte inodes), loop-mounted."""
    if os.geteuid() != 0 or shutil.which("mkfs.ext4") is None:
        pytest.skip("needs root and mkfs.ext4 to mount a whole-second file system")
    image, mount = tmp_path / "fs.img", tmp_path / "mnt"
    mount.mkdir()
    with open(image, "wb") as f:
        f.truncate(16 << 20)
    made = subprocess.run(["mkfs.ext4", "-q", "-F", "-I", "128", str(image)], capture_output=True, text=True)
    mounted = made.returncode == 0 and subprocess.run(["mount", "-o", "loop", str(image), str(mount)]).returncode == 0
    if not mounted:
        pytest.skip(f"no loop mount here: {made.stderr.strip()}")
    yield mount
    if subprocess.run(["umount", str(mount)]).returncode:
        subprocess.run(["umount", "-l", str(mount)])


def test_a_racy_edit_in_the_second_of_the_update_is_found(whole_second_fs, tmp_path):
    folder = whole_second_fs / "docs"
    shutil.copytree(DOCS, folder)
    db = tmp_path / "ix.sqlite"
    assert sag2wb("index", folder, "--db", db, process=True).returncode == 0
    target = folder / "auth" / "sso.md"
    first = same_length_edit(target.read_text(encoding="utf-8"))
    second = first.replace(" our ", " out ", 1)
    assert len(second) == len(first) and second != first
    report = tmp_path / "same-second"
    # in the update's process: `first` written at the top of a second, just before the walk;
    # `second` written over it in place right after the update read `first`, in that same
    # second (an editor saving twice while sag2wb ran)
    racy = f"""
import time, workbench.index.update as _update
_walk, _read = _update.walk_listing, _update._read_document
def _walk_at_the_top_of_a_second(root, **how):
    time.sleep(1.02 - time.time() % 1)
    global _second
    _second = int(time.time())
    open({str(target)!r}, "w").write({first!r})
    return _walk(root, **how)
def _read_then_save_again(root, rel):
    read = _read(root, rel)
    if rel == "auth/sso.md":
        open({str(target)!r}, "w").write({second!r})
        open({str(report)!r}, "w").write(str(int(time.time()) == _second))
    return read
_update.walk_listing, _update._read_document = _walk_at_the_top_of_a_second, _read_then_save_again
"""
    done, _ = update(folder, db, tmp_path, racy)
    assert done.returncode == 0 and "1 changed" in done.stdout, done.stdout + done.stderr
    if report.read_text() != "True":
        pytest.skip("the update took more than a second here, so the edit was not racy")
    recorded = sqlite3.connect(db).execute(
        "SELECT size, mtime_ns, ctime_ns, inode, device FROM files WHERE path = 'auth/sso.md'"
    )
    assert recorded.fetchone() == dict(walk_folder(folder).documents)["auth/sso.md"]  # stat cannot tell
    done, opened = update(folder, db, tmp_path)
    assert done.returncode == 0 and "0 added, 1 changed" in done.stdout, done.stdout
    assert "auth/sso.md" in opened
    assert_same_answers(Index(db), Index.build(folder, tmp_path / "full.sqlite"), QUESTIONS, EXPRESSIONS)


# ---- records that cannot be trusted: hashed once, then recorded ------------------------------
def rewrite(db: Path, script: str) -> None:
    """Edit the index as another program would, then record it as ours again (as sag2wb wrote it)."""
    from workbench import safeio

    con = sqlite3.connect(db)
    con.executescript(script)
    con.close()
    safeio.record_output(db, "index --db")


OLDER_MANIFEST = """
CREATE TABLE old_files (path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
    sha256 TEXT NOT NULL) WITHOUT ROWID;
INSERT INTO old_files SELECT path, size, mtime_ns, sha256 FROM files;
DROP TABLE files;
ALTER TABLE old_files RENAME TO files;
DELETE FROM meta WHERE key = 'files_checked_at_ns';
"""
CLOCK_WENT_BACK = f"UPDATE meta SET value = '{time.time_ns() + 3600 * 10**9}' WHERE key = 'files_checked_at_ns';"


@pytest.mark.parametrize("record", [OLDER_MANIFEST, CLOCK_WENT_BACK], ids=["older-workbench", "clock-went-back"])
def test_an_untrusted_record_is_hashed_once_then_trusted(built, tmp_path, record):
    folder, db = built
    rewrite(db, record)
    n = len(walk_folder(folder).documents)
    done, opened = update(folder, db, tmp_path)
    assert f"0 added, 0 changed, 0 removed document(s); 0 units tokenized; {n} files stat-checked, {n} hashed" in (
        done.stdout
    ), done.stdout + done.stderr
    assert len(opened) == n
    done, opened = update(folder, db, tmp_path)
    assert f"{n} files stat-checked, 0 hashed" in done.stdout and opened == [], done.stdout


def test_a_file_removed_while_the_update_reads_the_folder_is_named(built, tmp_path):
    folder, db = built
    target = folder / "auth" / "sso.md"
    swap_words(target)
    before = digest(db)
    gone = f"""
import workbench.index.update as _update
_walk = _update.walk_listing
def _walk_then_remove(root, **how):
    walk = _walk(root, **how)
    os.unlink({str(target)!r})
    return walk
_update.walk_listing = _walk_then_remove
"""
    done, _ = update(folder, db, tmp_path, gone)
    assert done.returncode == 2
    one_line_error(done, "auth/sso.md", "removed while the folder was being read", "run the update again")
    assert digest(db) == before


# ---- the index's own provenance check: by stat too -------------------------------------------
COUNT_DB_HASHES = """
import workbench.safeio as _safeio
_sha = _safeio.file_sha256
def _counting(path):
    if str(path) == {db!r}:
        open({count!r}, "a").write("hashed\\n")
    return _sha(path)
_safeio.file_sha256 = _counting
"""


def hashes(count: Path) -> int:
    return count.read_text().count("hashed") if count.exists() else 0


def test_the_index_is_checked_as_ours_by_its_recorded_stat(built, tmp_path):
    folder, db = built
    count = tmp_path / "db-hashes"
    done, _ = update(folder, db, tmp_path, COUNT_DB_HASHES.format(db=str(db), count=str(count)))
    assert done.returncode == 0, done.stderr
    assert hashes(count) == 0  # neither checked nor recorded again by reading it
    # the same bytes under a new stat (rewritten in place, mtime put back): read, and still ours
    data, stat = db.read_bytes(), db.stat()
    db.write_bytes(data)
    os.utime(db, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    done, _ = update(folder, db, tmp_path, COUNT_DB_HASHES.format(db=str(db), count=str(count)))
    assert done.returncode == 0 and hashes(count) == 2, done.stderr  # checked, then recorded with its new stat
    done, _ = update(folder, db, tmp_path, COUNT_DB_HASHES.format(db=str(db), count=str(count)))
    assert done.returncode == 0 and hashes(count) == 2, done.stderr
    # changed in place by someone else, size and mtime kept: hashed, and refused
    con = sqlite3.connect(db)
    con.execute("UPDATE meta SET value = value WHERE key = 'units'")
    con.execute("INSERT INTO meta VALUES ('mine', 'x')")
    con.commit()
    con.close()
    assert db.stat().st_size == stat.st_size
    os.utime(db, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    done = sag2wb("index", folder, "--db", db, process=True)
    assert done.returncode == 2
    one_line_error(done, str(db), "changed after sag2wb wrote it")
