"""What docstring examples (`pytest --doctest-modules workbench widgets`) may use without setup.

Each example runs in a fresh temporary folder (the current directory, so files it writes go
there) that links `sample_corpora/` from the repository, and sees these names:

- `index`: an Index of `sample_corpora/internal_docs` (24 units, 19 documents), built once
- `enc_index`: an Index of `sample_corpora/encyclopedia/corpus.json` (169 passages), built once
- `questions`: the 9 questions of `sample_corpora/internal_docs.questions.jsonl`
- `tmp`: the example's folder, a pathlib.Path
- `judge_server`: a local JEV judge server (workbench.judges.jev.server, 127.0.0.1, a free
  port) answering with the lexical judge over `enc_index`: `make_jev_judge(endpoint=
  judge_server.url, ...)` is a real JEV judge, no key, no hosted service
- `enc_beir`: the encyclopedia as a BEIR folder (`sag2wb convert --to beir`); read it, never
  write into it (it is shared)
- ir_datasets knows `sag2wb/encyclopedia` (`enc_beir`, registered with ir_datasets' own BEIR
  readers) in an example that mentions irds; IR_DATASETS_HOME is a session folder

No JEV key or endpoint variable of the caller's environment is seen by an example, so none
reaches a hosted service. Test functions are untouched: all of this applies to doctest items
only, and the indexes, the server and the BEIR folder are made the first time an example
needs them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

# Pinned figures (doctests, notebook outputs, pasted docs) are computed with float32 embeddings:
# the int8 model's matrix products follow the CPU's instruction set (measured: a cosine 0.75 on
# one machine, 0.73 on another, the same packages), float32 only in the last bits. The int8
# default is still tested (tests/test_semantic.py); a caller's own choice is kept.
os.environ.setdefault("SAG2WB_EMBED_PRECISION", "float")
from _pytest.doctest import DoctestItem

REPO = Path(__file__).resolve().parent
SAMPLES = REPO / "sample_corpora"
# Voilà's config file runs inside Voilà (it needs Voilà's `c`): not a module to import
collect_ignore = ["widgets/voila_config/voila.py"]


class _Lazy:
    """Built on first use, once per session (an index build costs ~1 s)."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.values: dict[str, object] = {}

    def get(self, name: str):
        if name not in self.values:
            from workbench.index import Index, load_corpus, load_questions

            if name == "index":
                self.values[name] = Index.build(SAMPLES / "internal_docs", self.folder / "internal_docs.sqlite")
            elif name == "enc_index":
                corpus = SAMPLES / "encyclopedia" / "corpus.json"
                self.values[name] = Index.build(corpus, self.folder / "encyclopedia.sqlite")
            elif name == "questions":
                self.values[name] = load_questions(SAMPLES / "internal_docs.questions.jsonl")
            elif name == "judge_server":
                from workbench.judges import LexicalJudge
                from workbench.judges.jev.server import JudgeServer

                self.values[name] = JudgeServer(LexicalJudge(self.get("enc_index"))).start()
            elif name == "enc_beir":
                from workbench.formats import write_beir

                folder = self.folder / "encyclopedia-beir"
                write_beir(
                    folder,
                    load_corpus(SAMPLES / "encyclopedia" / "corpus.json"),
                    load_questions(SAMPLES / "encyclopedia" / "questions.jsonl"),
                )
                self.values[name] = folder
            elif name == "irds":
                self.values[name] = _register_irds(IRDS_NAME, self.get("enc_beir"))
        return self.values[name]

    def close(self) -> None:
        if "judge_server" in self.values:
            self.values["judge_server"].stop()


IRDS_NAME = "sag2wb/encyclopedia"
JEV_VARIABLES = (
    "JEV_API_KEY",
    "OPENROUTER_API_KEY",
    "TYPESAFE_API_KEY",
    "JEV_ENDPOINT",
    "JEV_MODEL",
    "SAG2WB_JEV_CACHE",
)


def _register_irds(name: str, beir: Path) -> str:
    """ir_datasets cannot download here: the BEIR folder, read by ir_datasets' own BEIR classes."""
    import ir_datasets
    from ir_datasets.datasets.base import Dataset
    from ir_datasets.datasets.beir import BeirDocs, BeirQrels, BeirQueries, BeirTitleDoc
    from ir_datasets.formats import GenericQuery
    from ir_datasets.util import LocalDownload

    ir_datasets.registry.register(
        name,
        Dataset(
            BeirDocs(name, LocalDownload(beir / "corpus.jsonl"), BeirTitleDoc),
            BeirQueries(name, LocalDownload(beir / "queries.jsonl"), GenericQuery),
            BeirQrels(LocalDownload(beir / "qrels" / "test.tsv"), qrels_defs={}),
        ),
    )
    return name


@pytest.fixture(scope="session")
def _doctest_objects(tmp_path_factory):
    objects = _Lazy(tmp_path_factory.mktemp("doctest-indexes"))
    yield objects
    objects.close()


@pytest.fixture(autouse=True)
def _doctest_setup(request, tmp_path_factory):
    if not isinstance(request.node, DoctestItem):
        yield
        return
    objects = request.getfixturevalue("_doctest_objects")
    ns = request.getfixturevalue("doctest_namespace")
    words = {w for ex in request.node.dtest.examples for w in re.findall(r"[A-Za-z_]\w*", ex.source)}
    for name in ("index", "enc_index", "questions", "judge_server", "enc_beir"):
        if name in words:
            ns[name] = objects.get(name)
    tmp = tmp_path_factory.mktemp("doctest")
    (tmp / "sample_corpora").symlink_to(SAMPLES, target_is_directory=True)
    ns["tmp"] = tmp
    request.getfixturevalue("monkeypatch").chdir(tmp)
    environ = dict(os.environ)  # an example may set a variable (restored after it)
    os.environ["SAG2WB_EMBED_CACHE"] = str(objects.folder / "embeddings")  # never ~/.cache
    os.environ["IR_DATASETS_HOME"] = str(objects.folder / "ir_datasets")  # never ~/.ir_datasets
    for name in JEV_VARIABLES:
        os.environ.pop(name, None)
    if any("irds" in w for w in words):
        objects.get("irds")
    yield
    os.environ.clear()
    os.environ.update(environ)


def pytest_collection_modifyitems(config, items):
    # A notebook runs a kernel and its cells share state: the whole notebook is one of the long sets
    # (`-m slow`, which .ci/run runs after the README's command), never a cell of it alone.
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.slow)
