"""The corpus graph GAR-BM25 walks (paper B.3): each passage's eight nearest passages by BM25,
built once per index and stored beside it.

A passage's neighbours: its own text (title, heading, body) as a question — the OR of its
first `query_tokens` distinct tokens, as round 0 builds a question's expression — ranked by
BM25 with the run's field weights over the same FTS5 index, the passage itself left out, the
first `neighbours` kept (ties: lower id, as every BM25 list here).

Stored beside the index as `INDEX.graph-KEY.npz` (KEY: the settings that change a neighbour
list), written atomically, with the index fingerprint it was built from. An incremental
index update (`sag2wb index` on a changed folder, `update_passages`) changes BM25 statistics
for every passage (N, average length, idf), so no neighbour list can be kept exact without
recomputing it: the stored fingerprint no longer matches, the graph is stale, and
`corpus_graph` says so and builds it again (so does a graph whose unit ids are not the
index's any more, e.g. after a full rebuild renumbered the passages of an updated index).
A rebuilt graph of an updated index equals the graph of a full rebuild of the same
documents (tests/test_feedback.py).

>>> graph = corpus_graph(index, GraphParams(neighbours=3), progress=False)
>>> len(graph.ids), graph.k >= 3
(24, True)
>>> [index.unit(u).document for u in graph.neighbours_of(7, 3)]
['auth/login.md', 'auth/sso.md', 'zh/login.md']
>>> graph_status(index, GraphParams(neighbours=3))
'current'
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
import threading
import time
import weakref
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from workbench import safeio
from workbench import text as textlib
from workbench.index.store import DEFAULT_FIELD_WEIGHTS, Index, query_expression
from workbench.params import ParamsError

GRAPH_FORMAT = "sag2wb-corpus-graph-1"


class GraphProblem(safeio.InputError):
    """A stored graph that cannot be read or written, with the reason."""


@dataclass(frozen=True)
class GraphParams:
    """How the corpus graph is built. `neighbours`: passages kept per passage (the paper: 8);
    `query_tokens`: distinct tokens of a passage's text in its BM25 query (round 0's limit);
    `field_weights`: BM25 title, heading, body weights (the run's).

    >>> GraphParams(neighbours=0)
    Traceback (most recent call last):
    ...
    workbench.params.ParamsError: neighbours (corpus-graph neighbours per passage) must be an integer >= 1, got 0
    """

    neighbours: int = 8
    query_tokens: int = 80
    field_weights: tuple[float, float, float] = DEFAULT_FIELD_WEIGHTS

    def __post_init__(self):
        for name, what in (("neighbours", "corpus-graph neighbours per passage"), ("query_tokens", "query tokens")):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ParamsError(f"{name} ({what}) must be an integer >= 1, got {v!r}")
        w = tuple(self.field_weights)
        if len(w) != 3 or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0 for x in w):
            raise ParamsError(f"field_weights must be three non-negative numbers, got {self.field_weights!r}")
        object.__setattr__(self, "field_weights", tuple(float(x) for x in w))

    def key(self) -> str:
        """What names the stored file: the settings that change a neighbour list (not
        `neighbours`: a graph of 8 serves any k <= 8, its lists are prefixes)."""
        text = json.dumps({"query_tokens": self.query_tokens, "field_weights": list(self.field_weights)})
        return hashlib.sha256(text.encode()).hexdigest()[:10]


@dataclass
class CorpusGraph:
    """Neighbour lists by unit id: `ids[i]`'s neighbours are `neighbours[i]` (best first, -1
    padding when the corpus has fewer matches), their BM25 in `scores[i]` (lower is better)."""

    ids: np.ndarray
    neighbours: np.ndarray
    scores: np.ndarray
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        self._row = {int(u): i for i, u in enumerate(self.ids.tolist())}

    def __repr__(self) -> str:
        return f"CorpusGraph({len(self.ids)} passages, {self.k} neighbours each)"

    @property
    def k(self) -> int:
        return int(self.neighbours.shape[1]) if self.neighbours.ndim == 2 else 0

    def neighbours_of(self, unit_id: int, k: int | None = None) -> list[int]:
        """The first `k` (default: all stored) neighbours of a unit, best first."""
        row = self._row.get(int(unit_id))
        if row is None:
            raise KeyError(f"unit {unit_id} is not in the corpus graph (built for another index?)")
        out = self.neighbours[row][: self.k if k is None else k]
        return [int(u) for u in out if u >= 0]

    def edges(self) -> int:
        return int((self.neighbours >= 0).sum())

    def as_documents(self, index: Index) -> dict[str, list[str]]:
        """{document: [neighbour documents]}: the graph without unit ids (which an update may
        number differently from a rebuild)."""
        docs = index.documents
        return {docs[int(u)]: [docs[v] for v in self.neighbours_of(int(u))] for u in self.ids}

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        meta = np.frombuffer(json.dumps(self.meta, sort_keys=True).encode(), dtype=np.uint8)
        np.savez_compressed(buf, ids=self.ids, neighbours=self.neighbours, scores=self.scores, meta=meta)
        return buf.getvalue()

    @classmethod
    def from_file(cls, path: Path) -> "CorpusGraph":
        try:
            with np.load(path, allow_pickle=False) as z:
                meta = json.loads(bytes(z["meta"]).decode())
                graph = cls(z["ids"], z["neighbours"], z["scores"], meta)
        except (OSError, ValueError, KeyError) as exc:
            raise GraphProblem(f"{path}: not a readable corpus graph ({exc}); delete it to build it again") from None
        if meta.get("format") != GRAPH_FORMAT:
            raise GraphProblem(f"{path}: not a corpus graph of this workbench (format {meta.get('format')!r})")
        return graph


def id_map_digest(index: Index) -> str:
    """A digest of the index's unit ids and their documents: the fingerprint alone does not
    say which id a passage has (an updated index and a rebuild of the same documents share
    the fingerprint, and a removal leaves the updated one with a gap in its ids)."""
    h = hashlib.sha256()
    for u, d in sorted(index.documents.items()):
        h.update(f"{u}\t{d}\n".encode())
    return h.hexdigest()


def passage_expression(unit, query_tokens: int) -> str:
    """A passage's text as a question: the OR of its first distinct tokens (title first)."""
    text = "\n".join(x for x in (unit.title, unit.heading, unit.body) if x)
    return query_expression(list(dict.fromkeys(textlib.tokenize(text)))[:query_tokens])


def build_graph(
    index: Index, params: GraphParams | None = None, *, progress: bool | None = None, only=None
) -> CorpusGraph:
    """Every passage's `params.neighbours` BM25 neighbours (one FTS5/postings query per
    passage). `progress`: a tqdm bar (None: on a terminal only). `only`: these unit ids
    alone (a partial graph, e.g. to time a sample of a large corpus; never stored)."""
    params = params or GraphParams()
    t0 = time.perf_counter()
    ids = np.array(sorted(index.documents) if only is None else sorted(set(only)), dtype=np.int64)
    k = params.neighbours
    neighbours = np.full((len(ids), k), -1, dtype=np.int64)
    scores = np.zeros((len(ids), k), dtype=np.float64)
    show = sys.stderr.isatty() if progress is None else progress
    with tqdm(total=len(ids), desc="GAR corpus graph", unit="passage", disable=not show) as bar:
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500].tolist()
            for row, unit in zip(range(start, start + len(chunk)), index.units(chunk)):
                hits = index.search(passage_expression(unit, params.query_tokens), k + 1, params.field_weights)
                hits = [(u, s) for u, s in hits if u != unit.id][:k]
                for j, (u, s) in enumerate(hits):
                    neighbours[row, j], scores[row, j] = u, s
            bar.update(len(chunk))
    meta = {
        "format": GRAPH_FORMAT,
        "index_fingerprint": index.meta.get("fingerprint"),
        "id_map": id_map_digest(index),
        "units": int(index.N),
        "partial": only is not None,
        "params": {**asdict(params), "field_weights": list(params.field_weights)},
        "seconds": round(time.perf_counter() - t0, 3),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    return CorpusGraph(ids, neighbours, scores, meta)


def graph_path(index: Index, params: GraphParams | None = None) -> Path:
    """Where the graph of `index` with these settings is stored: beside the index file."""
    params = params or GraphParams()
    return index.path.with_name(f"{index.path.name}.graph-{params.key()}.npz")


def graph_status(index: Index, params: GraphParams | None = None) -> str:
    """'missing', 'stale' (built for another state of the index, e.g. before an update),
    'too few neighbours' (stored k below the one asked for), or 'current'."""
    params = params or GraphParams()
    path = graph_path(index, params)
    if not path.exists():
        return "missing"
    meta = CorpusGraph.from_file(path).meta
    if meta.get("index_fingerprint") != index.meta.get("fingerprint") or meta.get("id_map") != id_map_digest(index):
        return "stale"
    if meta.get("params", {}).get("neighbours", 0) < params.neighbours:
        return "too few neighbours"
    return "current"


_GRAPHS: "weakref.WeakKeyDictionary[Index, dict]" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def corpus_graph(
    index: Index, params: GraphParams | None = None, *, progress: bool | None = None, rebuild: bool = False
) -> CorpusGraph:
    """The graph of `index`: held in memory per index, else read from beside the index,
    else built (with a progress bar) and stored there. A stored graph of an earlier state
    of the index (an incremental update since) is stale: said on stderr, built again and
    replaced. An index folder that cannot be written keeps the graph in memory (said too)."""
    params = params or GraphParams()
    key = (params.key(), index.meta.get("fingerprint"))
    with _LOCK:  # one build per index, whatever the number of question threads
        held = _GRAPHS.setdefault(index, {})
        graph = held.get(key)
        if graph is not None and graph.k >= params.neighbours and not rebuild:
            return graph
        path = graph_path(index, params)
        status = "missing" if rebuild else graph_status(index, params)
        if status == "current":
            graph = CorpusGraph.from_file(path)
        else:
            if status in ("stale", "too few neighbours"):
                why = (
                    " (built for another state of the index: an update or a rebuild since)" if status == "stale" else ""
                )
                print(f"GAR corpus graph {path.name}: {status}{why}; building it again", file=sys.stderr)
            graph = build_graph(index, params, progress=progress)
            try:
                safeio.atomic_write_bytes(path, graph.to_bytes())
            except OSError as exc:
                print(f"GAR corpus graph: could not store it beside the index ({exc}); kept in memory", file=sys.stderr)
        held[key] = graph
        return graph
