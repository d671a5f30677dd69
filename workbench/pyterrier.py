"""SAG2, its BM25 baseline and the paper's lexical-feedback alternatives (B.3: RM3, GAR-BM25)
as PyTerrier transformers (optional extra `[pyterrier]`).

Topics (`qid`, `query`) in; results out: the query columns, then `docno`, `score`, `rank`
and what SAG2 adds: `unit_id`, `title`, `judge_score` (the final judge probability),
`bm25` (FTS5's bm25(), lower is better), `entered_round` (the round the passage entered
the candidates) and `via_term` (the expansion term that brought it; empty for round 0).

`docno` is the document identity the workbench's metrics use (`Unit.document`: the title
of a corpus.json passage, the path of a file), one row per document with the first
occurrence kept, the same dedup as R@k. `score` is `depth - rank` (see
workbench/formats.rank_score): PyTerrier and ir_measures order results by score, so the
score has to fall strictly with our rank for pt.Experiment to measure our ranking. `rank`
is 0-based, as everywhere in PyTerrier. No JVM is started.

>>> import pyterrier as pt
>>> from pyterrier.measures import R, nDCG
>>> from workbench.measures import qrels_frame, topics_frame
>>> bm25, sag2 = BM25Retriever(index), SAG2Retriever(index, "lexical")
>>> pt.Experiment([bm25, sag2], topics_frame(questions), qrels_frame(questions),
...               eval_metrics=[R@5, R@10, nDCG@10], round=3)
                       name    R@5   R@10  nDCG@10
0     BM25Retriever('bm25')  0.602  0.759    0.703
1  SAG2Retriever('lexical')  0.676  0.907    0.749
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

try:
    import pyterrier as pt
except ImportError as exc:  # the extra is optional; say how to get it
    raise ImportError("workbench.pyterrier needs PyTerrier: pip install 'sag2-workbench[pyterrier]'") from exc

from workbench.deprecation import keep_old_names
from workbench.engine import Run
from workbench.feedback import GARParams, RM3Params, gar_trace, rm3_trace
from workbench.formats import RUN_DEPTH, rank_score
from workbench.index.store import Index
from workbench.index.units import Question
from workbench.judges.base import FunctionJudge
from workbench.judgment import JudgmentMemo
from workbench.params import Params
from workbench.protocols import is_judge_object
from workbench.runs.tasks import JudgeSource, judge_spec

# the frames notebooks imported from here: readable with a DeprecationWarning (docs/deprecations.md)
keep_old_names(__name__, {"qrels_frame": "workbench.measures", "topics_frame": "workbench.measures"})

RESULT_COLUMNS = ["docno", "score", "rank", "unit_id", "title", "judge_score", "bm25", "entered_round", "via_term"]


def trace_rows(trace, depth: int = RUN_DEPTH) -> list[dict]:
    """One row per document of a trace's final ranking (first occurrence kept), top `depth`."""
    entered: dict[int, tuple[int, str | None, float]] = {}
    for r in trace.rounds:
        for c in r.candidates:
            if c.unit_id not in entered:
                entered[c.unit_id] = (r.round, c.via_term, c.bm25)
    first_unit: dict[str, int] = {}
    for u in trace.final_ranking:
        first_unit.setdefault(trace.units[u].document, u)
    scores = trace.final_scores()
    docs = trace.documents()[:depth]
    rows = []
    for i, doc in enumerate(docs):
        u = first_unit[doc]
        round_, via, bm25 = entered.get(u, (None, None, None))
        rows.append(
            {
                "docno": doc,
                "score": rank_score(i + 1, len(docs)),
                "rank": i,
                "unit_id": u,
                "title": trace.units[u].title,
                "judge_score": scores.get(u),
                "bm25": bm25,
                "entered_round": round_,
                "via_term": via,
            }
        )
    return rows


class _WorkbenchRetriever(pt.Transformer):
    """Runs one workbench `Run` per query row."""

    judge_name = "bm25"

    def __init__(self, index, params: Params | None = None, *, num_results: int = RUN_DEPTH):
        self.index = index if isinstance(index, Index) else Index(Path(index))
        self.params = params or Params()
        self.num_results = num_results
        self.memo = JudgmentMemo()  # judgments reused when the same questions run again

    def _judge_for(self, question: Question):
        return None

    def transform(self, topics: pd.DataFrame) -> pd.DataFrame:
        pt.validate.query_frame(topics, ["query"])
        query_columns = [c for c in topics.columns if c not in RESULT_COLUMNS]
        rows = []
        for record in topics[query_columns].to_dict("records"):
            question = self._question(record)
            trace = self._trace(question)
            rows += [{**record, **row} for row in trace_rows(trace, self.num_results)]
        out = pd.DataFrame(rows, columns=query_columns + RESULT_COLUMNS)
        return out.astype({"score": float, "rank": int, "judge_score": float, "bm25": float})

    def _question(self, record: dict) -> Question:
        return Question(id=str(record["qid"]), question=str(record["query"]))

    def _trace(self, question: Question):
        return Run(self.index, question, self.params, self._judge_for(question), memo=self.memo).run()

    def transform_outputs(self, input_columns: list[str]) -> list[str]:
        # declared, so pt.Experiment's validation does not run a query to find out
        pt.validate.query_frame(input_columns, ["query"])
        return [c for c in input_columns if c not in RESULT_COLUMNS] + RESULT_COLUMNS

    def __repr__(self) -> str:
        changed = {k: v for k, v in self.params.to_dict().items() if v != Params().to_dict()[k]}
        extra = "".join(f", {k}={v!r}" for k, v in changed.items())
        return f"{type(self).__name__}({self.judge_name!r}{extra})"

    __str__ = __repr__


class BM25Retriever(_WorkbenchRetriever):
    """The paper's BM25 baseline: the first-round FTS5 list (field weights 2/2/1), no judge.

    >>> BM25Retriever(index).search("How are refunds approved?")[["docno", "score", "rank"]].head(3)
                            docno  score  rank
    0             api/partners.md    4.0     0
    1             access/roles.md    3.0     1
    2  api/permission_registry.md    2.0     2
    """

    def __init__(self, index, params: Params | None = None, *, num_results: int = RUN_DEPTH):
        super().__init__(index, params, num_results=num_results)


class SAG2Retriever(_WorkbenchRetriever):
    """SAG2 with any workbench judge: a name (`lexical`, `oracle`, `jev`, `FILE.py:NAME`) or
    a judge function / object. The oracle needs gold: pass `qrels` (qid, docno, label).

    >>> from workbench.measures import qrels_frame, topics_frame
    >>> sag2_h1 = SAG2Retriever(index, "lexical", Params(H=1))
    >>> oracle = SAG2Retriever(index, "oracle", qrels=qrels_frame(questions))
    >>> sag2_h1, oracle
    (SAG2Retriever('lexical', H=1), SAG2Retriever('oracle'))
    >>> oracle.transform(topics_frame(questions[:1]))[["qid", "docno", "rank"]].head(2)
           qid                       docno  rank
    0  docs-01  api/permission_registry.md     0
    1  docs-01               auth/login.md     1
    """

    def __init__(
        self,
        index,
        judge="lexical",
        params: Params | None = None,
        *,
        num_results: int = RUN_DEPTH,
        qrels: pd.DataFrame | None = None,
        **jev_options,
    ):
        super().__init__(index, params, num_results=num_results)
        if isinstance(judge, str):
            self.judge_name = judge
            spec, judges = judge_spec(judge, jev_options), JudgeSource(self.index)
            judges.prepare([spec])  # one judge for every query (the oracle's: per query, from its qrels)
            self._factory = lambda q: judges(spec, q)
        else:
            if callable(judge) and not is_judge_object(judge):
                judge = FunctionJudge(judge)  # a plain `judge(question, candidates, context)` function
            self.judge_name = getattr(judge, "name", None) or type(judge).__name__
            self._factory = lambda q: judge
        self.gold: dict[str, tuple[str, ...]] = {}
        if qrels is not None:
            for row in qrels[qrels["label"] > 0].itertuples():
                self.gold[str(row.qid)] = (*self.gold.get(str(row.qid), ()), str(row.docno))

    def _question(self, record: dict) -> Question:
        qid = str(record["qid"])
        return Question(id=qid, question=str(record["query"]), gold=self.gold.get(qid, ()))

    def _judge_for(self, question: Question):
        return self._factory(question)


class RM3Retriever(SAG2Retriever):
    """RM3 feedback (paper B.3; workbench/feedback/rm3.py) on the same index and field
    weights: with judge `bm25` (the default) its lexical ranking, with any other judge that
    judge once on its first 100 units (final-only judging). `rm3`: an RM3Params.
    `entered_round` is 1 for every RM3 unit; `bm25` is minus the weighted BM25 sum.

    >>> from workbench.measures import qrels_frame
    >>> rm3, rm3_oracle = RM3Retriever(index), RM3Retriever(index, "oracle", qrels=qrels_frame(questions))
    >>> rm3, RM3Retriever(index, rm3=RM3Params(terms=5))
    (RM3Retriever('bm25'), RM3Retriever('bm25', terms=5))
    >>> rm3.search("How are refunds approved?")[["docno", "rank"]].head(2)
                 docno  rank
    0  api/partners.md     0
    1  access/roles.md     1
    """

    def __init__(self, index, judge="bm25", params: Params | None = None, *, rm3: RM3Params | None = None, **options):
        super().__init__(index, judge, params, **options)
        self.rm3 = rm3 or RM3Params()

    def _trace(self, question: Question):
        return rm3_trace(self.index, question, self.params, self._judge_for(question), self.memo, self.rm3)

    def __repr__(self) -> str:
        return _with_settings(super().__repr__(), self.rm3, RM3Params())

    __str__ = __repr__


class GARRetriever(SAG2Retriever):
    """GAR-BM25 (paper B.3; workbench/feedback/gar.py) over the index's corpus graph (built on
    first use and stored beside the index): with judge `bm25` its lexical ranking, with a
    judge that judge once on the (at most 100) units the adaptive loop took. `via_term` is
    'graph:U' for a unit reached as a neighbour of unit U. `gar`: a GARParams.

    >>> gar = GARRetriever(index, gar=GARParams(batch_size=8))
    >>> gar
    GARRetriever('bm25', batch_size=8)
    >>> list(gar.search("How are refunds approved?")["docno"][:2])
    ['api/partners.md', 'access/roles.md']
    """

    def __init__(self, index, judge="bm25", params: Params | None = None, *, gar: GARParams | None = None, **options):
        super().__init__(index, judge, params, **options)
        self.gar = gar or GARParams()

    def _trace(self, question: Question):
        return gar_trace(self.index, question, self.params, self._judge_for(question), self.memo, self.gar)

    def __repr__(self) -> str:
        return _with_settings(super().__repr__(), self.gar, GARParams())

    __str__ = __repr__


def _with_settings(text: str, settings, default) -> str:
    changed = {k: v for k, v in settings.to_dict().items() if v != default.to_dict()[k]}
    return text[:-1] + "".join(f", {k}={v!r}" for k, v in changed.items()) + ")"
