"""`sag2wb embed`: embed every unit of an index once for the semantic judge."""

from __future__ import annotations

from workbench import safeio
from workbench.cli.io_roles import path_option
from workbench.cli.options import number
from workbench.index.store import Index
from workbench.judges.embeddings import Embedder, embed_index


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
    """`sag2wb embed --db DB [--cache-dir DIR] [--threads N]`: the whole corpus, once."""
    index = Index(args.db)
    embedder = Embedder(args.cache_dir, threads=args.threads)
    try:
        r = embed_index(index, embedder, progress=not args.quiet)
    finally:
        embedder.close()
    rate = f", {r['passages_per_s']} passages/s" if r["passages_per_s"] else ""
    print(
        f"embedded {r['embedded']} of {r['units']} units ({r['cached']} already cached) in {r['seconds']} s{rate}"
        f" -> {embedder.cache_dir} [{embedder.model_id}]"
    )
    return safeio.EXIT_OK
