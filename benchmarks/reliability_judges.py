"""Replay issue 10's judge-side causes against a source tree and print what happens, one line each.

    python benchmarks/reliability_judges.py                    # this checkout
    python benchmarks/reliability_judges.py --src /tmp/before  # e.g. `git archive ebdc57b | tar -x -C /tmp/before`

Uses only APIs that existed before issue 10 (make_jev_judge, JudgmentMemo, JudgeServer, the
CLI), so it runs on old trees too. Every CLI case is a real `sag2wb` process of `--src`
(PYTHONPATH=SRC); servers listen on 127.0.0.1. Prints: case, exit code / outcome, what the
user saw. Figures in docs/reliability-judges.md come from this script.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.echo_server import start_echo_server  # noqa: E402  (standard library only)

SECRET = "sk-test-SECRET-123"
QUESTION = "Where was the director of Glass Harbour born?"
FILM_WORLD = [
    ("Glass Harbour", "Glass Harbour is a 1961 drama film directed by Mara Quell. It was shot in Vellor."),
    ("Mara Quell", "Mara Quell was a film director. She was born in Tessaly and studied painting."),
    ("Tessaly", "Tessaly is a river town known for bridges."),
]
SIX = [
    {"unit_id": i, "title": f"Town {i}", "text": f"Town {i} lies on a river.", "document": f"Town {i}"}
    for i in range(6)
]


def show(case: str, outcome: str) -> None:
    print(f"{case:48s} {outcome[:170]}", flush=True)


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def cli(*args, env=None, timeout=60) -> tuple[int | str, str]:
    """(exit code or 'hung', the last line of stderr, with a traceback marked)."""
    try:
        r = subprocess.run(
            [sys.executable, "-m", "workbench.cli", *map(str, args)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **(env or {})},
        )
    except subprocess.TimeoutExpired:
        return f"hung (killed after {timeout} s)", ""
    tb = "TRACEBACK " if "Traceback" in r.stderr else ""
    return r.returncode, tb + last_line(r.stderr or r.stdout)


# ---- 1. function judge time limit ----------------------------------------------------------
def function_judge(work: Path, db: Path):
    (work / "sleepy.py").write_text("import time\n\ndef judge(q, c, x):\n    time.sleep(10 ** 6)\n")
    code, said = cli(
        "search",
        "--db",
        db,
        QUESTION,
        "--judge",
        f"{work / 'sleepy.py'}:judge",
        env={"SAG2WB_JUDGE_TIMEOUT": "2"},
        timeout=20,
    )
    show("function judge sleeps forever (limit 2 s)", f"exit {code}: {said}")


# ---- 2. JEV client: refused key among concurrent requests; echoed key -------------------------
def jev_client(work: Path):
    import logging

    from workbench.judges import FunctionJudge, jev
    from workbench.judges.jev.server import JudgeServer
    from workbench.judgment import JudgmentMemo

    os.environ["JEV_API_KEY"] = SECRET
    for status in ("401", "403"):
        srv = JudgeServer(FunctionJudge(lambda q, c, x: [0.5] * len(c)), delay=0.3).start()
        srv.add_fault(status)
        judge = jev.make_jev_judge(endpoint=srv.url, cache_dir=work / f"c{status}", max_questions=1, backoff_base=0.01)
        try:
            JudgmentMemo().judge(judge, QUESTION, SIX, [])
            outcome = "no error"
        except Exception as exc:
            outcome = f"{type(exc).__name__}: {str(exc)[:60]}...{str(exc)[-40:]}"
        judge.close()
        srv.stop()
        show(f"HTTP {status} with 6 requests in flight", outcome)
    log_lines = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = lambda record: log_lines.append(record.getMessage())
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.DEBUG)
    httpd = start_echo_server()
    try:
        for mode in ("nonjson", "answer", "model", "500"):
            d = work / f"echo-{mode}"
            judge = jev.make_jev_judge(
                endpoint=f"http://127.0.0.1:{httpd.server_address[1]}/{mode}",
                cache_dir=d,
                backoff_base=0.01,
                attempts=2,
            )
            try:
                msg = repr(JudgmentMemo().judge(judge, QUESTION, SIX[:2], []))
            except Exception as exc:
                msg = f"{type(exc).__name__}: {exc}"
            judge.close()
            in_files = [p.name for p in d.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
            show(
                f"server echoes the key: {mode}",
                f"key in message {SECRET in msg}, in cache files {bool(in_files)}, "
                f"in log records {any(SECRET in line for line in log_lines)}",
            )
            log_lines.clear()
    finally:
        httpd.shutdown()
        logging.getLogger().removeHandler(handler)


# ---- 3. corrupt caches; export; import ------------------------------------------------------
def caches(work: Path, db: Path):
    from workbench.judges import jev

    lines = [
        json.dumps(
            {
                "key": jev.CACHE_KEY_PREFIX + hashlib.sha256(str(i).encode()).hexdigest(),
                "p": (i % 100) / 100,
                "model": "m",
            }
        )
        for i in range(3000)
    ]
    good = work / "good.jsonl"
    good.write_text("\n".join(lines) + "\n")
    for name in ("garbled", "truncated", "dbdir", "good"):
        jev.import_cache(work / name, good)
    with open(work / "garbled" / "cache.db", "r+b") as f:
        f.write(b"garbage!" * 20)
    for extra in ("cache.db-wal", "cache.db-shm"):
        (work / "truncated" / extra).unlink(missing_ok=True)
    os.truncate(work / "truncated" / "cache.db", (work / "truncated" / "cache.db").stat().st_size // 3)
    (work / "dbdir" / "cache.db").unlink()
    (work / "dbdir" / "cache.db").mkdir()
    (work / "afile").write_text("hello\n")
    for kind in ("garbled", "truncated", "dbdir", "afile"):
        code, said = cli("cache", "stats", "--cache-dir", work / kind)
        show(f"cache {kind}: cache stats", f"exit {code}: {said}")
        code, said = cli(
            "search",
            "--db",
            db,
            QUESTION,
            "--judge",
            "jev",
            "--jev-endpoint",
            "http://127.0.0.1:9/x",
            "--cache-dir",
            work / kind,
            "--rounds",
            "0",
        )
        show(f"cache {kind}: search --judge jev", f"exit {code}: {said}")
    code, said = cli("cache", "export", "--cache-dir", work / "good", "--file", work / "nodir" / "x.jsonl")
    show("cache export, missing folder", f"exit {code}: {said}")
    code, said = cli("cache", "export", "--cache-dir", work / "good", "--file", work / "afile")
    show(
        "cache export over a file that is not an export",
        f"exit {code}: {said}; file now starts {(work / 'afile').read_text()[:12]!r}",
    )
    prev = work / "prev.jsonl"
    prev.write_text("\n".join(lines[:3]) + "\n")
    code_text = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000)); "
        "from workbench.cli.main import main; sys.exit(main(sys.argv[1:]))"
    )
    r = subprocess.run(
        [sys.executable, "-c", code_text, "cache", "export", "--cache-dir", str(work / "good"), "--file", str(prev)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    show(
        "cache export on a full disk (RLIMIT_FSIZE)",
        f"exit {r.returncode}: "
        f"{'TRACEBACK ' if 'Traceback' in r.stderr else ''}{last_line(r.stderr)[:80]}; earlier export now "
        f"{len(prev.read_text().splitlines())} lines (was 3)",
    )
    key = jev.CACHE_KEY_PREFIX + "0" * 64
    edge = {
        "huge": f'{{"key": "{key}", "p": 1{"0" * 5000}}}\n'.encode(),
        "big": f'{{"key": "{key}", "p": 1{"0" * 400}}}\n'.encode(),
        "deep": ('{"key": ' + "[" * 100_000 + "]" * 100_000 + "}\n").encode(),
        "latin1": b'{"key": "%s", "p": 0.5, "model": "caf\xe9"}\n' % key.encode(),
        "dup-conflict": f'{{"key": "{key}", "p": 0.5}}\n{{"key": "{key}", "p": 0.7}}\n'.encode(),
    }
    for name, data in edge.items():
        (work / f"{name}.jsonl").write_bytes(data)
        code, said = cli("cache", "import", "--cache-dir", work / f"imp-{name}", "--file", work / f"{name}.jsonl")
        show(f"cache import: {name}", f"exit {code}: {said}")
    (work / "first.jsonl").write_text(f'{{"key": "{key}", "p": 0.5}}\n')
    (work / "second.jsonl").write_text(f'{{"key": "{key}", "p": 0.9}}\n')
    cli("cache", "import", "--cache-dir", work / "imp2", "--file", work / "first.jsonl")
    code, said = cli("cache", "import", "--cache-dir", work / "imp2", "--file", work / "second.jsonl")
    import diskcache

    c = diskcache.Cache(str(work / "imp2"))
    stored = c.get(key)
    c.close()
    show("cache import conflicting with the cache", f"exit {code}: stored p now {stored['p']}; {said[:90]}")


# ---- 4. judge-server ------------------------------------------------------------------------
def exchange(port: int, data: bytes, *, finish=True, guard=20.0) -> bytes:
    s = socket.create_connection(("127.0.0.1", port), timeout=guard)
    try:
        s.sendall(data)
        if finish:
            s.shutdown(socket.SHUT_WR)
        chunks = []
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    except TimeoutError:
        chunks.append(b"<no answer within the client's guard>")
    finally:
        s.close()
    return b"".join(chunks)


def first_line(answer: bytes) -> str:
    return answer.split(b"\r\n")[0].decode("latin-1") if answer else "connection closed, no answer"


def judge_server(work: Path, connections: int):
    from workbench.judges import jev

    proc = subprocess.Popen(
        [sys.executable, "-m", "workbench.cli", "judge-server", "--judge", "hash", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    port = int(proc.stdout.readline().split("http://127.0.0.1:")[1].split("/")[0])

    def rss_mb() -> int:
        with open(f"/proc/{proc.pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) // 1024

    body = json.dumps(jev.build_request("m", QUESTION, SIX[:1], [], "stateful")).encode()
    small = b"POST /v1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    try:
        for trial in range(3):
            barrier, failed = threading.Barrier(connections), []

            def one():
                barrier.wait()
                try:
                    if not exchange(port, small).startswith(b"HTTP/1.1 200"):
                        failed.append(1)
                except OSError:
                    failed.append(1)

            threads = [threading.Thread(target=one) for _ in range(connections)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            show(f"{connections} simultaneous new connections, trial {trial + 1}", f"{len(failed)} failed")
        big = json.dumps(
            jev.build_request("m", QUESTION, [{**SIX[0], "text": "x" * 10_000_000}], [], "stateful")
        ).encode()
        request = b"POST /v1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(big), big)
        rss = [rss_mb()]
        for _ in range(6):
            exchange(port, request, guard=120)
            rss.append(rss_mb())
        show("server RSS (MB) after 0..6 requests of 10 MB", ", ".join(map(str, rss)))
        for length in (b"abc", b"-1", b"1000000000000", None):
            head = b"POST /v1 HTTP/1.1\r\nHost: x\r\n" + (b"Content-Length: " + length + b"\r\n" if length else b"")
            show(
                f"Content-Length {length.decode() if length else '(none)'}",
                first_line(exchange(port, head + b"\r\n{}")),
            )
        t0 = time.perf_counter()
        answer = exchange(
            port, b'POST /v1 HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"half', finish=False, guard=45
        )
        show("half-sent request (client guard 45 s)", f"{first_line(answer)} after {time.perf_counter() - t0:.1f} s")
    finally:
        proc.terminate()
        stderr = proc.communicate(timeout=30)[1]
    show(
        "server stderr",
        f"{stderr.count('Traceback')} tracebacks "
        f"{' / '.join(line for line in stderr.splitlines() if 'Error' in line)[:100]}",
    )
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        busy = holder.getsockname()[1]
        for port_arg in (str(busy), "70000", "-1"):
            code, said = cli("judge-server", "--judge", "hash", "--port", port_arg)
            show(f"judge-server --port {'BUSY' if port_arg == str(busy) else port_arg}", f"exit {code}: {said}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", default=str(REPO), help="the source tree to test (default: this checkout)")
    parser.add_argument("--connections", type=int, default=200)
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.inner:  # re-run with the source tree first on the path, for this process and its children
        env = {**os.environ, "PYTHONPATH": str(Path(args.src).resolve())}
        return subprocess.call(
            [sys.executable, __file__, "--inner", "--src", args.src, "--connections", str(args.connections)],
            env=env,
            cwd=tempfile.gettempdir(),
        )
    import workbench

    print(f"source tree: {Path(workbench.__file__).parent.parent}")
    for name in ("JEV_API_KEY", "OPENROUTER_API_KEY", "TYPESAFE_API_KEY", "SAG2WB_JEV_CACHE", "SAG2WB_JUDGE_TIMEOUT"):
        os.environ.pop(name, None)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "corpus.json").write_text(json.dumps([{"title": t, "text": x} for t, x in FILM_WORLD]))
        assert cli("index", work / "corpus.json", "--db", work / "film.sqlite")[0] == 0
        function_judge(work, work / "film.sqlite")
        jev_client(work)
        caches(work, work / "film.sqlite")
        judge_server(work, args.connections)
    return 0


if __name__ == "__main__":
    sys.exit(main())
