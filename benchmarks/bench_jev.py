"""JEV client against the local judge server on 2Wiki: requests, tokens, latency (prints, no asserts).

    /work/venv/bin/python benchmarks/bench_jev.py [--data /work/shared/data/2wiki] [--questions 100]

(a) HTTP requests of a first and a second identical run, and of a rerun from round 2
    with new parameters (server: the lexical judge).
(b) estimated input tokens, stateful vs inline, over every judge call the engine makes
    on the dev questions (payloads built for each call; no HTTP needed).
(c) wall time of one 3-round question against a server that answers in 200 ms.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workbench.engine import Run
from workbench.index.corpora import load_corpus, load_questions
from workbench.index.store import Index
from workbench.judges import (
    LexicalJudge,
    jev,
)
from workbench.judges.jev.server import JudgeServer
from workbench.params import Params


class Recording:
    """Wraps a judge; keeps every call's (question, candidates, context)."""

    def __init__(self, inner):
        self.inner, self.name, self.key, self.calls = inner, inner.name, inner.key, []

    def judge(self, question, candidates, context):
        self.calls.append((question, candidates, context))
        return self.inner.judge(question, candidates, context)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/work/shared/data/2wiki")
    ap.add_argument("--questions", type=int, default=100)
    args = ap.parse_args()
    data = Path(args.data)
    tmp = Path(tempfile.mkdtemp(prefix="bench-jev-"))
    t0 = time.perf_counter()
    index = Index.build(load_corpus(data / "corpus.json"), tmp / "2wiki.sqlite")
    questions = load_questions(data / "questions-dev.jsonl")[: args.questions]
    print(f"index: {index.N} units in {time.perf_counter() - t0:.2f} s; {len(questions)} dev questions")
    lexical = LexicalJudge(index)

    # (a) requests: first run, identical second run, rerun from round 2 with new parameters
    sample = questions[:5]
    with JudgeServer(lexical) as server:

        def run_all(params, cache):
            judge = jev.make_jev_judge(server.url, cache_dir=cache)
            before = server.requests
            traces = [Run(index, q, params, judge).run() for q in sample]
            judge.close()
            return server.requests - before, sum(t.judgments for t in traces), traces

        cache = tmp / "cache-a"
        first, judged, _ = run_all(Params(), cache)
        second, _, _ = run_all(Params(), cache)
        new_params = Params(incoming_limit=30)  # first affects round 2; its context is unchanged
        judge = jev.make_jev_judge(server.url, cache_dir=cache)
        before_req, before_q = server.requests, server.questions
        for q in sample:
            Run(index, q, Params(), judge).run()  # all cached
        runs = [Run(index, q, Params(), judge) for q in sample]
        for r in runs:
            r.run()
        new_judgments = 0
        for r in runs:
            again = r.rerun(params=new_params).run()
            new_judgments += again.rounds[2].judgments if len(again.rounds) > 2 else 0
        judge.close()
    print(
        f"(a) {len(sample)} questions, {judged} judgments: first run {first} requests, identical second run "
        f"{second} requests; rerun from round 2 with incoming_limit=30: "
        f"{server.requests - before_req} requests for {server.questions - before_q} new judgments "
        f"(round-2 judgments in the reruns: {new_judgments})"
    )

    # (b) estimated input tokens, stateful vs inline, over every judge call on the dev questions
    rec = Recording(lexical)
    t0 = time.perf_counter()
    for q in questions:
        Run(index, q, Params(), rec).run()
    tokens = {s: 0 for s in jev.PAYLOAD_STYLES}
    requests = {s: 0 for s in jev.PAYLOAD_STYLES}
    model = jev.PRESETS["openrouter"].model
    for question, candidates, context in rec.calls:
        for style in jev.PAYLOAD_STYLES:
            plans = jev.plan_requests(model, question, candidates, context, style)
            requests[style] += len(plans)
            tokens[style] += sum(jev.estimate_request_tokens(b) for _, b in plans)
    judgments = sum(len(c) for _, c, _ in rec.calls)
    saving = 1 - tokens["stateful"] / tokens["inline"]
    print(
        f"(b) {len(questions)} questions, {len(rec.calls)} judge calls, {judgments} judgments "
        f"({time.perf_counter() - t0:.1f} s): inline {tokens['inline']:,} est. tokens in "
        f"{requests['inline']} requests; "
        f"stateful {tokens['stateful']:,} in {requests['stateful']} requests: {100 * saving:.1f}% fewer"
    )

    # (c) wall time of one 3-round question with a 200 ms server
    with JudgeServer(lexical, delay=0.2) as server:
        judge = jev.make_jev_judge(server.url, cache_dir=tmp / "cache-c")
        judge.judge("warm-up?", [{"unit_id": 0, "title": "x", "text": "y"}], [])  # start the loop thread
        before = server.requests
        t0 = time.perf_counter()
        trace = Run(index, questions[0], Params(), judge).run()
        wall = time.perf_counter() - t0
        judge.close()
    t0 = time.perf_counter()
    Run(index, questions[0], Params(), lexical).run()
    local = time.perf_counter() - t0
    print(
        f"(c) one question, {len(trace.rounds)} rounds, {trace.judgments} judgments, "
        f"{server.requests - before} requests at 200 ms each: {wall:.2f} s wall "
        f"(the same question with the lexical judge in process: {local:.2f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
