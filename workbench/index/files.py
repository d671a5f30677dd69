"""The index file on disk: never build over what is not ours; clear the builds a killed process
left. The folder an index was built from: one walk that lists its files with their stat."""

from __future__ import annotations

import errno
import gc
import hashlib
import marshal
import os
import re
import sqlite3
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from workbench.index.schema import IndexProblem
from workbench.index.units import DOCUMENT_SUFFIXES


def check_replaceable(path: Path) -> None:
    """Refuse to build over anything but a workbench index (a corpus, notes, a folder).

    >>> _ = Path("notes.txt").write_text("my notes")
    >>> check_replaceable(Path("notes.txt"))
    Traceback (most recent call last):
    ...
    workbench.index.schema.IndexProblem: notes.txt: exists and is not a SAG2 workbench index; refusing to replace it ...
    >>> check_replaceable(Path("new.sqlite"))   # nothing there yet: fine
    """
    if not path.exists():
        return
    if path.is_dir():
        raise IndexProblem(f"{path}: is a folder; pass a file name for the index to --db")
    with open(path, "rb") as f:
        head = f.read(16)
    ours = False
    if head == b"SQLite format 3\x00":
        try:
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                row = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
                ours = bool(row) and str(row[0]).startswith("sag2wb-index")
            finally:
                db.close()
        except sqlite3.DatabaseError:
            ours = False
    if not ours:
        raise IndexProblem(
            f"{path}: exists and is not a SAG2 workbench index; refusing to replace it "
            "(choose another --db, or delete the file yourself)"
        )


def remove_stale_builds(path: Path) -> list[Path]:
    """Delete `.NAME.building-PID` files left by builds whose process is gone (killed).

    >>> _ = Path(".docs.sqlite.building-999999999").write_bytes(b"")   # no such process
    >>> remove_stale_builds(Path("docs.sqlite"))
    [PosixPath('.docs.sqlite.building-999999999')]
    """
    removed = []
    for tmp in path.parent.glob(f".{glob_escape(path.name)}.building-*"):
        pid = tmp.name.rsplit("-", 1)[-1]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        tmp.unlink(missing_ok=True)
        removed.append(tmp)
    return removed


def glob_escape(name: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", name)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# ---- the folder an index was built from: one walk, one stat per document ------------------------
Stat = tuple[int, int, int, int, int]  # size, mtime_ns, ctime_ns, inode, device: what an update compares


def stat_of(st: os.stat_result) -> Stat:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


@dataclass
class Walk:
    """A folder as an update sees it: its document files (relative path, stat) in index order,
    and the files of other kinds it skips (relative, sorted, hidden ones left out)."""

    documents: list[tuple[str, Stat]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


_NOT_THERE = {errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP}  # what Path.is_file reads as "no file"


def walk_folder(root: Path, ordered: bool = True) -> Walk:
    """The files `folder_files` and `skipped_files` list, in their order (`ordered=False`: in
    the order the folders list them, which costs no sorting; `index_order` sorts them later),
    found by one `os.scandir` walk: a regular file costs no system call to classify and one `stat`,
    taken relative to its open folder (a shorter path for the kernel to resolve than the whole
    one); a symbolic link is followed, as `Path.is_file` does; a linked folder is not entered, as
    `rglob` does not. A file or folder that vanishes during the walk is not there; an
    unreadable folder is passed over, as `rglob` passes over it.

    >>> Path("w/sub").mkdir(parents=True)
    >>> for name in ("b.md", "a-c.txt", "sub/a.MD", "x.pdf", ".md"):
    ...     _ = Path("w", name).write_text("text")
    >>> walk = walk_folder(Path("w"))
    >>> [rel for rel, _ in walk.documents], walk.skipped
    (['a-c.txt', 'b.md', 'sub/a.MD'], ['x.pdf'])
    """
    documents: list[tuple[str, Stat]] = []
    skipped: list[str] = []
    with _collector_paused():
        _walk(root, documents.extend, skipped)
    return Walk(index_order(documents) if ordered else documents, sorted(skipped))


@dataclass
class Listing:
    """A walk's documents in the walk's order (`walk_folder(root, ordered=False).documents`) kept
    as the bytes `listing_digest` hashes, one folder's at a time: a no-change update hashes them
    and needs no object per file (0.15 s of CPU and 200 MiB less at 600k files)."""

    count: int
    chunks: list[bytes]  # each folder's documents, marshal.dumps(list, 2) without its 5-byte head
    skipped: list[str]

    def marshalled(self) -> list[bytes]:
        # a list's marshal (version 2, no references) is its head, then each item's bytes
        return [b"[" + self.count.to_bytes(4, "little"), *self.chunks]

    def digest(self, started_ns: int) -> str:
        """`listing_digest(self.documents(), started_ns)`, from the bytes."""
        return _digest(started_ns, self.marshalled())

    def documents(self) -> list[tuple[str, Stat]]:
        return marshal.loads(b"".join(self.marshalled()))


def walk_listing(root: Path) -> Listing:
    """`walk_folder(root, ordered=False)` as a `Listing`."""
    chunks: list[bytes] = []
    skipped: list[str] = []
    count = 0

    def keep(documents: list) -> None:
        nonlocal count
        count += len(documents)
        chunks.append(marshal.dumps(documents, 2)[5:])

    with _collector_paused():
        _walk(root, keep, skipped)
    return Listing(count, chunks, sorted(skipped))


@contextmanager
def _collector_paused():
    """The cyclic garbage collector off while a walk appends two tuples per file, none of which can
    be garbage: at 600k files its passes over the growing list cost 0.3 s of a 2.3 s walk (CPU).
    Put back as it was found, also on an error."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _walk(root: Path, keep, skipped: list) -> None:
    """The walk of `walk_folder`: each folder's documents handed to `keep` (a list), other files onto `skipped`."""
    folders = [("", os.fspath(root))]
    by_fd = os.scandir in os.supports_fd
    while folders:
        prefix, directory = folders.pop()
        hidden = prefix.startswith(".") or "/." in prefix
        try:
            fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY) if by_fd else None
            listing = os.scandir(directory if fd is None else fd)
        except PermissionError:
            continue  # an unreadable folder, passed over as rglob does
        except (FileNotFoundError, NotADirectoryError):
            if not prefix:
                raise
            continue  # removed while we walked
        documents: list[tuple[str, Stat]] = []
        try:
            with listing:
                _list_folder(listing, prefix, directory, hidden, folders, documents, skipped)
        finally:
            if fd is not None:
                os.close(fd)
        keep(documents)


def _list_folder(listing, prefix: str, directory: str, hidden: bool, folders: list, documents: list, skipped: list):
    """One folder's entries: subfolders onto `folders`, documents with their stat onto
    `documents`, other files onto `skipped` (the walk's inner loop, once per file)."""
    for entry in listing:
        name = entry.name
        try:
            if entry.is_dir(follow_symlinks=False):
                folders.append((f"{prefix}{name}/", os.path.join(directory, name)))
                continue
            if not entry.is_file():
                continue
            i = name.rfind(".")  # the suffix as PurePath.suffix reads it: ".md" alone has none
            if i > 0 and name[i:].lower() in _SUFFIXES:
                st = entry.stat()
                documents.append((prefix + name, (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)))
            elif not hidden and name[0] != ".":
                skipped.append(prefix + name)
        except OSError as exc:  # vanished between the listing and its stat, a link loop: not a file
            if exc.errno not in _NOT_THERE:
                raise


_SUFFIXES = frozenset(DOCUMENT_SUFFIXES)  # lower case, each with its dot ("." alone is none of them)


def index_order(documents: list[tuple[str, Stat]]) -> list[tuple[str, Stat]]:
    """Documents of an unordered walk in Path order, as sorted(rglob) gives it: part by part
    ("\\0" sorts a separator before any character)."""
    return sorted(documents, key=lambda d: d[0].replace("/", "\0"))


# A stat taken in the same timestamp tick as a later edit of the same length cannot tell the
# two apart (git calls such files "racy"): a file whose recorded mtime or ctime is not older
# than the recording walk's start, less the timestamps' granularity, is hashed at the next
# update, and is settled once an update that starts later than that has checked it. The
# granularity is read from the stamps themselves: a file whose mtime or ctime has no
# sub-second part lives where stamps are whole seconds (ext3, HFS+, FAT's 2-s mtimes, many
# network mounts): 2 s. Sub-second stamps come from the kernel's coarse clock, at most one
# scheduler tick (1-10 ms) behind the wall clock the walk's start is read from: 100 ms, ten
# ticks, also covers a small clock difference with a network file server.
WHOLE_SECOND_WINDOW_NS = 2_000_000_000
FINE_WINDOW_NS = 100_000_000


def racy_window_ns(mtime_ns: int, ctime_ns: int) -> int:
    whole = mtime_ns % 1_000_000_000 == 0 or ctime_ns % 1_000_000_000 == 0
    return WHOLE_SECOND_WINDOW_NS if whole else FINE_WINDOW_NS


def unchanged_by_stat(recorded: tuple, now: Stat, checked_at_ns: int | None) -> bool:
    """True when a file can be taken as unchanged without reading it: its size, mtime, ctime,
    inode and device are what a walk that started at `checked_at_ns` recorded, and it was not
    racy then. An edit keeps none of it: `touch -r` restores the mtime but moves the ctime,
    `cp -p` and `rsync -a` keep the mtime but bring a new ctime (and `rsync` a new inode).
    A record without ctime (an index of an older workbench) or without a walk start never is.

    >>> old = (5, 10**18 + 1, 10**18 + 1, 7, 1)
    >>> unchanged_by_stat(old, old, 10**18 + 10**9), unchanged_by_stat(old, old, 10**18 + 10**6)
    (True, False)
    >>> unchanged_by_stat(old, (5, 10**18 + 1, 10**18 + 2, 7, 1), 10**18 + 10**9)   # touch -r: ctime moved
    False
    """
    if checked_at_ns is None or recorded[2] is None or tuple(recorded) != now:
        return False
    mtime, ctime = recorded[1], recorded[2]
    return max(mtime, ctime) < checked_at_ns - racy_window_ns(mtime, ctime)


def settled(documents: list[tuple[str, Stat]], started_ns: int) -> bool:
    """True when no file of a walk that began at `started_ns` is racy: each one's mtime and
    ctime are older than the start, less their granularity (the newest stamp is checked
    first, so a settled folder costs one pass)."""
    newest = max((max(st[1], st[2]) for _, st in documents), default=0)
    if newest < started_ns - WHOLE_SECOND_WINDOW_NS:
        return True
    return all(max(st[1], st[2]) < started_ns - racy_window_ns(st[1], st[2]) for _, st in documents)


def listing_digest(documents: list[tuple[str, Stat]], started_ns: int) -> str:
    """One hash of a walk's documents and their stats, in the order the walk found them, and
    of when that walk began. A later walk of the folder has the same digest exactly when every
    document is still there with the stat recorded (and the folders list them in the same
    order, as they do while unchanged): then, if the recorded walk found every file settled,
    no file changed since, as `unchanged_by_stat` would decide file by file. marshal's version
    2 writes no references between objects, so equal lists give equal bytes."""
    return _digest(started_ns, [marshal.dumps(documents, 2)])


def _digest(started_ns: int, marshalled: list[bytes]) -> str:
    """sha256 of when the walk began, then of a documents list's marshal bytes (in pieces)."""
    h = hashlib.sha256(str(started_ns).encode())
    for part in marshalled:
        h.update(part)
    return h.hexdigest()
