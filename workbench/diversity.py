"""The final ranking's diversity step (paper Appendix C), one of the engine's steps
(workbench/engine.py re-exports both functions)."""

from __future__ import annotations

import math

from workbench.index.store import Index
from workbench.params import Params


def diversify(index: Index, ranking, scores: dict, n: int = 10) -> tuple[int, ...]:
    """Greedy DPP over the top n: quality = judge score, similarity = sparse TF-IDF cosine."""
    top = list(ranking[:n])
    if len(top) < 2:
        return tuple(ranking)
    vectors = index.diversity_vectors(top)
    q = [scores[u] for u in top]
    m = len(top)

    def kernel(i, j):
        if i == j:
            return q[i] * q[i]
        a, b = vectors[i], vectors[j]
        if len(a) > len(b):
            a, b = b, a
        return q[i] * q[j] * sum(x * b[t] for t, x in a.items() if t in b)

    residual = [kernel(i, i) for i in range(m)]
    floor = m * math.ulp(max(residual))
    cholesky: list[list[float]] = [[] for _ in range(m)]
    chosen: list[int] = []
    remaining = list(range(m))
    while remaining:
        j = max(remaining, key=lambda i: (residual[i], -i))  # equal residuals: earlier unit wins
        if residual[j] <= floor:
            chosen.extend(remaining)  # every residual is negligible: keep the rest in order
            break
        chosen.append(j)
        remaining.remove(j)
        dj = math.sqrt(residual[j])
        for i in remaining:
            e = (kernel(j, i) - sum(a * b for a, b in zip(cholesky[j], cholesky[i]))) / dj
            cholesky[i].append(e)
            residual[i] -= e * e
    return tuple(top[i] for i in chosen) + tuple(ranking[n:])


def final_ranking(index: Index, rounds, params: Params, judged: bool) -> tuple[int, ...]:
    """The last round's ranking, its top 10 reordered for diversity when the judge scored it
    (pure lexical rankings keep their lexical order)."""
    final = rounds[-1].ranking if rounds else ()
    scored = [r for r in rounds if r.scored]
    if params.diversity and judged and scored and final:
        final = diversify(index, final, scored[-1].score_of())
    return tuple(final)
