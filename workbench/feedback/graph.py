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
import os
import sys
import threading
import time
import weakref
import zipfile
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from workbench import safeio
from workbench.feedback import graph_table
from workbench.feedback.graph_scoring import passage_tokens, score_all
from workbench.index.store import DEFAULT_FIELD_WEIGHTS, Index, query_expression
from workbench.params import ParamsError

GRAPH_FORMAT = "sag2wb-corpus-graph-1"


class GraphProblem(safeio.InputError):
    """A stored graph that cannot be read or written, with the reason."""


class GraphDamaged(GraphProblem):
    """A stored graph of this workbench's format whose arrays cannot be read or do not fit
    together (a bad CRC, a cut member, lists naming units it does not have): built again."""


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
            raise GraphProblem(
                f"unit {unit_id} is not in the corpus graph (built for another index?); use corpus_graph(index)"
            )
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
    def from_file(cls, path: Path) -> CorpusGraph:
        """The graph stored at `path`. A file that is no graph of this format (not a zip: empty,
        cut short or something else; no readable meta; another format, e.g. a newer sag2wb's) is
        a GraphProblem and stays as it is; a graph of this format whose arrays are damaged or
        inconsistent is a GraphDamaged (`corpus_graph` builds it again)."""
        path = Path(path)
        unreadable = f"{path}: not a readable corpus graph"
        if not path.is_file() or not zipfile.is_zipfile(path):
            what = "a folder" if path.is_dir() else "not a zip file (empty, cut short or another kind of file)"
            raise GraphProblem(f"{unreadable} ({what}); delete it to build it again")
        try:
            with np.load(path, allow_pickle=False) as z:
                meta = safeio.parse_json(bytes(z["meta"]).decode("utf-8"), f"{path} (its meta)")
                if not isinstance(meta, dict) or meta.get("format") != GRAPH_FORMAT:
                    found = meta.get("format") if isinstance(meta, dict) else None
                    newer = isinstance(found, str) and found.startswith(GRAPH_FORMAT[:-1])
                    kind = (
                        "a corpus graph of another sag2wb version" if newer else "not a corpus graph of this workbench"
                    )
                    raise GraphProblem(
                        f"{path}: {kind} (format {found!r}, this one reads {GRAPH_FORMAT!r}); delete it to rebuild"
                    )
                try:
                    arrays = z["ids"], z["neighbours"], z["scores"]
                except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
                    raise GraphDamaged(f"{path}: damaged ({type(exc).__name__}: {exc})") from None
        except GraphProblem:
            raise
        except (OSError, ValueError, KeyError, EOFError, UnicodeDecodeError, zipfile.BadZipFile, zlib.error) as exc:
            if _members(path) == MEMBERS:  # ours (the zip's directory says so), its meta damaged
                raise GraphDamaged(f"{path}: damaged ({type(exc).__name__}: {exc})") from None
            raise GraphProblem(f"{unreadable} ({type(exc).__name__}: {exc}); delete it to build it again") from None
        problem = inconsistency(*arrays, meta)
        if problem:
            raise GraphDamaged(f"{path}: damaged ({problem})")
        return cls(*arrays, meta)


MEMBERS = {"ids.npy", "neighbours.npy", "scores.npy", "meta.npy"}


def _members(path: Path) -> set[str]:
    try:
        with zipfile.ZipFile(path) as z:
            return set(z.namelist())
    except (OSError, zipfile.BadZipFile, ValueError):
        return set()


def inconsistency(ids: np.ndarray, nb: np.ndarray, sc: np.ndarray, meta: dict) -> str | None:
    """What does not fit together in a stored graph's arrays and meta (None: nothing)."""
    if ids.ndim != 1 or ids.dtype.kind not in "iu" or nb.ndim != 2 or nb.dtype.kind not in "iu":
        return "ids or neighbours are not integer arrays of one and two dimensions"
    if nb.shape[0] != len(ids) or sc.shape != nb.shape or sc.dtype.kind != "f" or not np.all(np.isfinite(sc)):
        return f"arrays of shapes {ids.shape}, {nb.shape}, {sc.shape} do not match"
    if len(np.unique(ids)) != len(ids) or not np.all(np.isin(nb[nb != -1], ids)):
        return "neighbour lists name units the graph does not have"
    k = meta["params"].get("neighbours") if isinstance(meta.get("params"), dict) else None
    if not isinstance(k, int) or isinstance(k, bool) or k != nb.shape[1]:
        return f"its meta records {k!r} neighbours per passage, its lists hold {nb.shape[1]}"
    return None


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
    return query_expression(passage_tokens(unit, query_tokens))


def build_graph(
    index: Index,
    params: GraphParams | None = None,
    *,
    progress: bool | None = None,
    only=None,
    workers: int | None = None,
) -> CorpusGraph:
    """Every passage's `params.neighbours` BM25 neighbours, all passages scored at once from
    the index's postings with max-score pruning (`graph_scoring.score_all`; the same lists and
    scores as `build_graph_by_queries`, bit for bit). `workers`: processes (default: up to 2
    cores on a large corpus; the same graph for any number). `progress`: a line on stderr per
    stage (None: on a terminal only). `only`: these unit ids alone (a partial graph, e.g. to
    time a sample of a large corpus; never stored)."""
    params = params or GraphParams()
    if index.postings is None:  # an index opened with max_postings=0: FTS5 answers each query
        return build_graph_by_queries(index, params, progress=progress, only=only)
    t0 = time.perf_counter()
    show = sys.stderr.isatty() if progress is None else progress
    if show:
        print(f"GAR corpus graph: {index.N:,} passages, scoring all at once", file=sys.stderr)
    stages: dict = {}
    with graph_table.unmapped(index):  # its mapped pages would stay resident through the scoring
        ids, neighbours, scores = score_all(
            index,
            unit_ids(index) if only is None else sorted(set(only)),
            k=params.neighbours,
            query_tokens=params.query_tokens,
            weights=params.field_weights,
            workers=workers,
            stages=stages,
        )
    if show:
        print(f"GAR corpus graph: done ({', '.join(f'{k} {v:.1f} s' for k, v in stages.items())})", file=sys.stderr)
    return CorpusGraph(ids, neighbours, scores, {**_meta(index, params, only, t0), "stages": stages})


def unit_ids(index: Index) -> list[int]:
    """The index's unit ids, ascending, read without `Index.documents` unless it is loaded: its
    ~170 MB of strings at 600k would be inherited by every scoring worker (the meta reads it
    after the scoring). No ORDER BY: SQLite then scans a covering index, not the table (whose
    texts, read through the memory map, stayed resident: +160 MiB at 300k)."""
    if "documents" in vars(index):
        return sorted(index.documents)
    return sorted(int(u) for (u,) in index.db.execute("SELECT id FROM units"))


def build_graph_by_queries(
    index: Index, params: GraphParams | None = None, *, progress: bool | None = None, only=None
) -> CorpusGraph:
    """The graph by its definition: one FTS5/postings query per passage (`Index.search` of
    its `passage_expression`, k + 1 hits, itself left out). Slow on a large corpus (~43 h at
    600k); kept as the reference the tests and benchmarks compare `build_graph` with."""
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
    return CorpusGraph(ids, neighbours, scores, _meta(index, params, only, t0))


def _meta(index: Index, params: GraphParams, only, t0: float) -> dict:
    return {
        "format": GRAPH_FORMAT,
        "index_fingerprint": index.meta.get("fingerprint"),
        "id_map": id_map_digest(index),
        "units": int(index.N),
        "partial": only is not None,
        "params": {**asdict(params), "field_weights": list(params.field_weights)},
        "seconds": round(time.perf_counter() - t0, 3),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def graph_path(index: Index, params: GraphParams | None = None) -> Path:
    """Where the graph of `index` with these settings is stored: beside the index file."""
    params = params or GraphParams()
    return index.path.with_name(f"{index.path.name}.graph-{params.key()}.npz")


def graph_status(index: Index, params: GraphParams | None = None) -> str:
    """'missing', 'stale' (built for another state of the index, e.g. before an update),
    'damaged' (arrays unreadable or naming units the index does not have), 'too few
    neighbours' (stored k below the one asked for), or 'current'. A file that is no graph of
    this version is a GraphProblem."""
    return _stored(index, params or GraphParams())[0]


def _stored(index: Index, params: GraphParams) -> tuple[str, str, CorpusGraph | None]:
    """(status, why, the graph when current) of the stored graph (see graph_status)."""
    path = graph_path(index, params)
    if not os.path.lexists(path):
        return "missing", "", None
    try:
        graph = CorpusGraph.from_file(path)
    except GraphDamaged as exc:
        return "damaged", str(exc), None
    meta = graph.meta
    if meta.get("index_fingerprint") != index.meta.get("fingerprint") or meta.get("id_map") != id_map_digest(index):
        return "stale", " (built for another state of the index: an update or a rebuild since)", None
    if meta.get("partial") or graph.ids.tolist() != sorted(index.documents):
        return "damaged", f"{path}: damaged (its passages are not the index's)", None
    if meta["params"]["neighbours"] < params.neighbours:
        return "too few neighbours", "", None
    return "current", "", graph


_GRAPHS: weakref.WeakKeyDictionary[Index, dict] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def corpus_graph(
    index: Index, params: GraphParams | None = None, *, progress: bool | None = None, rebuild: bool = False
) -> CorpusGraph:
    """The graph of `index`: held in memory per index, else read from beside the index,
    else built (with a progress bar) and stored there. A stored graph of an earlier state
    of the index (an incremental update since) is stale, and one whose arrays are damaged
    (a bad CRC, lists naming units it lacks) is damaged: said on stderr, built again and
    replaced (with any temporary file a killed writer left). A file there that is no graph of
    this version is a GraphProblem and kept. An index folder that cannot be written keeps the
    graph in memory (said too)."""
    params = params or GraphParams()
    key = (params.key(), index.meta.get("fingerprint"))
    with _LOCK:  # one build per index, whatever the number of question threads
        held = _GRAPHS.setdefault(index, {})
        graph = held.get(key)
        if graph is not None and graph.k >= params.neighbours and not rebuild:
            return graph
        path = graph_path(index, params)
        status, why, graph = ("missing", "", None) if rebuild else _stored(index, params)
        if graph is None:
            if status == "damaged":
                print(f"GAR corpus graph {why}; building it again", file=sys.stderr)
            elif status != "missing":
                print(f"GAR corpus graph {path.name}: {status}{why}; building it again", file=sys.stderr)
            graph = build_graph(index, params, progress=progress)
            safeio.clean_stale_temps(path.parent, path.name)  # left by a writer killed mid-write
            try:
                safeio.atomic_write_bytes(path, graph.to_bytes())
            except OSError as exc:
                print(f"GAR corpus graph: could not store it beside the index ({exc}); kept in memory", file=sys.stderr)
        held[key] = graph
        return graph
