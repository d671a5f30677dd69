"""The index layer: corpus readers, the tokenized SQLite FTS5 store, its build and update.

>>> from workbench.index import Index, load_corpus
"""

from workbench.index.corpora import check_gold, iter_corpus, load_corpus, load_folder, load_questions
from workbench.index.store import Index, IndexProblem, open_or_build
from workbench.index.units import CorpusError, Question, Unit
from workbench.index.update import update_folder, update_passages

__all__ = [
    "CorpusError",
    "Index",
    "IndexProblem",
    "Question",
    "Unit",
    "check_gold",
    "iter_corpus",
    "load_corpus",
    "load_folder",
    "load_questions",
    "open_or_build",
    "update_folder",
    "update_passages",
]
