"""`sag2wb cache`: export, import or count the judgments of a JEV cache."""

from __future__ import annotations

from workbench.judges.jev.cache import cache_main


def add_parser(sub) -> None:
    p = sub.add_parser("cache", help="export or import the judgments of a JEV cache")
    p.add_argument("action", choices=["export", "import", "stats"])
    p.add_argument("--cache-dir", required=True)
    p.add_argument("--file", default=None, help="the exported JSONL file")
    p.add_argument("--force", action="store_true", help="export: replace an existing file that is not an export")
    p.add_argument("--overwrite", action="store_true", help="import: replace cached judgments the file gives another p")
    p.set_defaults(func=cmd_cache)


def cmd_cache(args) -> int:
    return cache_main(args)
