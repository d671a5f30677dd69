"""Every offline judge side by side (bm25, lexical, lexical-bridge, semantic, learned, oracle), in one run.

    .venv/bin/python benchmarks/bench_judges.py                 # 2Wiki dev + HotpotQA sample + bundled corpora + speed
    .venv/bin/python benchmarks/bench_judges.py --skip-speed --only 2wiki
    .venv/bin/python benchmarks/bench_judges.py --only speed --precision both   # int8 (default) and float embeddings
    .venv/bin/python benchmarks/bench_judges.py --only embedding                # passages/s per batch size, threads
    SAG2WB_EMBED_PRECISION=float .venv/bin/python benchmarks/bench_judges.py --only 2wiki  # accuracy with float
    .venv/bin/python benchmarks/bench_judges.py --only learned   # issue 25: CV, one corpus out, distillation, cost
    .venv/bin/python benchmarks/bench_judges.py --write-default workbench/judges/default_learned_judge.json

Prints, per corpus: R@5, R@10, AE@10 and judgments per judge with the paired 95% interval
of the R@10 difference against `lexical`, then R@10 per question type with per-type paired
intervals; the semantic judge's own ablation (relevance only / bridge only / both); and
speed: model load, seconds per question cold (empty embedding cache) and with every
embedding cached, corpus embedding rate, peak RSS. The learned judge (`--only learned`,
bench_learned.py): its 5-fold cross-validated R@10 by question on 2Wiki dev beside the fixed
judges, leave-one-corpus-out against BM25 and `lexical`, distillation from a judge served as
JEV (agreement with the teacher), and its cost. It asserts nothing (docs/judges.md).

The embedding cache for the accuracy runs is --cache-dir (default a temp dir: the first
run embeds what the questions reach; `sag2wb embed` beforehand makes it warm).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import REPO, data_arg, need, peak_rss_mib

from workbench.index.corpora import load_questions
from workbench.index.store import open_or_build
from workbench.params import Params
from workbench.runs.experiment import Experiment
from workbench.runs.options import RunOptions
from workbench.runs.policies import Config
from workbench.runs.results import paired_interval

JUDGES = ["bm25", "lexical", "lexical-bridge", "semantic", "learned", "oracle"]  # learned: the shipped default
ABLATION = [
    ("relevance only", "semantic:signals=model+coverage"),
    ("model only", "semantic:signals=model"),
    ("bridge only", "semantic:signals=bridge"),
    ("coverage+bridge", "semantic:signals=coverage+bridge"),
    ("both", "semantic"),
]


def compare_judges(title: str, index, questions, judges, reference: str = "lexical", by_type: bool = True) -> None:
    configs = [Config(name, Params(), spec) for name, spec in judges]
    t0 = time.perf_counter()
    results = Experiment(index, questions, configs, RunOptions(progress=False)).run()
    seconds = time.perf_counter() - t0
    print(f"\n## {title}: {len(questions)} questions, H=2 ({seconds:.1f} s for all judges)\n")
    table = results.table(reference=reference if reference in results.names else None)
    print(table.to_string())
    if not by_type:
        return
    frame = results.frame()
    types = sorted(t for t in frame["type"].dropna().unique())
    if len(types) < 2:
        return
    print(f"\nR@10 per question type; [low, high] = paired 95% interval of the difference vs {reference}")
    names = results.names
    print(f"{'type':18s} {'n':>3s} " + " ".join(f"{n:>22s}" for n in names))
    for t in types:
        ids = set(frame[(frame["type"] == t)]["question"])
        cells = []
        ref = {q: v for q, v in results.values(reference).items() if q in ids}
        for n in names:
            vals = {q: v for q, v in results.values(n).items() if q in ids}
            mean = sum(vals.values()) / len(vals)
            if n == reference:
                cells.append(f"{mean:8.2f}{'':14s}")
            else:
                c = paired_interval(vals, ref)
                cells.append(f"{mean:8.2f} [{c['low']:+6.1f},{c['high']:+6.1f}]")
        print(f"{t:18s} {len(ids):3d} " + " ".join(f"{c:>22s}" for c in cells))


def per_question(index, questions, judge) -> list[float]:
    """Seconds of a whole H=2 run for each question."""
    from workbench.engine import Run

    out = []
    for q in questions:
        t = time.perf_counter()
        Run(index, q, Params(), judge).run()
        out.append(time.perf_counter() - t)
    return out


def speed(index, questions, n_cold: int, repeats: int, precision: str = "float") -> None:
    """Seconds per question: cold (model loaded, empty embedding cache), then with every
    embedding on disk (new embedder: its memory is empty), then fully in memory."""
    from workbench.judges.embeddings import Embedder, embed_index, load_model
    from workbench.judges.lexical import LexicalJudge
    from workbench.judges.semantic import SemanticJudge

    t0 = time.perf_counter()
    model = load_model(precision=precision)
    print(f"\n## speed, precision {precision} (2 threads; the machine is shared, so medians of {repeats} runs)\n")
    print(f"model load {time.perf_counter() - t0:.2f} s ({model.id})")
    qs = questions[:n_cold]
    cold, disk, memory, embedded = [], [], [], []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            emb = Embedder(Path(tmp) / "cache", model=model)
            cold.append(statistics.median(per_question(index, qs, SemanticJudge(index, embedder=emb))))
            embedded.append(emb.stats()["embedded"] / len(qs))
            emb.close()
            emb = Embedder(Path(tmp) / "cache", model=model)
            disk.append(statistics.median(per_question(index, qs, SemanticJudge(index, embedder=emb))))
            assert emb.stats()["embedded"] == 0
            memory.append(statistics.median(per_question(index, qs, SemanticJudge(index, embedder=emb))))
            emb.close()
    lexical = statistics.median(per_question(index, qs, LexicalJudge(index)))
    print(f"per question over {len(qs)} questions (median of per-question times, then median of {repeats} runs):")
    print(
        f"  cold, empty embedding cache      {statistics.median(cold):7.3f} s  "
        f"({statistics.median(embedded):.0f} passages embedded per question)"
    )
    print(f"  every embedding on disk          {statistics.median(disk):7.3f} s")
    print(f"  every embedding in memory        {statistics.median(memory):7.3f} s")
    print(f"  lexical judge, same questions    {lexical:7.3f} s")
    rates = []
    for rep in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            emb = Embedder(Path(tmp) / "cache", model=model)
            rates.append(embed_index(_SubIndex(index, 256, offset=rep * 256), emb, progress=False)["passages_per_s"])
            emb.close()
    print(
        f"corpus embedding (sag2wb embed), 256 passages x {repeats}: {statistics.median(rates):.1f} passages/s "
        f"(runs: {', '.join(f'{x:.1f}' for x in rates)})"
    )


# multiply-adds per word piece of all-MiniLM-L6-v2's weight matrices (6 layers: Q, K, V, output
# 384x384 each, feed-forward 384x1536 and 1536x384); attention scores add 2 * 384 * length more
MACS_PER_TOKEN = 6 * (4 * 384 * 384 + 2 * 384 * 1536)


def sgemm_gflops() -> float:
    """What numpy's float32 matrix product reaches right now (best of 5), for the arithmetic."""
    import numpy as np

    a = np.random.rand(1024, 384).astype(np.float32)
    b = np.random.rand(384, 1536).astype(np.float32)
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return 2 * a.shape[0] * a.shape[1] * b.shape[1] / best / 1e9


def embedding_rate(corpus_file: Path, n: int, repeats: int, configs) -> None:
    """Passages/s of Embedder.embed (memory only) per (precision, batch size, threads),
    interleaved so every configuration sees the same load; a different slice of n passages
    per repeat. Prints the word pieces per passage and the GFLOPS that rate implies."""
    import json

    from workbench.judges.embeddings import Embedder, load_model, passage_text

    docs = json.loads(corpus_file.read_text(encoding="utf-8"))
    models = {c: load_model(precision=c[0], threads=c[2]) for c in configs}  # int8: built once here
    rates = {c: [] for c in configs}
    gflops = [sgemm_gflops()]
    pieces = []
    for rep in range(repeats):
        texts = [passage_text(d.get("title", ""), d["text"]) for d in docs[rep * n : (rep + 1) * n]]
        pieces.extend(len(x) for x in next(iter(models.values())).tokenize(texts))
        for c in configs:
            emb = Embedder(False, model=models[c], batch_size=c[1])
            t = time.perf_counter()
            emb.embed(texts)
            rates[c].append(len(texts) / (time.perf_counter() - t))
        gflops.append(sgemm_gflops())
    tokens = sum(pieces) / len(pieces)
    gflop = 2 * MACS_PER_TOKEN * tokens / 1e9
    print(
        f"\n## embedding rate: {n} passages x {repeats} slices of {corpus_file.parent.name}, "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n"
    )
    print(
        f"{tokens:.1f} word pieces per passage (cut at {next(iter(models.values())).max_tokens}) -> "
        f"{gflop:.2f} GFLOP per passage; numpy float32 matmul now: median {statistics.median(gflops):.0f} GFLOPS "
        f"(runs {', '.join(f'{g:.0f}' for g in gflops)})"
    )
    print(f"{'precision':9s} {'batch':>5s} {'threads':>7s} {'passages/s':>10s} {'GFLOPS implied':>14s}  runs")
    for c in configs:
        r = statistics.median(rates[c])
        print(f"{c[0]:9s} {c[1]:5d} {c[2]:7d} {r:10.1f} {r * gflop:14.1f}  {', '.join(f'{x:.1f}' for x in rates[c])}")


class _SubIndex:
    """The first n units after `offset` of an index, for timing embed_index on a slice."""

    def __init__(self, index, n, offset=0):
        ids = sorted(index.documents)[offset : offset + n]
        self.documents = {u: index.documents[u] for u in ids}
        self.units = index.units


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    data_arg(ap)
    ap.add_argument("--only", choices=["2wiki", "speed", "hotpotqa", "bundled", "embedding", "learned"], default=None)
    ap.add_argument(
        "--write-default",
        default=None,
        metavar="PATH",
        help="fit the shipped learned judge (the bundled corpora and --data's 2Wiki dev questions)",
    )
    ap.add_argument(
        "--distil", choices=["encyclopedia", "2wiki"], default="encyclopedia", help="the distillation corpus"
    )
    ap.add_argument(
        "--learned-sections",
        default="2wiki,loco,select,variants,distil,cost,trees",
        help="with --only learned: which of its sections (comma-separated: 2wiki, loco, select, variants, distil, "
        "cost, trees)",
    )
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--skip-ablation", action="store_true")
    ap.add_argument("--cold-questions", type=int, default=10)
    ap.add_argument("--embed-passages", type=int, default=128, help="passages per slice for --only embedding")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--precision",
        choices=["int8", "float", "both"],
        default="int8",
        help="embedding model precision for the speed section (workbench.embeddings.PRECISIONS)",
    )
    ap.add_argument("--cache-dir", default=None, help="embedding cache for the accuracy runs (default: a temp dir)")
    ap.add_argument("--work", default=None, help="folder for the indexes (default: a temp dir)")
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-judges-"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ["SAG2WB_EMBED_CACHE"] = args.cache_dir or str(work / "embeddings")
    print(
        f"# bench_judges: embedding cache {os.environ['SAG2WB_EMBED_CACHE']}; load average {os.getloadavg()[0]:.1f} "
        f"on {os.cpu_count()} cores"
    )
    judges = [(j, j) for j in JUDGES]
    data = Path(args.data)
    if args.write_default:
        from bench_learned import write_default

        write_default(Path(args.write_default), work, data)
        return
    if args.only == "learned":
        from bench_learned import (
            LEARNED_SECTIONS,
            learned_sections,
        )

        sections = tuple(s.strip() for s in args.learned_sections.split(","))
        if not set(sections) <= set(LEARNED_SECTIONS):
            ap.error(f"--learned-sections: {args.learned_sections!r}; choose from {', '.join(LEARNED_SECTIONS)}")
        learned_sections(data, work, args.distil, args.repeats, sections)
        print(f"\npeak RSS {peak_rss_mib():.0f} MiB")
        return
    if args.only == "embedding":  # not in the default run: a tuning table, not a goal
        # texts per call (each text runs alone, `threads` at once): the chunk only sets progress and cache writes
        configs = [(p, b, t) for p in ("int8", "float") for b in (16,) for t in (2, 1)]
        embedding_rate(need(data / "2wiki" / "corpus.json"), args.embed_passages, args.repeats, configs)
        return
    if args.only in (None, "2wiki", "speed"):
        index, _ = open_or_build(need(data / "2wiki" / "corpus.json"), work / "2wiki.sqlite")
        questions = load_questions(need(data / "2wiki" / "questions-dev.jsonl"))
    if args.only in (None, "2wiki"):
        compare_judges("2Wiki dev", index, questions, judges)
        if not args.skip_ablation:
            compare_judges(
                "2Wiki dev, the semantic judge's own ablation",
                index,
                questions,
                [("lexical", "lexical"), *ABLATION],
                by_type=False,
            )
    if args.only in (None, "2wiki", "speed") and not args.skip_speed:
        for precision in ["int8", "float"] if args.precision == "both" else [args.precision]:
            speed(index, questions, args.cold_questions, args.repeats, precision)
    if args.only in (None, "hotpotqa"):
        index, _ = open_or_build(need(data / "hotpotqa-sample" / "corpus.json"), work / "hotpotqa.sqlite")
        compare_judges("HotpotQA sample", index, load_questions(data / "hotpotqa-sample" / "questions.jsonl"), judges)
    if args.only in (None, "bundled"):
        enc = REPO / "sample_corpora" / "encyclopedia"
        index, _ = open_or_build(enc / "corpus.json", work / "encyclopedia.sqlite")
        compare_judges("bundled encyclopedia", index, load_questions(enc / "questions.jsonl"), judges + ABLATION[:3])
        index, _ = open_or_build(REPO / "sample_corpora" / "internal_docs", work / "internal_docs.sqlite")
        docs_q = load_questions(REPO / "sample_corpora" / "internal_docs.questions.jsonl")
        compare_judges(
            "bundled internal docs (English and Chinese questions)",
            index,
            docs_q,
            [*judges, ("semantic, no model for CJK", "semantic:cjk=coverage")],
            by_type=False,
        )
        zh = [q for q in docs_q if any("\u4e00" <= ch <= "\u9fff" for ch in q.question)]
        compare_judges(
            "bundled internal docs, the Chinese questions only",
            index,
            zh,
            [*judges, ("semantic, no model for CJK", "semantic:cjk=coverage")],
            by_type=False,
        )
    if args.only is None:
        from bench_learned import learned_sections

        learned_sections(data, work, args.distil, args.repeats)
    print(f"\npeak RSS {peak_rss_mib():.0f} MiB")


if __name__ == "__main__":
    main()
