"""`sag2wb index`: build an index of a corpus, or update one in place (--add, --remove, a changed folder)."""

from __future__ import annotations

import time
from pathlib import Path

from workbench.cli.common import (
    CLIError,
    size,
)
from workbench.index.store import Index, IndexProblem
from workbench.index.update import update_folder, update_passages


def add_parser(sub) -> None:
    p = sub.add_parser("index", help="build an index from corpus.json or a folder of .md/.txt")
    p.add_argument("corpus")
    p.add_argument(
        "--db",
        required=True,
        help="the index file to write (an existing workbench index is replaced; any other file is refused)",
    )
    p.add_argument("--workers", type=int, default=None, help="tokenizing processes (default: up to 2 cores)")
    p.add_argument(
        "--rebuild", action="store_true", help="build anew even when an index of this folder could be updated in place"
    )
    p.add_argument(
        "--add",
        metavar="FILE",
        help='update the index: add (or replace, by title) the passages of FILE, a JSON list of {"title", "text"}',
    )
    p.add_argument(
        "--remove", metavar="TITLE", nargs="+", help="update the index: remove the passages with these titles"
    )
    p.set_defaults(func=cmd_index)


def cmd_index(args) -> int:
    t0 = time.perf_counter()
    db = Path(args.db)
    corpus = Path(args.corpus)
    if args.add or args.remove:
        if not db.exists():
            raise CLIError(f"{db}: no index to update; build it first with `sag2wb index {args.corpus} --db {db}`")
        Index(db).close()  # a workbench index of this tokenizer, or a named error
        changes = update_passages(db, Path(args.add) if args.add else None, args.remove or ())
        return _report_update(db, changes)
    if corpus.is_dir() and db.exists() and not args.rebuild and _updatable(db):
        return _report_update(db, update_folder(db, corpus))
    # the corpus is streamed into the build (never held whole); a bar shows passages/s on a terminal
    index = Index.build(args.corpus, args.db, source=str(args.corpus), workers=args.workers, progress=None)
    t1 = time.perf_counter()
    print(f"indexed {index.N} units from {index.D} documents of {args.corpus}")
    print(
        f"time {t1 - t0:.2f} s ({index.N / max(t1 - t0, 1e-9):.0f} passages/s, {index.meta.get('chunks', '?')} chunks)"
    )
    print(f"database {db} {size(db)} ({db.stat().st_size / 1024 / index.N:.2f} KiB per unit)")
    return 0


def _updatable(db: Path) -> bool:
    """An index this workbench can update in place (a folder index of the current format)."""
    try:
        index = Index(db)
    except IndexProblem:
        return False
    try:
        return bool(index.db.execute("SELECT 1 FROM sqlite_master WHERE name = 'files'").fetchone())
    finally:
        index.close()


def _report_update(db: Path, changes) -> int:
    index = Index(db)
    print(f"updated {db}: {changes.summary()}")
    for label, names in (("added", changes.added), ("changed", changes.changed), ("removed", changes.removed)):
        if names:
            print(f"  {label}: {', '.join(names[:10])}{' ...' if len(names) > 10 else ''}")
    print(f"now {index.N} units from {index.D} documents; database {size(db)}")
    return 0
