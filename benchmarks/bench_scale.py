"""The workbench at the paper's scale on one machine: synthetic supersets of 2Wiki, built,
opened, queried and updated. Prints figures; asserts nothing.

    python benchmarks/bench_scale.py [--sizes 6000,60000,300000,600000] [--work /tmp/sag2wb-scale]
        [--code DIR]   # another checkout's workbench/ (e.g. the code before this change)
        [--peer bm25s] # also index the same texts with bm25s (`pip install .[bench]`), right after
                       # each build, and print the ratio of the two build times
        [--peer bm25s,fts5]  # and SQLite FTS5 alone: the floor of any build that keeps an FTS5
                       # index (the same contentless 3-column table, unicode61, no tokenizer of ours)

Each corpus is the 6,119 2Wiki originals (so the 100 dev questions keep their gold) plus
distractors: copies of random originals with ~30% of the words replaced (by words of the
corpus, or by new made-up words, so the vocabulary and the postings grow), titles made
unique. Seeded: the same sizes give the same files. For each size, in fresh processes:
build (`sag2wb index`: wall s, passages/s, peak RSS of the build process and of its
largest worker), DB size, open + first question (index open, tokenizer dictionary load
and one question with the oracle judge, which costs nothing), per-question median and
p90 over the 100 dev questions (oracle judge), and the same after a one-passage update
(`sag2wb index --add`), when the code has it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import data_arg, need

WORD_SHARE = 0.30  # replaced words per distractor
NEW_WORD_SHARE = 0.15  # of the replacements: made-up words (the vocabulary grows with the corpus)
SEED = 20261130


def write_corpus(originals: list[dict], size: int, path: Path, seed: int = SEED) -> None:
    """Originals first, then size - len(originals) distractors; written as a JSON list
    one item at a time."""
    rng = random.Random(seed)
    vocabulary = sorted({w for item in originals for w in item["text"].split()})
    syllables = ["ka", "lo", "mer", "tin", "sa", "vor", "ul", "pe", "dri", "an", "zo", "quel", "bri", "os", "te"]
    tmp = path.with_suffix(".partial")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("[\n")
        for i in range(size):
            if i < len(originals):
                item = originals[i]
            else:
                source = originals[rng.randrange(len(originals))]
                words = source["text"].split()
                for k in range(len(words)):
                    if rng.random() < WORD_SHARE:
                        if rng.random() < NEW_WORD_SHARE:
                            words[k] = "".join(rng.choice(syllables) for _ in range(rng.randint(2, 4)))
                        else:
                            words[k] = rng.choice(vocabulary)
                item = {"title": f"{source['title']} ({i})", "text": " ".join(words)}
            f.write(("" if i == 0 else ",\n") + json.dumps(item, ensure_ascii=False))
        f.write("\n]\n")
    os.replace(tmp, path)


BUILD = """
import json, resource, sys, time
t = time.perf_counter()
from workbench.cli.main import main
rc = main(["index", sys.argv[1], "--db", sys.argv[2]] + sys.argv[3:])
wall = time.perf_counter() - t
self, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = self.ru_utime + self.ru_stime + kids.ru_utime + kids.ru_stime
print(json.dumps({"rc": rc, "wall": wall, "cpu": cpu, "rss_mib": self.ru_maxrss / 1024,
                  "worker_rss_mib": kids.ru_maxrss / 1024}))
"""

QUERY = """
import json, statistics, sys, time
t0 = time.perf_counter()
from workbench.index.corpora import load_questions
from workbench.engine import Run
from workbench.index.store import Index
from workbench.judges.lexical import OracleJudge
from workbench.params import Params
questions = load_questions(sys.argv[2])
t = time.perf_counter()
index = Index(sys.argv[1])
q = questions[0]
first = Run(index, q, Params(), OracleJudge(q.gold)).run()
open_first = time.perf_counter() - t
open_first_cpu = time.process_time()
times, cpu, found = [], [], 0
for q in questions[1:]:
    t, c = time.perf_counter(), time.process_time()
    trace = Run(index, q, Params(), OracleJudge(q.gold)).run()
    times.append(time.perf_counter() - t)
    cpu.append(time.process_time() - c)
    found += len(set(trace.documents()[:10]) & set(q.gold))
print(json.dumps({"open_first": open_first, "open_first_cpu": open_first_cpu, "cpu_median": statistics.median(cpu),
                  "median": statistics.median(times),
                  "p90": sorted(times)[int(0.9 * len(times)) - 1], "gold_in_top10": found}))
"""


PEER_BM25S = """
import json, resource, sys, time
t0 = time.perf_counter()
import bm25s
with open(sys.argv[1], encoding="utf-8") as f:
    texts = [item["title"] + "\\n" + item["text"] for item in json.load(f)]
t = time.perf_counter()
tokens = bm25s.tokenize(texts, stopwords="en", show_progress=False)
t_tok = time.perf_counter() - t
index = bm25s.BM25()
index.index(tokens, show_progress=False)
t_index = time.perf_counter() - t
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"tokenize": t_tok, "index": t_index, "total": time.perf_counter() - t0,
                  "cpu": usage.ru_utime + usage.ru_stime, "rss_mib": usage.ru_maxrss / 1024}))
"""


# The floor under any build that keeps SQLite FTS5 as its candidate index (SPEC §1): the same
# contentless title/heading/body table as ours, the raw texts given to unicode61, one transaction,
# no journal: no tokenizer, positions, postings or digests of ours.
PEER_FTS5 = """
import json, os, resource, sqlite3, sys, time
t0 = time.perf_counter()
with open(sys.argv[1], encoding="utf-8") as f:
    rows = [(i, item["title"], "", item["text"]) for i, item in enumerate(json.load(f), 1)]
path = sys.argv[2]
t = time.perf_counter()
db = sqlite3.connect(path, isolation_level=None)
db.execute("PRAGMA journal_mode=OFF")
db.execute("PRAGMA synchronous=OFF")
db.execute("CREATE VIRTUAL TABLE fts USING fts5(title, heading, body, content='')")
db.execute("BEGIN")
db.executemany("INSERT INTO fts (rowid, title, heading, body) VALUES (?, ?, ?, ?)", rows)
db.execute("COMMIT")
db.close()
t_index = time.perf_counter() - t
size = os.path.getsize(path)
os.unlink(path)
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"index": t_index, "total": time.perf_counter() - t0, "bytes": size,
                  "cpu": usage.ru_utime + usage.ru_stime, "rss_mib": usage.ru_maxrss / 1024}))
"""
PEERS = ("bm25s", "fts5")


def child(code: str, *args: str, env=None, cwd=None) -> dict:
    # run outside the checkout: the current folder would shadow PYTHONPATH (--code)
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=cwd)
    if done.returncode != 0 or not done.stdout.strip():
        return {"error": (done.stderr.strip() or done.stdout.strip())[-400:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def report_peer(name: str, path: Path, work: Path, build: dict) -> None:
    """Index `path`'s texts with a peer just after our build and print both ratios. A peer that
    fails is reported as failed, never as a figure."""
    if name == "bm25s":
        peer = child(PEER_BM25S, str(path), cwd=work)
        what = "bm25s on the same texts, just after: tokenize + index"
    else:
        peer = child(PEER_FTS5, str(path), str(work / f"peer-fts5-{os.getpid()}.sqlite"), cwd=work)
        what = "SQLite FTS5 alone on the same texts, just after: insert"
    if "error" in peer:
        print(f"    ({name} failed: {peer['error']})", file=sys.stderr)
        return
    print(
        f"    ({what} {peer['index']:.1f} s (CPU {peer['cpu']:.0f} s, {peer['rss_mib']:.0f} MiB, "
        f"{peer['total']:.1f} s with reading the JSON); sag2wb index / {name}: "
        f"{build['wall'] / peer['index']:.2f}x wall, {build['cpu'] / peer['cpu']:.2f}x CPU)",
        file=sys.stderr,
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    data_arg(ap)
    ap.add_argument(
        "--sizes",
        default="6000,60000,300000,600000",
        help="comma-separated corpus sizes (CI: 6000) [6000,60000,300000,600000]",
    )
    ap.add_argument("--work", default="/tmp/sag2wb-scale", help="folder for corpora and indexes (reused)")
    ap.add_argument("--code", default=None, help="a checkout whose workbench/ to measure instead of this one")
    ap.add_argument(
        "--peer",
        default="",
        help="index the same texts with peers, side by side, comma-separated: bm25s (the fastest Python BM25 "
        "indexer), fts5 (SQLite FTS5 alone, the floor of a build that keeps FTS5)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the indexes (corpora are always kept)")
    ap.add_argument("--build-only", action="store_true", help="only the build (and the peer): no questions, no update")
    args = ap.parse_args()
    peers = [p for p in args.peer.split(",") if p]
    unknown = sorted(set(peers) - set(PEERS))
    if unknown:
        ap.error(f"--peer: unknown {', '.join(unknown)} (known: {', '.join(PEERS)})")
    corpus = need(Path(args.data) / "2wiki" / "corpus.json")
    questions = need(Path(args.data) / "2wiki" / "questions-dev.jsonl")
    originals = json.loads(corpus.read_text(encoding="utf-8"))
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if args.code:
        env["PYTHONPATH"] = str(Path(args.code).resolve())
    code_name = args.code or "this checkout"
    print(f"code: {code_name}; machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
    print(
        "Wall times on a shared machine; CPU seconds beside them (build: all processes; open + first "
        "question: the process, from start, imports included)."
    )
    print(
        "| passages | build s (CPU s) | passages/s | peak RSS build (worker) | DB | open + 1st question (CPU) | "
        "per question median / p90 (CPU median) | one-passage update | after update: median / p90 |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for size in [int(s) for s in args.sizes.split(",")]:
        size = max(size, len(originals))
        path = work / f"corpus-{size}.json"
        if not path.exists():
            t = time.perf_counter()
            write_corpus(originals, size, path)
            print(f"(wrote {path} in {time.perf_counter() - t:.1f} s)", file=sys.stderr)
        db = work / f"index-{size}-{'other' if args.code else 'this'}.sqlite"
        if db.exists():
            db.unlink()
        build = child(BUILD, str(path), str(db), env=env, cwd=work)
        if "error" in build:
            print(f"| {size:,} | build failed: {build['error']} |")
            continue
        for peer_name in peers:
            report_peer(peer_name, path, work, build)
        if args.build_only:
            print(
                f"| {size:,} | {build['wall']:.1f} ({build['cpu']:.0f}) | {size / build['wall']:,.0f} | "
                f"{build['rss_mib']:.0f} MiB ({build['worker_rss_mib']:.0f} MiB) | {db.stat().st_size / 2**20:.0f} MiB "
                f"| - | - | - | - | (CPU {build['cpu']:.1f} s, load average {os.getloadavg()[0]:.1f})",
                flush=True,
            )
            if not args.keep:
                db.unlink(missing_ok=True)
            continue
        query = child(QUERY, str(db), str(questions), env=env, cwd=work)
        update, after = "-", {}
        extra = work / f"extra-{size}.json"
        extra.write_text(json.dumps([{"title": f"Added passage {size}", "text": "An added passage about Lothair II."}]))
        t = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "workbench.cli", "index", str(path), "--db", str(db), "--add", str(extra)],
            capture_output=True,
            text=True,
            env=env,
            cwd=work,
        )
        if done.returncode == 0:
            update = f"{time.perf_counter() - t:.1f} s"
            after = child(QUERY, str(db), str(questions), env=env, cwd=work)

        def ms(r):
            return (
                f"{r['median'] * 1000:.0f} / {r['p90'] * 1000:.0f} ms ({r['cpu_median'] * 1000:.0f} ms)"
                if "median" in r
                else r.get("error", "-")
            )

        print(
            f"| {size:,} | {build['wall']:.1f} ({build['cpu']:.0f}) | {size / build['wall']:,.0f} | "
            f"{build['rss_mib']:.0f} MiB ({build['worker_rss_mib']:.0f} MiB) | {db.stat().st_size / 2**20:.0f} MiB | "
            f"{query.get('open_first', float('nan')):.2f} s ({query.get('open_first_cpu', float('nan')):.2f} s) | "
            f"{ms(query)} | {update} | {ms(after) if after else '-'} |",
            flush=True,
        )
        if "gold_in_top10" in query:
            print(
                f"    (gold passages in the top 10 over 99 questions: {query['gold_in_top10']}"
                f"{', after update: ' + str(after['gold_in_top10']) if 'gold_in_top10' in after else ''};"
                f" load average now {os.getloadavg()[0]:.1f})",
                file=sys.stderr,
            )
        if not args.keep:
            db.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
