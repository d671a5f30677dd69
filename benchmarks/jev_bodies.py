"""Are the JEV client's request bodies byte-identical to another tree's? (issue 33: a change to the
client's CPU must not change a request byte). Runs `sag2wb eval --judge jev` on the first N 2Wiki
dev questions in this tree and in --old-tree against one `judge-server --judge lexical` of this
tree, records the sha256 of every body as the event loop hands it to the HTTP threads (their
order among a round's concurrent requests is the threads' race, so bodies are taken before it),
and compares the two lists, out.json and the cache's entries.

    .venv/bin/python benchmarks/jev_bodies.py --db 2wiki.sqlite --old-tree OLD [--questions 100]
"""

from __future__ import annotations

import argparse
import filecmp
import hashlib
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_jev_cpu import ROOT, Server

RECORDER = r"""
import atexit, hashlib, os, sys
sys.path.insert(0, os.getcwd())
import workbench.judges.jev.client as client
shas, post = [], client._HTTPThreads.post
async def recorded(self, url, content, *a, **kw):
    shas.append(hashlib.sha256(content).hexdigest())
    return await post(self, url, content, *a, **kw)
client._HTTPThreads.post = recorded
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write("\n".join(shas) + "\n"))
sys.argv = ["sag2wb", *sys.argv[1:]]
from workbench.cli.main import main
sys.exit(main())
"""


def cache_digest(folder: Path) -> tuple[int, str]:
    with sqlite3.connect(folder / "cache.db") as db:
        rows = sorted(db.execute("SELECT key, value FROM Cache"))
    return len(rows), hashlib.sha256(repr(rows).encode()).hexdigest()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True, type=Path)
    ap.add_argument("--old-tree", required=True, type=Path)
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "2wiki"))
    ap.add_argument("--questions", type=int, default=100)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="jev-bodies-"))
    qfile = tmp / "questions.jsonl"
    qfile.write_text(
        "\n".join((Path(args.data) / "questions-dev.jsonl").read_text().splitlines()[: args.questions]) + "\n"
    )
    server = Server("lexical", args.db)
    try:
        for side, tree in (("new", ROOT), ("old", args.old_tree)):
            record = [sys.executable, "-c", RECORDER, str(tmp / f"bodies-{side}.txt")]
            evaluate = ["eval", "--db", str(args.db), "--questions", str(qfile), "--out", str(tmp / f"out-{side}.json")]
            jev = ["--judge", "jev", "--jev-endpoint", server.url, "--cache-dir", str(tmp / f"cache-{side}")]
            flags = ["--force", "--quiet", "--concurrency", "1"]
            subprocess.run([*record, *evaluate, *flags, *jev], cwd=tree, check=True)
    finally:
        server.close()
    new, old = ((tmp / f"bodies-{s}.txt").read_text().split() for s in ("new", "old"))
    print(f"{len(new)} / {len(old)} request bodies; identical in order: {new == old}")
    print(f"out.json identical: {filecmp.cmp(tmp / 'out-new.json', tmp / 'out-old.json', shallow=False)}")
    caches = [cache_digest(tmp / f"cache-{s}") for s in ("new", "old")]
    print(f"cache entries {caches[0][0]} / {caches[1][0]}; identical: {caches[0] == caches[1]}")
    return 0 if new == old and caches[0] == caches[1] else 1


if __name__ == "__main__":
    sys.exit(main())
