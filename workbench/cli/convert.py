"""`sag2wb convert`: corpora, questions and results between BEIR, TREC and workbench files."""

from __future__ import annotations

from workbench.cli.io_roles import path_option
from workbench.formats import convert, declare_convert_inputs
from workbench.safeio import check_name


def add_parser(sub) -> None:
    p = sub.add_parser("convert", help="write a corpus / questions / eval result as BEIR, TREC or workbench files")
    p.add_argument("--to", required=True, choices=["beir", "workbench", "trec"], help="the layout to write")
    path_option(p, "--out", role="output", required=True, help="output folder")
    path_option(
        p,
        "--corpus",
        role="input",
        default=None,
        help="corpus.json, a .jsonl corpus, a folder, a BEIR folder or irds:NAME",
    )
    path_option(
        p, "--questions", role="input", default=None, help="questions .jsonl, a BEIR or TREC folder, or irds:NAME"
    )
    p.add_argument("--split", default=None, help="BEIR qrels split to read or write, a plain name (default: test)")
    path_option(
        p,
        "--results",
        role="input",
        default=None,
        help="an `sag2wb eval` result JSON, written as a TREC run (--to trec)",
    )
    path_option(
        p,
        "--run",
        role="input",
        default=None,
        help="a TREC run (any system's), scored with R@5/R@10/AE@10 (--to workbench)",
    )
    p.add_argument("--tag", default=None, help="run tag (default: the result file's name)")
    p.add_argument(
        "--force",
        action="store_true",
        help="write into a folder that holds an input, or replace files convert did not write (inputs never)",
    )
    p.set_defaults(func=cmd_convert)


def declare_io(args, io) -> None:
    """The folder and inputs, checked before anything is read; convert itself checks every
    file it will write once it knows their names (corpus.json or corpus.jsonl)."""
    if args.split is not None:
        check_name("--split", args.split)
    declare_convert_inputs(
        io, args.out, corpus=args.corpus, questions=args.questions, results=args.results, run=args.run
    )


def cmd_convert(args) -> int:
    written = convert(
        args.to,
        args.out,
        corpus=args.corpus,
        questions=args.questions,
        split=args.split,
        results=args.results,
        run=args.run,
        tag=args.tag,
        force=args.force,
    )
    for path in written:
        print(f"wrote {path}")
    return 0
