"""Teaching examples: the questions where expansion visibly does the work, found by one
criterion over real trajectories, and the bundled default the dashboard opens on.

A question teaches expansion when a gold document that BM25's top 10 missed is in SAG2's
top 10, and it entered the pool through a *bridging term* (a selected term of a seed, not
the question) that is a name or an identifier (`bridge_kind`), and no gold document of
BM25's top 10 dropped out of SAG2's:

- **name**: the engine's name phrase (`Term.kind == "name"`): two or more capitalised words
  in a row in the seed's original-case text, such as "Élodie Marchetti" or "Hallam Rusk";
- **identifier**: a single token whose surface has an underscore, a letter next to a digit,
  a dot between letters or digits, or a lower-to-upper case change: `role_id`,
  `st.standard`, `v2`, `svc.billing-v2`, `permissionKeys`;
- anything else is a **word**: "city", "teacher", a number such as "1988" or "2.5", a
  hyphenated word such as "well-known" (or "r-auditor"): it may bridge, but it teaches less.

Examples are ranked by how many gold documents such terms brought into the top 10, then by
the top-10 gold gained over BM25, then names before identifiers, then by SAG2's recall.

>>> default_example()
DefaultExample(corpus='encyclopedia', question_id='enc-33', judge='semantic')
>>> bridge_kind("name", "Hallam Rusk"), bridge_kind("token", "st.standard"), bridge_kind("token", "city")
('name', 'identifier', 'word')
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from workbench.engine import Run
from workbench.index.units import Question
from workbench.params import Params

TOP = 10
TEACHING_KINDS = ("name", "identifier")
_IDENTIFIER = re.compile(r"_|[^\W\d_]\d|\d[^\W\d_]|[^\W_]\.[^\W\d_]|[^\W\d_]\.[^\W_]|[a-z][A-Z]")


def bridge_kind(kind: str, surface: str) -> str:
    """The bridge kind ("name", "identifier" or "word") of a term of kind `kind` ("token" or
    "name") that the seed text writes `surface`."""
    if kind == "name":
        return "name"
    return "identifier" if _IDENTIFIER.search(surface) else "word"


@dataclass(frozen=True)
class Bridge:
    """How one gold document BM25's top 10 missed entered SAG2's top 10."""

    document: str
    title: str
    round: int  # the expansion round whose term list brought it
    term: str  # the index's token form
    surface: str  # as the seed text writes it
    kind: str  # "name", "identifier" or "word" (bridge_kind)
    seed_title: str  # the seed whose term it was
    term_rank: int | None  # its rank in that term's list
    rank: int  # its 1-based position among SAG2's top-10 documents

    def sentence(self) -> str:
        where = f" ({self.document})" if self.document != self.title else ""
        return (
            f"round {self.round}: the seed {self.seed_title!r} gave the {self.kind} term {self.surface!r}, "
            f"whose list brought {self.title!r}{where}; it ends at rank {self.rank}"
        )


@dataclass(frozen=True)
class Example:
    """One question under one judge: gold found in the top 10 by BM25 and by SAG2, and the bridges."""

    question_id: str
    question: str
    judge: str
    gold: int
    bm25_found: int
    sag2_found: int
    lost: tuple[str, ...]  # gold in BM25's top 10 that SAG2's top 10 dropped
    bridges: tuple[Bridge, ...]  # every gold document gained through expansion, any term kind

    @property
    def teaching_bridges(self) -> tuple[Bridge, ...]:
        return tuple(b for b in self.bridges if b.kind in TEACHING_KINDS)

    @property
    def teaches(self) -> bool:
        """A gold document BM25 missed entered the top 10 through a name or identifier, none lost."""
        return bool(self.teaching_bridges) and not self.lost

    def key(self) -> tuple:
        """Sort key, best first."""
        kinds = {b.kind for b in self.teaching_bridges}
        return (
            -len(self.teaching_bridges),
            -(self.sag2_found - self.bm25_found),
            0 if "name" in kinds else 1,
            -self.sag2_found / max(self.gold, 1),
            self.question_id,
        )

    def summary(self) -> str:
        lines = [
            f"{self.question_id} ({self.judge}): gold in the top {TOP}: BM25 {self.bm25_found} of {self.gold}, "
            f"SAG2 {self.sag2_found} of {self.gold}"
        ]
        lines += ["  " + b.sentence() for b in self.bridges]
        return "\n".join(lines)


def _bridge(trace, document: str, rank: int) -> Bridge | None:
    for r in trace.rounds[1:]:
        c = next((c for c in r.candidates if c.via_term and trace.units[c.unit_id].document == document), None)
        if c is None:
            continue
        term = next((t for t in r.terms if t.selected and t.term == c.via_term), None)
        kind, surface = (term.kind, term.surface) if term else ("token", c.via_term)
        seed = trace.units[term.seed].title if term else ""
        return Bridge(
            document,
            trace.units[c.unit_id].title,
            r.round,
            c.via_term,
            surface,
            bridge_kind(kind, surface),
            seed,
            c.term_rank,
            rank,
        )
    return None  # in the pool from round 0: the judge promoted it, no term brought it


def examine(index, question: Question, judge, params: Params | None = None) -> Example:
    """Run BM25 alone and SAG2 with `judge` (a judge object) on one question with gold."""
    params = params or Params()
    bm25 = Run(index, question, params, None).run().documents()[:TOP]
    trace = Run(index, question, params, judge).run()
    sag2 = trace.documents()[:TOP]
    gold = list(dict.fromkeys(question.gold))
    gained = [g for g in gold if g in sag2 and g not in bm25]
    bridges = tuple(b for b in (_bridge(trace, g, sag2.index(g) + 1) for g in gained) if b is not None)
    return Example(
        question.id,
        question.question,
        trace.judge,
        len(gold),
        sum(g in bm25 for g in gold),
        sum(g in sag2 for g in gold),
        tuple(g for g in gold if g in bm25 and g not in sag2),
        bridges,
    )


def teaching_examples(index, questions, judge, params: Params | None = None) -> list[Example]:
    """Every question with gold that teaches (`Example.teaches`), best first.

    >>> from workbench.index.corpora import load_questions
    >>> enc_questions = load_questions(bundled_paths("encyclopedia")[1])
    >>> [e.question_id for e in teaching_examples(enc_index, enc_questions, "semantic")][:3]
    ['enc-33', 'enc-13', 'enc-38']
    >>> [e.question_id for e in teaching_examples(index, questions, "lexical")]
    ['docs-09']
    """
    from workbench.judges.registry import make_judge

    judge = make_judge(judge, index) if isinstance(judge, str) else judge
    out = [examine(index, q, judge, params) for q in questions if q.gold]
    return sorted((e for e in out if e.teaches), key=Example.key)


# ---- the bundled default --------------------------------------------------------------------
@dataclass(frozen=True)
class DefaultExample:
    corpus: str  # a bundled corpus: "encyclopedia" or "internal_docs"
    question_id: str
    judge: str


# Chosen by teaching_examples() over the bundled corpora (tests/test_dashboard_default.py
# re-computes it and fails when the criterion would pick another question).
DEFAULT = DefaultExample("encyclopedia", "enc-33", "semantic")


def default_example() -> DefaultExample:
    return DEFAULT


def sample_corpora() -> Path:
    return Path(str(resources.files("workbench.sample_corpora")))


def bundled_paths(corpus: str) -> tuple[Path, Path]:
    """(corpus path, questions path) of a bundled corpus.

    >>> [p.name for p in bundled_paths("encyclopedia")]
    ['encyclopedia', 'questions.jsonl']
    """
    root = sample_corpora()
    if corpus == "encyclopedia":
        return root / "encyclopedia", root / "encyclopedia" / "questions.jsonl"
    if corpus == "internal_docs":
        return root / "internal_docs", root / "internal_docs.questions.jsonl"
    raise ValueError(f"unknown bundled corpus {corpus!r} (bundled: encyclopedia, internal_docs)")
