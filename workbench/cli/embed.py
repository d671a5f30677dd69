"""`sag2wb embed`: embed every unit of an index once for the semantic judge."""

from __future__ import annotations

from workbench.judges.embeddings import embed_main


def add_parser(sub) -> None:
    p = sub.add_parser("embed", help="embed every unit of an index for the semantic judge (once; cached on disk)")
    p.add_argument("--db", required=True)
    p.add_argument(
        "--cache-dir", default=None, help="embedding cache (default $SAG2WB_EMBED_CACHE or ~/.cache/sag2wb/embeddings)"
    )
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_embed)


def cmd_embed(args) -> int:
    return embed_main(args)
