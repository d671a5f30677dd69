"""`sag2wb embed`: embed every unit of an index once for the semantic judge."""

from __future__ import annotations

from workbench.cli.common import number, path_option
from workbench.judges.embeddings import embed_main


def add_parser(sub) -> None:
    p = sub.add_parser("embed", help="embed every unit of an index for the semantic judge (once; cached on disk)")
    path_option(p, "--db", role="input", required=True, help="the index whose units are embedded")
    path_option(
        p,
        "--cache-dir",
        role="output",
        default=None,
        help="embedding cache (default $SAG2WB_EMBED_CACHE or ~/.cache/sag2wb/embeddings)",
    )
    p.add_argument(
        "--threads", type=number(int, minimum=1), default=2, help="threads of the embedding model (default 2)"
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_embed)


def declare_io(args, io) -> None:
    io.input("--db", args.db)
    if args.cache_dir:
        io.output("--cache-dir", args.cache_dir, kind="dir")


def cmd_embed(args) -> int:
    return embed_main(args)
