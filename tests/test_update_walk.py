"""The folder walk pauses the cyclic garbage collector while it lists (issue 33: 0.3 s of a 600k-file
walk): it finds what `rglob` and `os.stat` find, and leaves the collector as it found it, also when
the walk fails. A no-change update walks into bytes (`walk_listing`): the same documents, in the
same order, and the same digest as the walk's objects give."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import pytest

from workbench.index.files import listing_digest, stat_of, walk_folder, walk_listing


def straightforward(root: Path) -> list[tuple[str, tuple]]:
    """The documents as rglob and os.stat give them, in Path order."""
    return [
        (p.relative_to(root).as_posix(), stat_of(p.stat()))
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.suffix.lower() in (".md", ".txt")
    ]


@pytest.mark.parametrize("enabled", [True, False])
def test_the_walk_finds_what_rglob_finds_and_leaves_the_collector_as_it_was(tmp_path, enabled):
    for rel in ("b.md", "a/x.txt", "a/y.MD", "a/b/z.md", "notes.pdf", "c/.hidden.md"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(rel, encoding="utf-8")
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        walk = walk_folder(tmp_path)
        assert gc.isenabled() is enabled
        with pytest.raises(FileNotFoundError):
            walk_folder(tmp_path / "no such folder")
        assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()
    assert walk.documents == straightforward(tmp_path)
    assert [rel for rel, _ in walk.documents] == ["a/b/z.md", "a/x.txt", "a/y.MD", "b.md", "c/.hidden.md"]
    assert walk.skipped == ["notes.pdf"]


def test_the_collector_is_off_only_while_the_folders_are_listed(tmp_path, monkeypatch):
    (tmp_path / "a.md").write_text("a", encoding="utf-8")
    seen = []
    real_scandir = os.scandir

    def scandir(path):
        seen.append(gc.isenabled())
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    was = gc.isenabled()
    gc.enable()
    try:
        walk_folder(tmp_path)
        after = gc.isenabled()
    finally:
        gc.enable() if was else gc.disable()
    assert seen == [False] and after is True


def test_the_listing_in_bytes_is_the_walk_and_its_digest(tmp_path):
    root = tmp_path / "docs"
    names = ["b.md", "a/x.txt", "a/y.MD", "a/b/z.md", "notes.pdf", "é/ü.md", "e/" + "long" * 60 + ".md"]
    for i, rel in enumerate(names):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x" * i, encoding="utf-8")
    (root / "empty").mkdir()
    undecodable = os.path.join(os.fsencode(root), b"\xff-bytes.md")  # a name that is no UTF-8: a surrogate
    with open(undecodable, "wb") as f:
        f.write(b"text")
    os.utime(root / "b.md", ns=(2**62, 2**62 + 1))  # stamps that need more than 32 bits
    walk, listed = walk_folder(root, ordered=False), walk_listing(root)
    assert len(walk.documents) == 7 and listed.count == 7
    assert listed.documents() == walk.documents and listed.skipped == walk.skipped == ["notes.pdf"]
    for started in (0, 10**18 + 5, 2**63):
        assert listed.digest(started) == listing_digest(walk.documents, started)
    empty = walk_listing(root / "empty")
    assert (empty.count, empty.documents(), empty.digest(7)) == (0, [], listing_digest([], 7))
