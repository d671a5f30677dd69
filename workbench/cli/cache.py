"""`sag2wb cache`: export, import or count the judgments of a JEV cache."""

from __future__ import annotations

import sys

from workbench import safeio
from workbench.cli.io_roles import path_option
from workbench.judges.jev.cache import cache_stats, export_cache, import_cache, is_export
from workbench.judges.jev.errors import JEVInputError


def add_parser(sub) -> None:
    p = sub.add_parser("cache", help="export or import the judgments of a JEV cache")
    p.add_argument(
        "action",
        choices=["export", "import", "stats"],
        help="export: cache to --file; import: --file into the cache; stats: count the cached judgments",
    )
    path_option(p, "--cache-dir", role="output", required=True, help="the JEV judgment cache folder")
    path_option(
        p, "--file", role="output", default=None, help="the exported JSONL file (export writes it, import reads it)"
    )
    p.add_argument("--force", action="store_true", help="export: replace an existing file that is not an export")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="import: replace cached judgments to which the file gives another probability",
    )
    p.set_defaults(func=cmd_cache)


def declare_io(args, io) -> None:
    """export writes --file from the cache; import writes the cache from --file; stats reads."""
    if args.action == "export":
        io.input("--cache-dir", args.cache_dir)
        if args.file:
            io.output("--file", args.file, ours=is_export)
    elif args.action == "import":
        io.input("--file", args.file)
        io.output("--cache-dir", args.cache_dir, kind="dir")
    else:
        io.input("--cache-dir", args.cache_dir)
        io.input("--file", args.file)  # not used by stats


def cmd_cache(args) -> int:
    """`sag2wb cache export|import|stats --cache-dir DIR [--file F] [--force] [--overwrite]`."""
    if args.action in ("export", "import") and not args.file:
        raise JEVInputError(f"sag2wb cache {args.action} needs --file FILE.jsonl")
    if args.action == "export":
        n = export_cache(args.cache_dir, args.file, force=args.force)
        print(f"exported {n} judgments from {args.cache_dir} to {args.file}")
    elif args.action == "import":
        report = import_cache(args.cache_dir, args.file, overwrite=args.overwrite)
        print(
            f"imported {report.added + report.replaced} judgments from {args.file} into {args.cache_dir} "
            f"({report.summary()})"
        )
        if report.conflicts_kept:
            print(
                f"warning: {report.conflicts_kept} judgments in {args.file} differ from the cache and were not "
                f"imported; pass --overwrite to replace the cached values",
                file=sys.stderr,
            )
    else:
        s = cache_stats(args.cache_dir)
        print(f"{args.cache_dir}: {s['judgments']} judgments, {s['bytes'] / 2**20:.2f} MiB, format {s['format']}")
        for model, count in s["models"].items():
            print(f"  answered by {model}: {count}")
        if s["old_format_judgments"]:
            print(f"  {s['old_format_judgments']} judgments of an older client (not used; rebuild the cache)")
    return safeio.EXIT_OK
