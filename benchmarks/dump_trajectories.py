"""Whole trajectories of a question set as canonical trace JSON, one line per question and
judge, to compare two versions of the engine or two postings modes byte for byte.

    python benchmarks/dump_trajectories.py --corpus ../shared/data/2wiki/corpus.json \
        --questions ../shared/data/2wiki/questions-dev.jsonl --out before.jsonl [--max-postings 0]
    cmp before.jsonl after.jsonl

`--judges` picks the judges (default: hash, lexical, oracle); `--judges all` runs the seven the
fidelity checks use: hash, bm25, oracle, lexical, lexical-bridge, semantic, learned. `--all-corpora
DIR` dumps the 2Wiki dev set, the HotpotQA sample and both bundled corpora into DIR, one file per
corpus and judge (DATA is ../shared/data).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parent.parent / "tests"))  # comparison_judges.py (test-only judges)
import comparison_judges

from workbench.engine import Run
from workbench.index.corpora import load_corpus, load_questions
from workbench.index.store import Index
from workbench.judges import FunctionJudge, JudgeSpec
from workbench.params import Params

ALL_JUDGES = ("hash", "bm25", "oracle", "lexical", "lexical-bridge", "semantic", "learned")
ROOT = Path(__file__).resolve().parent.parent


def corpora(data: Path) -> dict[str, tuple[Path, Path]]:
    """The four corpora of the fidelity checks: name -> (corpus, questions)."""
    samples = ROOT / "sample_corpora"
    return {
        "2wiki-dev": (data / "2wiki" / "corpus.json", data / "2wiki" / "questions-dev.jsonl"),
        "hotpotqa": (data / "hotpotqa-sample" / "corpus.json", data / "hotpotqa-sample" / "questions.jsonl"),
        "encyclopedia": (samples / "encyclopedia" / "corpus.json", samples / "encyclopedia" / "questions.jsonl"),
        "internal-docs": (samples / "internal_docs", samples / "internal_docs.questions.jsonl"),
    }


def judge_for(name: str, index, question):
    if name == "hash":
        return FunctionJudge(comparison_judges.hash_judge, "hash")
    return JudgeSpec.parse(name).build(index, question.gold)


def dump(
    corpus, questions_path, judges, out_dir: Path | None = None, out: Path | None = None, db=None, max_postings=None
):
    questions = load_questions(questions_path)
    db = Path(db) if db else Path(tempfile.mkdtemp()) / "index.sqlite"
    if not db.exists():
        Index.build(load_corpus(corpus), db).close()
    index = Index(db) if max_postings is None else Index(db, max_postings=max_postings)
    with contextlib.ExitStack() as stack:
        stack.callback(index.close)
        files = {}
        for name in judges:
            target = out if out is not None else out_dir / f"{name}.jsonl"
            files[name] = stack.enter_context(open(target, "a" if out is not None else "w", encoding="utf-8"))
        for q in questions:
            for name in judges:
                judge = judge_for(name, index, q)
                trace = Run(index, q, Params(), judge).run()
                files[name].write(trace.to_json(stats=False) + "\n")
    return len(questions)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus")
    ap.add_argument("--questions")
    ap.add_argument("--out")
    ap.add_argument("--db", default=None, help="an index of the corpus to use instead of building one")
    ap.add_argument("--max-postings", type=int, default=None, help="Index(max_postings=...) (0: FTS5's bm25)")
    ap.add_argument("--judges", default="hash,lexical,oracle", help="comma-separated, or 'all'")
    ap.add_argument("--all-corpora", metavar="DIR", help="dump the four corpora under DIR/<corpus>/<judge>.jsonl")
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    args = ap.parse_args()
    judges = ALL_JUDGES if args.judges == "all" else tuple(args.judges.split(","))
    if args.all_corpora:
        for name, (corpus, questions) in corpora(Path(args.data)).items():
            folder = Path(args.all_corpora) / name
            folder.mkdir(parents=True, exist_ok=True)
            n = dump(corpus, questions, judges, out_dir=folder)
            print(f"{name}: {n} questions x {len(judges)} judges -> {folder}")
        return
    if not (args.corpus and args.questions and args.out):
        ap.error("give --corpus, --questions and --out, or --all-corpora DIR")
    Path(args.out).write_text("")
    n = dump(args.corpus, args.questions, judges, out=Path(args.out), db=args.db, max_postings=args.max_postings)
    print(f"{n} questions x {len(judges)} judges -> {args.out}")


if __name__ == "__main__":
    main()
