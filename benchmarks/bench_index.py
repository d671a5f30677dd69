"""Index build on 2Wiki: time, size, tokenizer throughput vs a plain per-passage jieba pass,
and the BM25 baseline. Prints figures; asserts nothing.

    python benchmarks/bench_index.py [--data ../shared/data]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import data_arg, need

from workbench import text
from workbench.index.corpora import load_corpus, load_questions
from workbench.index.store import Index
from workbench.runs.evaluation import evaluate
from workbench.runs.options import RunOptions


def main() -> None:
    ap = argparse.ArgumentParser()
    data_arg(ap)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    corpus = need(Path(args.data) / "2wiki" / "corpus.json")
    questions = need(Path(args.data) / "2wiki" / "questions-dev.jsonl")

    t = time.perf_counter()
    text.tokenize("warm up")  # loads jieba's dictionary (once per process)
    dict_load = time.perf_counter() - t
    units = load_corpus(corpus)
    fields = [f for u in units for f in (u.title, u.body)]

    t = time.perf_counter()
    plain = [text.tokenize_plain(f) for f in fields]
    plain_s = time.perf_counter() - t

    builds, sizes = [], []
    for i in range(args.repeat):
        text._CHUNK_CACHE.clear()
        text._WORD_CACHE.clear()
        with tempfile.TemporaryDirectory() as d:
            t = time.perf_counter()
            index = Index.build(units, Path(d) / "2wiki.sqlite")
            builds.append(time.perf_counter() - t)
            sizes.append((Path(d) / "2wiki.sqlite").stat().st_size)
            if i == 0:
                t = time.perf_counter()
                result = evaluate(index, load_questions(questions), "bm25", options=RunOptions(progress=False))
                bm25_s = time.perf_counter() - t
            index.close()
    text._CHUNK_CACHE.clear()
    text._WORD_CACHE.clear()
    t = time.perf_counter()
    fast = [text.tokenize(f) for f in fields]
    fast_s = time.perf_counter() - t
    mismatches = sum(a != b for a, b in zip(plain, fast))

    n = len(units)
    print(f"corpus: {corpus} ({n} passages)")
    print(f"jieba dictionary load (once per process): {dict_load:.2f} s")
    print(
        f"plain per-passage jieba tokenization: {plain_s:.2f} s; workbench tokenizer (cold caches): {fast_s:.2f} s "
        f"-> {plain_s / fast_s:.1f}x; token lists differing: {mismatches} of {len(fields)}"
    )
    print(
        f"index build (tokenize + FTS5 + statistics + VACUUM), {args.repeat} runs: "
        f"median {statistics.median(builds):.2f} s (min {min(builds):.2f}, max {max(builds):.2f})"
    )
    print(f"build + dictionary load: {statistics.median(builds) + dict_load:.2f} s")
    size = statistics.median(sizes)
    print(f"database size: {size / 2**20:.2f} MiB = {size / 1024 / n:.2f} KiB per passage")
    m = result.metrics
    print(
        f"BM25 baseline on {m['questions']} dev questions: R@5 {m['R@5']:.2f}  R@10 {m['R@10']:.2f}  "
        f"AE@10 {m['AE@10']:.2f}  ({bm25_s:.2f} s)"
    )
    print(
        json.dumps(
            {
                "passages": n,
                "build_s": statistics.median(builds),
                "dict_load_s": dict_load,
                "plain_tokenize_s": plain_s,
                "fast_tokenize_s": fast_s,
                "mismatches": mismatches,
                "db_bytes": size,
                "kib_per_passage": size / 1024 / n,
                **m,
            }
        )
    )


if __name__ == "__main__":
    main()
