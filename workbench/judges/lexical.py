"""The offline judges that need no model: gold labels (the oracle) and lexical evidence."""

from __future__ import annotations

import functools
import math

from workbench import text as textlib


class OracleJudge:
    """1.0 for a gold passage, 0.0 otherwise. A ceiling for the candidate policy, not a model.

    >>> OracleJudge(["auth/login.md"]).judge("q?", [{"document": "auth/login.md"}, {"document": "CHANGELOG.md"}], [])
    [1.0, 0.0]
    """

    def __init__(self, gold):
        self.gold = frozenset(gold)
        self.name = "oracle (gold labels: a ceiling, not a model)"
        self.key = "oracle:" + "\x1f".join(sorted(self.gold))

    def judge(self, question, candidates, context):
        return [1.0 if c["document"] in self.gold else 0.0 for c in candidates]


@functools.lru_cache(maxsize=1 << 13)
def passage_tokens(title: str, text: str) -> frozenset[str]:
    """The distinct tokens of a passage, as the lexical and semantic judges compare them.

    Process-wide, and not per judge: a passage judged again in a later run is not
    tokenized again. Workers forked from a warm process inherit the cache, and they
    do not each tokenize the passages that are judged in questions on both workers.
    On 2Wiki, 3,500 of 9,500 tokenizations were repeats, ~7% of the pool's CPU.
    Bounded at 8,192 passages: 2.7 KiB each on 2Wiki (22 MB full; token strings are shared
    by the tokenizer's memo). The per-judge dict it replaces held up to 50,000.

    >>> sorted(passage_tokens("Glass Harbour", "A 1974 drama film."))
    ['1974', 'drama', 'film', 'glass', 'harbour']
    """
    return frozenset(textlib.tokenize(title + "\n" + text))


class LexicalJudge:
    """An offline judge from lexical evidence; context matters.

    direct  = idf mass of the question's tokens found in the candidate / idf mass of the question
    bridge  = max over context items c (other than the candidate) of
              weight(c) * idf mass of c's non-question tokens found in the candidate
                        / idf mass of c's non-question tokens,
              weight(c) = its previous score in the final round, else 1
    score   = 1 - (1 - direct) * (1 - 0.5 * bridge)
    The bridge term is what lets a second-hop passage that shares a rare name with an
    evidence passage already in context outscore a topical distractor.

    >>> from workbench.engine import judge_items
    >>> ids = {title: i for i, title in enc_index.documents.items()}
    >>> film, director = judge_items(enc_index, [ids["Glass Harbour"], ids["Élodie Marchetti"]])
    >>> judge, question = LexicalJudge(enc_index), "Where was the director of Glass Harbour born?"
    >>> [round(s, 2) for s in judge.judge(question, [film, director], [])]
    [0.56, 0.44]
    >>> [round(s, 2) for s in judge.judge(question, [director], [dict(film, previous_score=0.9)])]   # a bridge
    [0.49]
    """

    name = "lexical"
    key = "lexical-v1"

    def __init__(self, index):
        self.index = index

    def _mass(self, tokens) -> float:
        # fsum is exact, so the mass does not depend on the set's iteration order (which
        # follows PYTHONHASHSEED): the same question gives the same scores in every process
        return math.fsum(self.index.idf(t) for t in tokens)

    def judge(self, question, candidates, context):
        q = frozenset(textlib.tokenize(question))
        q_mass = self._mass(q)
        ctx = []
        for item in context:
            toks = passage_tokens(item["title"], item["text"]) - q
            mass = self._mass(toks)
            if mass > 0:
                prev = item.get("previous_score")
                ctx.append((item.get("unit_id"), toks, mass, 1.0 if prev is None else prev))
        out = []
        for c in candidates:
            toks = passage_tokens(c["title"], c["text"])
            direct = self._mass(q & toks) / q_mass if q_mass > 0 else 0.0
            bridge = 0.0
            for unit_id, ctoks, mass, weight in ctx:
                if unit_id is not None and unit_id == c.get("unit_id"):
                    continue
                bridge = max(bridge, weight * self._mass(ctoks & toks) / mass)
            out.append(min(1.0, max(0.0, 1 - (1 - direct) * (1 - 0.5 * bridge))))
        return out
