"""`sag2wb demo`: index the bundled docs and walk one cross-file question, then compare the judges."""

from __future__ import annotations

import os
from pathlib import Path

from workbench import safeio
from workbench.cli.index import is_index
from workbench.cli.io_roles import path_option
from workbench.cli.paths import SAMPLE_DOCS, SAMPLE_DOCS_QUESTIONS
from workbench.cli.printing import explain, print_ranking
from workbench.engine import Run
from workbench.index.corpora import iter_corpus, load_questions
from workbench.index.schema import IndexProblem
from workbench.index.store import Index, corpus_fingerprint, open_or_build
from workbench.judges.registry import JudgeSpec, default_judge
from workbench.params import Params
from workbench.runs.evaluation import evaluate
from workbench.runs.options import RunOptions


def add_parser(sub) -> None:
    p = sub.add_parser("demo", help="index the bundled docs corpus and walk one multi-hop question (offline)")
    path_option(
        p,
        "--db",
        role="output",
        default=os.environ.get("SAG2WB_DEMO_DB", ".sag2wb/internal_docs.sqlite"),
        help="the demo's index, built on first use (default $SAG2WB_DEMO_DB or .sag2wb/internal_docs.sqlite)",
    )
    p.add_argument("--question", default="docs-02", help="which sample question to walk through (default docs-02)")
    p.set_defaults(func=cmd_demo)


def declare_io(args, io) -> None:
    """--db: an index of exactly the bundled docs is only opened (an input); anything else there is
    replaced only when it is an index recorded as ours (written by `demo` or `index` there)."""
    if _opened_as_is(Path(args.db)):
        io.input("--db", args.db)
    else:
        io.output("--db", args.db, ours=is_index, ours_name="a SAG2 workbench index")


def _opened_as_is(db: Path) -> bool:
    if not is_index(db):
        return False
    try:
        index = Index(db)
    except IndexProblem:
        return False
    try:
        return index.meta.get("fingerprint") == corpus_fingerprint(iter_corpus(SAMPLE_DOCS))
    finally:
        index.close()


def cmd_demo(args) -> int:
    """Index the bundled docs, walk one cross-file question round by round, then compare BM25,
    SAG2 with the offline lexical, semantic and learned judges, and the oracle ceiling on every sample question."""
    db = Path(args.db)
    index, built = open_or_build(SAMPLE_DOCS, db, source="sample_corpora/internal_docs")
    if built:
        safeio.record_output(db, "demo --db")  # ours: a later demo or index may replace it
    print(f"{'built' if built else 'opened'} {db} ({index.N} units, {index.D} files of the bundled internal docs)\n")
    questions = load_questions(SAMPLE_DOCS_QUESTIONS)
    judge_name = default_judge(index)  # lexical for a folder of files (AUTO_RULE, docs/judges.md)
    judge = JudgeSpec.parse(judge_name).build(index)
    # docs-02 asks the flagship question in Chinese: only expansion through the identifiers
    # role_id / permission_keys reaches the English gateway file.
    question = next((q for q in questions if q.id == args.question), questions[0])
    trace = Run(index, question, Params(), judge).run()
    print_ranking(trace, index, 10, question.gold)
    baseline = Run(index, question, Params(), None).run()

    def found(t):
        return sorted(set(t.documents()[:10]) & set(question.gold))

    print(f"gold files ({len(question.gold)}): " + ", ".join(sorted(question.gold)))
    print(
        f"in the top 10: BM25 alone {len(found(baseline))}, "
        f"SAG2 with the offline {judge_name} judge {len(found(trace))}"
        f" (reached through expansion: {', '.join(sorted(set(found(trace)) - set(found(baseline)))) or 'none'})"
    )
    explain(trace)
    print("\ngold files in the top 10, per sample question:")
    names = ("bm25", "lexical", "semantic", "learned", "oracle")
    results = {name: evaluate(index, questions, name, Params(), RunOptions(progress=False)) for name in names}
    print(f"  {'question':10s} {'gold':>4s} " + " ".join(f"{n:>{max(5, len(n))}s}" for n in names) + "  question text")
    for i, q in enumerate(questions):
        row = [round(results[n].records[i]["R@10"] * len(q.gold) / 100) for n in names]
        cells = " ".join(f"{v:{max(5, len(n))}d}" for n, v in zip(names, row))
        print(f"  {q.id:10s} {len(q.gold):4d} {cells}  {q.question[:60]}")
    print()
    for name, result in results.items():
        m = result.metrics
        print(
            f"{name:9s} on {m['questions']} sample questions: R@5 {m['R@5']:.2f}  R@10 {m['R@10']:.2f}  "
            f"AE@10 {m['AE@10']:.2f}  judgments {m['judgments']}"
            + ("  (oracle: a ceiling, not a model)" if name == "oracle" else "")
        )
    return 0
