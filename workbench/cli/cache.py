"""`sag2wb cache`: export, import or count the judgments of a JEV cache."""

from __future__ import annotations

from workbench.cli.common import path_option
from workbench.judges.jev.cache import _is_export, cache_main


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
            io.output("--file", args.file, ours=_is_export)
    elif args.action == "import":
        io.input("--file", args.file)
        io.output("--cache-dir", args.cache_dir, kind="dir")
    else:
        io.input("--cache-dir", args.cache_dir)
        io.input("--file", args.file)  # not used by stats


def cmd_cache(args) -> int:
    return cache_main(args)
