"""`sag2wb convert`: corpora, questions and results between BEIR, TREC and workbench files."""

from __future__ import annotations

from workbench.formats import convert


def add_parser(sub) -> None:
    p = sub.add_parser("convert", help="write a corpus / questions / eval result as BEIR, TREC or workbench files")
    p.add_argument("--to", required=True, choices=["beir", "workbench", "trec"])
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--corpus", default=None, help="corpus.json, a .jsonl corpus, a folder, a BEIR folder or irds:NAME")
    p.add_argument("--questions", default=None, help="questions .jsonl, a BEIR or TREC folder, or irds:NAME")
    p.add_argument("--split", default=None, help="BEIR qrels split to read or write (default: test)")
    p.add_argument("--results", default=None, help="an `sag2wb eval` result JSON, written as a TREC run (--to trec)")
    p.add_argument("--run", default=None, help="a TREC run (any system's), scored with R@5/R@10/AE@10 (--to workbench)")
    p.add_argument("--tag", default=None, help="run tag (default: the result file's name)")
    p.set_defaults(func=cmd_convert)


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
    )
    for path in written:
        print(f"wrote {path}")
    return 0
