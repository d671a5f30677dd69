"""`sag2wb index`: build an index of a corpus, or update one in place (--add, --remove, a changed folder)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from workbench import safeio
from workbench.cli.errors import CLIError
from workbench.cli.io_roles import path_option
from workbench.cli.options import number
from workbench.cli.printing import size
from workbench.index.files import check_replaceable
from workbench.index.schema import IndexProblem
from workbench.index.store import Index
from workbench.index.update import update_folder, update_passages


def add_parser(sub) -> None:
    p = sub.add_parser("index", help="build an index from corpus.json or a folder of .md/.txt")
    path_option(
        p,
        "corpus",
        role="input",
        help="corpus.json, a .jsonl corpus, a folder of .md/.txt files, a BEIR folder or irds:NAME",
    )
    path_option(
        p,
        "--db",
        role="output",
        required=True,
        help="the index file to write (an existing workbench index is replaced; any other file is refused)",
    )
    p.add_argument(
        "--workers", type=number(int, minimum=1), default=None, help="tokenizing processes (default: up to 2 cores)"
    )
    p.add_argument(
        "--rebuild", action="store_true", help="build anew even when an index of this folder could be updated in place"
    )
    path_option(
        p,
        "--add",
        role="input",
        metavar="FILE",
        help='update the index: add (or replace, by title) the passages of FILE, a JSON list of {"title", "text"}',
    )
    p.add_argument(
        "--remove", metavar="TITLE", nargs="+", help="update the index: remove the passages with these titles"
    )
    p.add_argument(
        "--allow-empty", action="store_true", help="let --remove take every passage (the index then cannot be searched)"
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an existing --db file that is not a workbench index (never the corpus or --add file)",
    )
    p.set_defaults(func=cmd_index)


def is_index(path) -> bool:
    """A workbench index (the only file `index --db` replaces)."""
    try:
        check_replaceable(Path(path))
    except (IndexProblem, OSError):
        return False
    return True


def declare_io(args, io) -> None:
    io.input("corpus", args.corpus)
    io.input("--add", args.add)
    # replaced or updated only when recorded as ours (written or updated by `index` there) and an index
    io.output("--db", args.db, ours=is_index, ours_name="a SAG2 workbench index")


def _recorded(db: Path, result: int) -> int:
    """Record the index as ours once it is written and closed (safeio.record_output)."""
    safeio.record_output(db, "index --db")
    return result


def cmd_index(args) -> int:
    t0 = time.perf_counter()
    db = Path(args.db)
    corpus = Path(args.corpus)
    if args.add or args.remove:
        if not db.exists():
            raise CLIError(f"{db}: no index to update; build it first with `sag2wb index {args.corpus} --db {db}`")
        Index(db, allow_empty=True).close()  # a workbench index of this tokenizer, or a named error
        changes = update_passages(
            db, Path(args.add) if args.add else None, args.remove or (), allow_empty=args.allow_empty
        )
        return _recorded(db, _report_update(db, changes))
    if corpus.is_dir() and db.exists() and not args.rebuild and _updatable(db):
        return _recorded(db, _report_update(db, update_folder(db, corpus)))
    # the corpus is streamed into the build (never held whole); a bar shows passages/s on a terminal
    index = _build(args, db)
    t1 = time.perf_counter()
    print(f"indexed {index.N} units from {index.D} documents of {args.corpus}")
    _print_skipped(index.skipped)
    print(
        f"time {t1 - t0:.2f} s ({index.N / max(t1 - t0, 1e-9):.0f} passages/s, {index.meta.get('chunks', '?')} chunks)"
    )
    print(f"database {db} {size(db)} ({db.stat().st_size / 1024 / index.N:.2f} KiB per unit)")
    index.close()
    return _recorded(db, 0)


def _build(args, db: Path) -> Index:
    """Build atomically; with --force over a file that is not an index, build beside it and
    rename over it only once the build succeeded (a failed build leaves the file as it was)."""
    aside = None
    if args.force and db.is_file() and not is_index(db):
        aside = db.with_name(f"{safeio.TEMP_PREFIX}{db.name}.force-{os.getpid()}")
    try:
        index = Index.build(args.corpus, aside or db, source=str(args.corpus), workers=args.workers, progress=None)
        if aside is None:
            return index
        index.close()
        os.replace(aside, db)
        return Index(db)
    except OSError as exc:
        if exc.filename is not None and Path(exc.filename).name.startswith((f".{db.name}.", safeio.TEMP_PREFIX)):
            exc.filename = str(db)  # the user's --db, never our temporary build file
        raise
    finally:
        if aside is not None:
            aside.unlink(missing_ok=True)


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


def _print_skipped(skipped: list[str]) -> None:
    if skipped:  # .pdf, .docx, ...: not read, and the user should know which
        names = ", ".join(skipped[:10]) + (f" and {len(skipped) - 10} more" if len(skipped) > 10 else "")
        print(f"skipped {len(skipped)} file(s) that are not .md or .txt (convert them to text to index them): {names}")


def _report_update(db: Path, changes) -> int:
    index = Index(db, allow_empty=True)
    print(f"updated {db}: {changes.summary()}")
    for label, names in (("added", changes.added), ("changed", changes.changed), ("removed", changes.removed)):
        if names:
            print(f"  {label}: {', '.join(names[:10])}{' ...' if len(names) > 10 else ''}")
    _print_skipped(changes.skipped)
    print(f"now {index.N} units from {index.D} documents; database {size(db)}")
    return 0
