"""A no-change folder update beside a bare `os.scandir` + `stat` walk of the same tree, at
50k and 600k files (issue 33). Prints figures; asserts nothing.

    python benchmarks/bench_update_hash.py [--sizes 50000 600000] [--repeat 3]
        [--work /tmp/sag2wb-update-hash] [--old /tmp/old-s2]

The folder is bench_scale.py's corpus (the 2Wiki originals plus seeded distractors) written
as .md files, one passage each, in subfolders of 1,000; it and its index (`sag2wb index
FOLDER --db DB`) are made once and kept in `--work`. Then, in turns, `--repeat` times: the
bare walk (os.scandir, one `stat` per file, nothing else), `sag2wb index FOLDER --db DB` as a
process on the unchanged folder (its whole time: start-up, the provenance check of the DB,
the walk, the decision, the report; and its peak RSS), and the decision alone in this
process (`update_folder`). Medians, warm page cache; each figure as wall seconds and as CPU seconds
(user + system: steadier than wall time on a shared machine). The sha256 of the whole DB is timed
once: what a provenance check pays when it must hash. `--old`: a checkout of the code before
(`git worktree add /tmp/old-s2 2cc047c`); its no-change update of the same folder (its own
index, built once) is timed the same way, in turns with this code's, for sizes up to `--old-max`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, data_arg, need
from bench_scale import write_corpus

from workbench.index.update import update_folder
from workbench.safeio import file_sha256


def write_folder(corpus: Path, folder: Path) -> None:
    """The corpus's passages as .md files (a heading and the text), one to a file, in
    subfolders of 1,000 files; skipped when the folder is complete."""
    done = folder / ".complete"
    if done.exists():
        return
    import ijson

    with open(corpus, "rb") as f:
        for n, item in enumerate(ijson.items(f, "item")):
            path = folder / f"{n // 1000:04d}" / f"{n:07d}.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"# {item['title']}\n\n{item['text']}\n", encoding="utf-8")
    done.write_text("")


def bare_walk(root: str) -> int:
    """Every entry of the tree listed and every file stat-ed once: the floor an update stands on."""
    n, pending = 0, [root]
    while pending:
        with os.scandir(pending.pop()) as listing:
            for entry in listing:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                else:
                    entry.stat()
                    n += 1
    return n


def run_process(argv: list[str], env: dict | None = None) -> tuple[float, float, str, float]:
    """Wall seconds, peak RSS (MiB), stdout and CPU seconds (user + system) of one process."""
    t = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    out = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - t
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({proc.returncode}):\n{out}")
    return seconds, usage.ru_maxrss / 1024, out, usage.ru_utime + usage.ru_stime


# -P: the code comes from PYTHONPATH (`env_for`), never from the current folder
SAG2WB = [sys.executable, "-P", "-c", "import sys; from workbench.cli.main import main; sys.exit(main())"]


def env_for(code: Path) -> dict:
    return {**os.environ, "PYTHONPATH": str(code)}


def build_once(code: Path, folder: Path, db: Path) -> None:
    marker = db.with_name(db.name + ".complete")
    if marker.exists():
        return
    t = time.perf_counter()
    seconds, rss, _, _ = run_process([*SAG2WB, "index", str(folder), "--db", str(db)], env_for(code))
    marker.write_text("")
    print(f"  built {db} in {seconds:.0f} s (peak RSS {rss:.0f} MiB), {time.perf_counter() - t:.0f} s")


def median(values: list[float]) -> float:
    return statistics.median(values)


def main() -> None:
    ap = argparse.ArgumentParser()
    data_arg(ap)
    ap.add_argument("--sizes", type=int, nargs="+", default=[50_000, 600_000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--work", default="/tmp/sag2wb-update-hash")
    ap.add_argument("--old", default=None, help="a checkout of the old code (git worktree add DIR 2cc047c)")
    ap.add_argument("--old-max", type=int, default=50_000, help="largest size the old code is timed at")
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    originals = None
    for size in args.sizes:
        corpus = work / f"corpus-{size}.json"
        if not corpus.exists():
            if originals is None:
                originals = json.loads(need(Path(args.data) / "2wiki" / "corpus.json").read_text(encoding="utf-8"))
            write_corpus(originals, size, corpus)
        folder = work / f"folder-{size}"
        write_folder(corpus, folder)
        db = work / f"index-{size}.sqlite"
        build_once(REPO, folder, db)
        old_db = work / f"index-{size}-old.sqlite"
        old = Path(args.old) if args.old and size <= args.old_max else None
        if old is not None:
            build_once(old, folder, old_db)
        walk, process, rss, decide, old_process, old_rss = [], [], [], [], [], []
        walk_cpu, process_cpu, decide_cpu, old_cpu = [], [], [], []
        out = ""
        for _ in range(args.repeat):  # in turns, so a busy minute weighs on each the same
            t, c = time.perf_counter(), time.process_time()
            files = bare_walk(str(folder))
            walk.append(time.perf_counter() - t)
            walk_cpu.append(time.process_time() - c)
            seconds, peak, out, cpu = run_process([*SAG2WB, "index", str(folder), "--db", str(db)], env_for(REPO))
            process.append(seconds)
            process_cpu.append(cpu)
            rss.append(peak)
            t, c = time.perf_counter(), time.process_time()
            changes = update_folder(db, folder)
            decide.append(time.perf_counter() - t)
            decide_cpu.append(time.process_time() - c)
            assert not (changes.added or changes.changed or changes.removed)
            if old is not None:
                seconds, peak, _, cpu = run_process([*SAG2WB, "index", str(folder), "--db", str(old_db)], env_for(old))
                old_process.append(seconds)
                old_cpu.append(cpu)
                old_rss.append(peak)
        t = time.perf_counter()
        file_sha256(db)
        db_hash = time.perf_counter() - t
        w, wc = median(walk), median(walk_cpu)
        print(f"{size} passages in {files} files, median of {args.repeat} runs, warm cache, load {os.getloadavg()}")
        print(f"  {'':38} {'wall':>7}   {'':17} {'CPU':>7}")
        print(f"  {'bare os.scandir + stat walk':38} {w:7.2f} s {'':17} {wc:7.2f} s")

        def row(label: str, wall: list[float], cpu: list[float], rss: list[float] | None = None) -> None:
            peak = f"; peak RSS {max(rss):.0f} MiB" if rss else ""
            print(
                f"  {label:38} {median(wall):7.2f} s ({median(wall) / w:.2f}x the walk) "
                f"{median(cpu):7.2f} s ({median(cpu) / wc:.2f}x the walk{peak})"
            )

        row("sag2wb index FOLDER --db DB, no change", process, process_cpu, rss)
        row("update_folder in this process", decide, decide_cpu)
        if old_process:
            row(f"old code ({old}), same command", old_process, old_cpu, old_rss)
            print(f"  this code's process / the old code's: CPU {median(process_cpu) / median(old_cpu):.2f}")
        print(f"  sha256 of the whole DB ({db.stat().st_size / 2**30:.2f} GiB)   {db_hash:7.2f} s")
        print(f"  the command said: {out.splitlines()[0] if out else ''}")


if __name__ == "__main__":
    main()
