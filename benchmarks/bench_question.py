"""One question at scale: per-question time with an instant judge, the learned judge cold, and
where the time goes. Prints figures; asserts nothing.

    python benchmarks/bench_question.py --db INDEX [--questions Q.jsonl] [--judge oracle|learned]
        [--code DIR ...]      # checkouts whose workbench/ to run, alternately (default: this one; "." = this one)
        [--rounds 3]          # fresh processes per code, alternated (machines drift 2x within minutes)
        [--limit 100]         # questions (the first opens the index and is reported apart)
        [--profile cprofile|py-spy] [--top 25]

INDEX is built once from `bench_scale.py`'s corpus (its generator, `write_corpus`), e.g.
`sag2wb index corpus-300000.json --db index-300000.sqlite`. Each round starts one process per
code, which opens the index, runs the first question (open + first, reported apart), then the
rest, timing wall and CPU per question; a code's row gives its processes' largest peak RSS
(which counts the pages of the index file SQLite memory-maps) and anonymous RSS at the end.
`--judge oracle` is the instant judge (gold labels); `--judge learned` is the shipped learned
judge with an empty embedding cache (cold: every passage embedded on first sight, as a new
corpus's first questions are). With `--profile cprofile` one extra process (the last code) runs
the questions under cProfile and prints the functions with the most own time and the time per
module (workbench files, sqlite, numpy, the embedder);
`--profile py-spy` records a flame graph SVG with `.venv/bin/py-spy` instead.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import data_arg, need

CHILD = """
import json, os, sys, time
questions_path, db, judge_kind, limit, profile = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
from workbench.index.corpora import load_questions
from workbench.engine import Run
from workbench.index.store import Index
from workbench.params import Params
questions = load_questions(questions_path)[:limit]
spent, embed, embedded = [0.0], [], []  # s in Embedder.embed; per question: those, passages embedded
t, c = time.perf_counter(), time.process_time()
index = Index(db)
if judge_kind == "learned":
    from workbench.judges.learned import LearnedJudge
    judge = LearnedJudge(index, cache_dir=os.environ["BENCH_EMBED_CACHE"])
    make = lambda q: judge
    embedder = judge.extractor.embedder  # its model loaded here: the model load is part of open + first
    embed_texts = embedder.embed
    def timed(texts, progress=None):  # the model's passes, their tokenizing and cache writes
        t = time.perf_counter()
        try:
            return embed_texts(texts, progress)
        finally:
            spent[0] += time.perf_counter() - t
    embedder.embed = timed
else:
    from workbench.judges.lexical import OracleJudge
    make = lambda q: OracleJudge(q.gold)
first = Run(index, questions[0], Params(), make(questions[0])).run()
open_first, open_first_cpu = time.perf_counter() - t, time.process_time() - c
def rest():
    out = []
    for q in questions[1:]:
        t, c, e = time.perf_counter(), time.process_time(), spent[0]
        trace = Run(index, q, Params(), make(q)).run()
        out.append((time.perf_counter() - t, time.process_time() - c, trace))
        embed.append(spent[0] - e)
        embedded.append(trace.stats.get("embedded", 0))
    return out
if profile:
    import cProfile
    prof = cProfile.Profile()
    got = prof.runcall(rest)
    prof.dump_stats(profile)
else:
    got = rest()
wall = [w for w, _, _ in got]
cpu = [c for _, c, _ in got]
import hashlib
digest = hashlib.sha256("\\n".join([first.to_json(stats=False)] + [t.to_json(stats=False) for _, _, t in got]).encode())
import resource
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux; counts the mapped index's pages
anon = 0.0
try:  # the process's own memory, without the index file's pages SQLite memory-maps
    anon = next(float(l.split()[1]) / 1024 for l in open("/proc/self/status") if l.startswith("RssAnon:"))
except (OSError, StopIteration):
    pass
print(json.dumps({"open_first": open_first, "open_first_cpu": open_first_cpu, "wall": wall, "cpu": cpu,
                  "traces": digest.hexdigest(), "embed": embed, "embedded": embedded, "rss": rss, "anon": anon}))
"""


def run_child(code_dir: str | None, args, profile: str = "") -> dict:
    env = dict(os.environ)
    if code_dir:
        env["PYTHONPATH"] = str(Path(code_dir).resolve())
    with tempfile.TemporaryDirectory(prefix="bench-question-emb-") as cache:
        env["BENCH_EMBED_CACHE"] = cache  # cold: a fresh embedding cache per process
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(args.questions), str(args.db), args.judge, str(args.limit), profile],
            capture_output=True,
            text=True,
            env=env,
            cwd=tempfile.gettempdir(),  # the current folder would shadow PYTHONPATH
        )
    if done.returncode != 0:
        sys.exit(f"child failed ({code_dir or 'this checkout'}): {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def p90(xs: list[float]) -> float:
    return sorted(xs)[max(0, int(0.9 * len(xs)) - 1)]


def module_of(filename: str) -> str:
    if "workbench/" in filename:
        return "workbench/" + filename.split("workbench/", 1)[1]
    if filename.startswith("~") or filename.startswith("<"):
        return "builtins"
    for name in ("numpy", "sqlite3", "regex", "jieba", "pyuca", "onnxruntime", "tokenizers"):
        if f"/{name}/" in filename:
            return name
    return "other: " + Path(filename).name


def print_profile(path: str, top: int) -> None:
    import pstats

    stats = pstats.Stats(path)
    raw = stats.stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in raw.values())
    by_module: dict[str, float] = {}
    rows = []
    for (filename, line, name), (_cc, ncalls, tottime, cumtime, _callers) in raw.items():
        where = module_of(filename)
        if where == "builtins":  # C functions: name them (sqlite3 execute, numpy ufuncs, ...)
            where = "builtins: " + name.split(" of ")[0].strip("<>{}")[:60]
        by_module[where] = by_module.get(where, 0.0) + tottime
        rows.append((tottime, cumtime, ncalls, f"{module_of(filename)}:{line} {name}"))
    print(f"\nprofile (cProfile, own time; total {total:.2f} s):")
    print("| module / C function | own s | share |\n|---|---|---|")
    for where, s in sorted(by_module.items(), key=lambda x: -x[1])[:top]:
        print(f"| {where} | {s:.2f} | {100 * s / total:.1f}% |")
    print("\n| function | own s | cumulative s | calls |\n|---|---|---|---|")
    for tottime, cumtime, ncalls, label in sorted(rows, reverse=True)[:top]:
        print(f"| {label} | {tottime:.3f} | {cumtime:.3f} | {ncalls:,} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    data_arg(ap)
    ap.add_argument("--db", required=True, help="an index built from bench_scale.py's corpus")
    ap.add_argument("--questions", default=None, help="questions file (default: DATA/2wiki/questions-dev.jsonl)")
    ap.add_argument("--judge", choices=["oracle", "learned"], default="oracle")
    ap.add_argument(
        "--code", nargs="*", default=["."], help="checkouts to run alternately; ratios are to the first [.]"
    )
    ap.add_argument("--rounds", type=int, default=3, help="processes per code, alternated [3]")
    ap.add_argument("--limit", type=int, default=100, help="questions per process [100]")
    ap.add_argument("--profile", choices=["cprofile", "py-spy"], default=None)
    ap.add_argument("--top", type=int, default=25, help="rows of the profile tables [25]")
    args = ap.parse_args()
    args.questions = Path(args.questions) if args.questions else need(Path(args.data) / "2wiki" / "questions-dev.jsonl")
    codes: list[str | None] = [None if c == "." else c for c in args.code]
    print(f"index {args.db}; judge {args.judge}; {args.limit} questions; load average {os.getloadavg()[0]:.1f}")
    results: dict[str | None, list[dict]] = {c: [] for c in codes}
    for _ in range(args.rounds):
        for code in codes:
            results[code].append(run_child(code, args))
    head = ["code", "open + 1st question s (CPU)", "per question median / p90 ms", "CPU median / p90 ms", "RSS MiB"]
    print("| " + " | ".join([*head, "per process"]) + " |")
    print("|---|---|---|---|---|---|")
    base = None
    for code in codes:
        rs = results[code]
        medians = [statistics.median(r["wall"]) for r in rs]
        cpu = [statistics.median(r["cpu"]) for r in rs]
        per = ", ".join(f"{m * 1000:.0f}/{p90(r['wall']) * 1000:.0f}" for m, r in zip(medians, rs))
        of = statistics.median(r["open_first"] for r in rs)
        ofc = statistics.median(r["open_first_cpu"] for r in rs)
        wall = f"{statistics.median(medians) * 1000:.1f} / {statistics.median(p90(r['wall']) for r in rs) * 1000:.1f}"
        # CPU seconds do not count the time a loaded machine keeps the process waiting
        cpu_ms = f"{statistics.median(cpu) * 1000:.1f} / {statistics.median(p90(r['cpu']) for r in rs) * 1000:.1f}"
        rss = f"{max(r.get('rss', 0.0) for r in rs):.0f} peak, {max(r.get('anon', 0.0) for r in rs):.0f} anon"
        print(f"| {code or 'this checkout'} | {of:.2f} ({ofc:.2f}) | {wall} | {cpu_ms} | {rss} | {per} |")
        if base is None:
            base = (statistics.median(medians), statistics.median(cpu))
        else:
            print(
                f"    ({code or 'this checkout'} / {codes[0] or 'this checkout'}: wall "
                f"{statistics.median(medians) / base[0]:.2f}x, CPU {statistics.median(cpu) / base[1]:.2f}x)"
            )
        same = all(r["traces"] == results[codes[0]][0]["traces"] for r in rs)
        print(f"    (whole traces (canonical JSON, sha256) identical to the first code's in every process: {same})")
        if args.judge == "learned":
            share = [sum(r["embed"]) / sum(r["wall"]) for r in rs]
            print(
                f"    (embedding (Embedder.embed: MiniLM passes, tokenizing, cache writes) per question: median "
                f"{statistics.median(e for r in rs for e in r['embed']) * 1000:.0f} ms wall, "
                f"{statistics.median(share) * 100:.0f}% of the questions' wall time; passages embedded per question: "
                f"median {statistics.median(n for r in rs for n in r['embedded']):.0f})"
            )
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    if args.profile == "cprofile":
        with tempfile.TemporaryDirectory() as tmp:
            out = str(Path(tmp) / "question.prof")
            run_child(codes[-1], args, profile=out)
            print_profile(out, args.top)
    elif args.profile == "py-spy":
        spy = Path(sys.executable).parent / "py-spy"
        svg = Path(tempfile.gettempdir()) / f"bench-question-{args.judge}.svg"
        with tempfile.TemporaryDirectory(prefix="bench-question-emb-") as cache:
            env = dict(os.environ, BENCH_EMBED_CACHE=cache)
            if codes[-1]:
                env["PYTHONPATH"] = str(Path(codes[-1]).resolve())
            cmd = [str(spy), "record", "-o", str(svg), "--", sys.executable, "-c", CHILD]
            cmd += [str(args.questions), str(args.db), args.judge, str(args.limit), ""]
            subprocess.run(cmd, env=env, cwd=tempfile.gettempdir(), capture_output=True)
        print(f"flame graph: {svg}")


if __name__ == "__main__":
    main()
