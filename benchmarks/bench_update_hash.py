"""What a folder update pays to see every edit: deciding which files changed by size and
mtime only (the old rule, blind to `cp -p` / `rsync -a` / `touch -r` edits) vs. hashing
every file whose size matches (`workbench.index.update.compare_files`), at the paper's scale.
Prints figures; asserts nothing.

    python benchmarks/bench_update_hash.py [--size 600000] [--per-file 1] [--repeat 5]
        [--work /tmp/sag2wb-update-hash]

The corpus is bench_scale.py's (the 2Wiki originals plus seeded distractors), written as a
folder of .md files, `--per-file` passages each (1: one file per passage, the most files).
Both rules are timed on the same unchanged folder against the manifest a build records
(size, mtime, sha256), with a warm page cache (the figure an update repeated in a session
sees; a cold cache adds the disk's read time for the bytes hashed, printed below). Each
figure is the median of `--repeat` runs; the folder listing both rules share is timed apart.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import data_arg, need
from bench_scale import write_corpus

from workbench.index.corpora import folder_files
from workbench.index.update import compare_files
from workbench.safeio import file_sha256


def write_folder(corpus: Path, folder: Path, per_file: int) -> None:
    """The corpus's passages as .md files (a heading and the text), `per_file` to a file,
    in subfolders of 1,000 files; skipped when the folder is complete."""
    done = folder / ".complete"
    if done.exists():
        return
    import ijson

    with open(corpus, "rb") as f:
        buffer: list[str] = []
        n = 0
        for item in ijson.items(f, "item"):
            buffer.append(f"# {item['title']}\n\n{item['text']}\n")
            if len(buffer) == per_file:
                path = folder / f"{n // 1000:04d}" / f"{n:07d}.md"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text("\n".join(buffer), encoding="utf-8")
                buffer, n = [], n + 1
        if buffer:
            path = folder / f"{n // 1000:04d}" / f"{n:07d}.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(buffer), encoding="utf-8")
    done.write_text("")


def stat_only(root: Path, files: list[Path], known: dict) -> list[str]:
    """The old rule: a file is unchanged when its size and mtime are the manifest's."""
    different = []
    for file in files:
        rel = file.relative_to(root).as_posix()
        st = file.stat()
        before = known.get(rel)
        if not before or before[:2] != (st.st_size, st.st_mtime_ns):
            different.append(rel)
    return different


def median_seconds(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    data_arg(ap)
    ap.add_argument("--size", type=int, default=600_000)
    ap.add_argument("--per-file", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--work", default="/tmp/sag2wb-update-hash")
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / f"corpus-{args.size}.json"
    if not corpus.exists():
        originals = json.loads(need(Path(args.data) / "2wiki" / "corpus.json").read_text(encoding="utf-8"))
        write_corpus(originals, args.size, corpus)
    folder = work / f"folder-{args.size}-{args.per_file}"
    t = time.perf_counter()
    write_folder(corpus, folder, args.per_file)
    print(f"folder {folder} ready in {time.perf_counter() - t:.1f} s")

    files = folder_files(folder)
    total = sum(f.stat().st_size for f in files)
    known = {}
    for f in files:  # the manifest a build records
        st = f.stat()
        known[f.relative_to(folder).as_posix()] = (st.st_size, st.st_mtime_ns, file_sha256(f))
    listing = median_seconds(lambda: folder_files(folder), args.repeat)
    stat = median_seconds(lambda: stat_only(folder, files, known), args.repeat)
    hashed = median_seconds(lambda: compare_files(folder, files, known), args.repeat)
    t = time.perf_counter()
    digest_only = [file_sha256(f) for f in files[: min(len(files), 20_000)]]
    per_file_hash = (time.perf_counter() - t) / len(digest_only)
    assert not stat_only(folder, files, known) and not compare_files(folder, files, known).different
    size = f"{total / 2**20:.0f} MiB"
    print(f"{args.size} passages in {len(files)} files ({size}), median of {args.repeat} runs, warm cache")
    print(f"  listing the folder (both rules)     {listing:7.2f} s")
    print(f"  decide by size+mtime (old, blind)   {stat:7.2f} s")
    print(f"  decide by size+sha256 (every edit)  {hashed:7.2f} s   ({hashed / max(stat, 1e-9):.1f}x the stat pass)")
    print(f"  update total, old vs new            {listing + stat:7.2f} s vs {listing + hashed:.2f} s")
    print(
        f"  sha256 alone: {per_file_hash * 1e6:.0f} us per file; {total / 2**20:.0f} MiB read to hash on a cold cache"
    )


if __name__ == "__main__":
    main()
