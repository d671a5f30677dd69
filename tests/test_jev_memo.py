"""The in-process memo (workbench/judgment.py) for a batch-dependent judge (JEV stateful): a key
holds a token standing for its call's batch instead of the batch. Checked against the memo keyed
by the batch itself (the code before) on a random sequence of calls, and with threads."""

from __future__ import annotations

import random
import threading
import zlib

from workbench.judgment import JudgmentMemo


class ByBatch:
    """A batch-dependent judge whose answer depends on the question, the whole batch and the position."""

    name, key, batch_dependent = "by-batch", "by-batch-v1", True

    def __init__(self):
        self.calls = 0
        self.lock = threading.Lock()

    def judge(self, question, candidates, context):
        with self.lock:
            self.calls += 1
        head = repr((question, [(c["unit_id"], c["text"]) for c in candidates], [c["unit_id"] for c in context]))
        return [zlib.crc32(f"{head}#{n}".encode()) / 2**32 for n in range(len(candidates))]


class BatchKeyedMemo:
    """The memo as it was: the batch tuple itself in every key."""

    def __init__(self):
        self.scores, self.hits, self.misses = {}, 0, 0

    def judge(self, judge, question, candidates, context):
        ckey = JudgmentMemo.context_key(context)
        batch = tuple((c["unit_id"], c["text"]) for c in candidates)
        keys = [(judge.key, question, ckey, c["unit_id"], c["text"], batch) for c in candidates]
        missing = [i for i, k in enumerate(keys) if k not in self.scores]
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        if missing:
            got = judge.judge(question, [candidates[i] for i in missing], context)
            for i, s in zip(missing, got):
                self.scores[keys[i]] = s
        return [self.scores[k] for k in keys]


UNITS = [{"unit_id": i, "title": f"T{i}", "text": f"passage {i % 7}"} for i in range(12)]


def random_calls(seed: int, n: int):
    rng = random.Random(seed)
    batches = [rng.sample(UNITS, rng.randint(1, 6)) for _ in range(8)]
    for _ in range(n):
        batch = list(rng.choice(batches))
        if rng.random() < 0.3:  # the same candidates in another order: another batch
            rng.shuffle(batch)
        context = [UNITS[0]] if rng.random() < 0.5 else []
        yield rng.choice(["Q1?", "Q2?"]), batch, context


def test_the_token_keyed_memo_answers_as_the_batch_keyed_one():
    new, old = JudgmentMemo(), BatchKeyedMemo()
    judge_new, judge_old = ByBatch(), ByBatch()
    for question, batch, context in random_calls(7, 400):
        assert new.judge(judge_new, question, batch, context) == old.judge(judge_old, question, batch, context)
    assert (new.hits, new.misses, judge_new.calls) == (old.hits, old.misses, judge_old.calls)
    assert new.hits > 0 and new.misses > 0
    # equal batches share one token; a batch's candidates in another order are another batch
    assert len({k[-1] for k in new.scores}) == len({k[-1] for k in old.scores}) == len(new._batches)


def test_threads_asking_equal_and_different_batches_get_each_batchs_own_answers():
    memo, judge, reference = JudgmentMemo(), ByBatch(), ByBatch()
    calls = list(random_calls(11, 600))
    errors = []

    def ask(part):
        for question, batch, context in part:
            if memo.judge(judge, question, batch, context) != reference.judge(question, batch, context):
                errors.append((question, [c["unit_id"] for c in batch]))

    threads = [threading.Thread(target=ask, args=(calls[i::8],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len({k[-1] for k in memo.scores}) == len(memo._batches)
