"""GAR-BM25's corpus graph (paper B.3): build time and size at the 2Wiki corpus (6k passages)
and at 600k (the synthetic superset of benchmarks/bench_scale.py). Prints figures; asserts
nothing.

    python benchmarks/bench_feedback.py [--sizes 6119,600000] [--sample 2000] [--work /tmp/sag2wb-scale]

Per size: the index is built (or reused from --work), then the graph. Up to --full-up-to
passages (default 60,000) the whole graph is built and stored (wall s, passages/s, the
.npz beside the index, in-memory arrays). Above that, the graph of a seeded random sample of
--sample passages is built against the full index (every neighbour query runs over all the
passages, so the per-passage cost is the real one) and the whole build is extrapolated as
sample seconds x N / sample; the stored size is extrapolated from the 6k bytes per passage.
The printed rows say which figures are measured and which extrapolated. RM3 needs no
precomputation (its cost is per question: also printed, over the 100 dev questions).

    python benchmarks/bench_feedback.py --graph [--sizes 300000] [--repeat 1] [--sample 200]

`--graph`: the corpus graph against the index build, side by side in the same minutes (ratios
of wall and of CPU time: on a loaded machine the wall ratio moves with the load), each
in a fresh process: `sag2wb index` (wall s, CPU s, peak RSS of the process and of its largest
worker), then `build_graph` (all passages scored at once; wall s, its stages, peak RSS of the
process and of its largest worker), the ratio graph/build, and the per-query definition
(`build_graph_by_queries`) on a --sample of passages, extrapolated, with its lists compared
to the new graph's (same neighbours and scores, bit for bit). Repeated --repeat times
(medians printed when more than one).

    python benchmarks/bench_feedback.py --graph --sizes 300000 --code /work/base,.

`--code A,B`: the graph by each of these checkouts (PYTHONPATH=checkout, in that order, then
reversed on the next run) on the same index, built once per run by the code running this
script: a row per checkout, each ratio against that run's build, the CPU ratio to the first
checkout, and whether each checkout's arrays equal the first's byte for byte. A checkout may be a
symlink (resolved when its graph starts).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import data_arg, need, peak_rss_mib
from bench_scale import write_corpus

from workbench.feedback import GraphParams, build_graph, corpus_graph, graph_path, rm3_expansion
from workbench.index import Index, load_questions

GRAPH = """
import json, resource, sys, time
import numpy as np
t = time.perf_counter()
from workbench.feedback.graph import build_graph
from workbench.index import Index
graph = build_graph(Index(sys.argv[1]), progress=False)
wall = time.perf_counter() - t
np.savez(sys.argv[2], ids=graph.ids, neighbours=graph.neighbours, scores=graph.scores)
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall": wall, "cpu": me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime,
                  "rss_mib": me.ru_maxrss / 1024, "worker_rss_mib": kids.ru_maxrss / 1024,
                  "stages": graph.meta["stages"], "edges": graph.edges()}))
"""

BY_QUERIES = """
import json, random, sys, time
import numpy as np
from workbench.feedback.graph import build_graph_by_queries
from workbench.index import Index
index = Index(sys.argv[1]).warm()
sample = sorted(random.Random(20261015).sample(sorted(index.documents), min(int(sys.argv[3]), index.N)))
t = time.perf_counter()
old = build_graph_by_queries(index, only=sample, progress=False)
took = time.perf_counter() - t
new = np.load(sys.argv[2])
rows = np.searchsorted(new["ids"], old.ids)
same = bool(np.array_equal(new["neighbours"][rows], old.neighbours)
            and np.array_equal(new["scores"][rows].view(np.int64), old.scores.view(np.int64)))
print(json.dumps({"sample": len(sample), "seconds": took, "extrapolated": took * index.N / len(sample),
                  "same": same}))
"""


def graph_main(args, originals: list[dict], corpus: Path, work: Path) -> None:
    """The --graph rows: index build and corpus graph side by side (see the module docstring)."""
    import statistics

    from bench_scale import BUILD, child

    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start; params {GraphParams()}")
    print(
        "| passages | run | build s (CPU s, RSS MiB, worker) | graph s (CPU s, RSS MiB, worker) | graph/build "
        "| graph stages s | per-query graph s (sample, extrapolated) | same lists |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for size in [int(s) for s in args.sizes.split(",")]:
        size = max(size, len(originals))
        path = corpus if size == len(originals) else work / f"corpus-{size}.json"
        if not path.exists():
            write_corpus(originals, size, path)
        codes = [c for c in (args.code or "").split(",") if c] or [None]
        ratios: dict[int, list[float]] = {n: [] for n in range(len(codes))}
        for run in range(args.repeat):
            db = work / f"graph-index-{size}.sqlite"
            for old in work.glob(f"{db.name}*"):
                old.unlink()
            build = child(BUILD, str(path), str(db), cwd=work)
            order = list(enumerate(codes)) if run % 2 == 0 else list(enumerate(codes))[::-1]
            graphs: dict[int, dict] = {}
            for n, code in order:
                env = None if code is None else {**os.environ, "PYTHONPATH": str(Path(code).resolve())}
                npz = work / f"graph-{size}-{n}.npz"
                print(f"(graph by {code or 'this code'}, load {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)
                graphs[n] = child(GRAPH, str(db), str(npz), cwd=work, env=env)
                graphs[n]["load"] = os.getloadavg()[0]
            for n, code in enumerate(codes):
                graph, npz = graphs[n], work / f"graph-{size}-{n}.npz"
                label = f"{run + 1}" + ("" if code is None else f" {code}")
                if "error" in build or "error" in graph:
                    print(f"| {size:,} | {label} | {build.get('error', '')} | {graph.get('error', '')} | | | | |")
                    continue
                check = child(BY_QUERIES, str(db), str(npz), str(args.sample), cwd=work, env=None)
                ratio = graph["wall"] / build["wall"]
                cpu_ratio = graph["cpu"] / max(build["cpu"], 1e-9)
                ratios[n].append(ratio)
                stages = ", ".join(f"{k} {v:.0f}" for k, v in graph["stages"].items())
                versus = ""
                if n > 0 and "cpu" in graphs[0]:
                    equal = _same_arrays(work / f"graph-{size}-0.npz", npz)
                    versus = f"; CPU {graph['cpu'] / graphs[0]['cpu']:.2f}x the first's, arrays equal: {equal}"
                print(
                    f"| {size:,} | {label} | {build['wall']:.0f} ({build['cpu']:.0f}, {build['rss_mib']:.0f}, "
                    f"{build['worker_rss_mib']:.0f}) | {graph['wall']:.0f} ({graph['cpu']:.0f}, "
                    f"{graph['rss_mib']:.0f}, {graph['worker_rss_mib']:.0f}) | {ratio:.2f} (CPU {cpu_ratio:.2f}) "
                    f"| {stages}; load at its end {graph['load']:.1f}{versus} "
                    f"| {check.get('extrapolated', 0):,.0f} "
                    f"({check.get('sample')} in {check.get('seconds', 0):.0f} s) | {check.get('same')} |",
                    flush=True,
                )
        for n, code in enumerate(codes):
            if len(ratios[n]) > 1:
                median = statistics.median(ratios[n])
                print(f"| {size:,} | median of {len(ratios[n])} {code or ''} | | | {median:.2f} | | | |")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


def _same_arrays(a: Path, b: Path) -> bool:
    import numpy as np

    with np.load(a) as x, np.load(b) as y:
        return sorted(x.files) == sorted(y.files) and all(
            x[k].dtype == y[k].dtype and x[k].tobytes() == y[k].tobytes() for k in x.files
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    data_arg(ap)
    ap.add_argument("--sizes", default="6119,600000", help="comma-separated corpus sizes [6119,600000]")
    ap.add_argument("--work", default="/tmp/sag2wb-scale", help="folder for corpora and indexes (reused)")
    ap.add_argument("--sample", type=int, default=2000, help="passages timed above --full-up-to [2000]")
    ap.add_argument("--full-up-to", type=int, default=60000, help="largest size whose whole graph is built")
    ap.add_argument("--graph", action="store_true", help="the corpus graph against the index build (see above)")
    ap.add_argument("--repeat", type=int, default=1, help="--graph: runs per size [1]")
    ap.add_argument("--code", help="--graph: comma-separated checkouts whose graphs are timed side by side")
    args = ap.parse_args()
    corpus = need(Path(args.data) / "2wiki" / "corpus.json")
    originals = json.loads(corpus.read_text(encoding="utf-8"))
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if args.graph:
        graph_main(args, originals, corpus, work)
        return
    questions = load_questions(need(Path(args.data) / "2wiki" / "questions-dev.jsonl"))
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start; params {GraphParams()}")
    print(
        "| passages | index build s | graph: measured | graph build s | passages/s | edges | .npz MiB "
        "| RM3 ms/question |"
    )
    print("|---|---|---|---|---|---|---|---|")
    per_passage_bytes = None
    for size in [int(s) for s in args.sizes.split(",")]:
        size = max(size, len(originals))
        path = corpus if size == len(originals) else work / f"corpus-{size}.json"
        if not path.exists():
            t = time.perf_counter()
            write_corpus(originals, size, path)
            print(f"(wrote {path} in {time.perf_counter() - t:.1f} s)", file=sys.stderr)
        db = work / f"feedback-index-{size}.sqlite"
        build_s = "reused"
        if not db.exists():
            t = time.perf_counter()
            Index.build(path, db, progress=None)
            build_s = f"{time.perf_counter() - t:.1f}"
        index = Index(db).warm()
        t = time.perf_counter()
        for q in questions:
            rm3_expansion(index, q.question)
        rm3_ms = (time.perf_counter() - t) * 1000 / len(questions)
        if size <= args.full_up_to:
            graph_path(index).unlink(missing_ok=True)
            t = time.perf_counter()
            graph = corpus_graph(index, progress=None)
            seconds = time.perf_counter() - t  # build + store
            mib = graph_path(index).stat().st_size / 2**20
            per_passage_bytes = graph_path(index).stat().st_size / index.N
            measured, edges = f"all {index.N:,}", f"{graph.edges():,}"
        else:
            sample = sorted(random.Random(20261015).sample(sorted(index.documents), min(args.sample, index.N)))
            t = time.perf_counter()
            part = build_graph(index, only=sample, progress=None)
            took = time.perf_counter() - t
            seconds = took * index.N / len(sample)
            mib = (per_passage_bytes or 0) * index.N / 2**20
            measured = f"sample {len(sample):,} in {took:.1f} s; rest extrapolated"
            edges = f"~{part.edges() * index.N // len(sample):,} (extrapolated)"
        rate = index.N / seconds
        size_text = f"{mib:.2f}" + ("" if size <= args.full_up_to else " (extrapolated)")
        print(
            f"| {index.N:,} | {build_s} | {measured} | {seconds:,.1f} | {rate:,.0f} | {edges} | {size_text} "
            f"| {rm3_ms:.1f} |"
        )
        index.close()
    print(f"peak RSS {peak_rss_mib():.0f} MiB; load average {os.getloadavg()[0]:.1f} at the end")
    print("(RM3 ms/question: the mean over the 100 dev questions, not separated from other work's load)")


if __name__ == "__main__":
    main()
