"""Lexical-feedback alternatives to SAG2's expansion (paper Appendix B.3): RM3 pseudo-relevance
feedback and GAR-BM25 adaptive retrieval over a corpus graph, as traces with no judge or with
final-only judging. Above the engine (they reuse its round 0, scoring and ranking steps),
below the run layer (workbench/runs/policies.py names them `rm3` and `gar`).
"""

from workbench.feedback.gar import GARParams, adaptive_loop, gar_expansion
from workbench.feedback.graph import CorpusGraph, GraphParams, build_graph, corpus_graph, graph_path, graph_status
from workbench.feedback.rm3 import RM3Params, rm3_expansion
from workbench.feedback.traces import STOP_LEXICAL, FeedbackRun, gar_batches, gar_trace, rm3_trace

__all__ = [
    "STOP_LEXICAL",
    "CorpusGraph",
    "FeedbackRun",
    "GARParams",
    "GraphParams",
    "RM3Params",
    "adaptive_loop",
    "build_graph",
    "corpus_graph",
    "gar_batches",
    "gar_expansion",
    "gar_trace",
    "graph_path",
    "graph_status",
    "rm3_expansion",
    "rm3_trace",
]
