"""README claims about the demo, checked against the engine's own trace (issue 15, part 3):
a sentence naming the terms through which expansion reached a file must name the
`via_term` the trace records for that file."""
from __future__ import annotations

import re
from pathlib import Path

from workbench.corpora import load_corpus, load_questions
from workbench.engine import Run
from workbench.index import open_or_build
from workbench.judges import LexicalJudge
from workbench.params import Params

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "sample_corpora" / "internal_docs"


def test_readme_demo_names_the_terms_the_trace_records(tmp_path):
    readme = ROOT / "README.md"
    text = " ".join(readme.read_text(encoding="utf-8").split())
    m = re.search(r"the Chinese role table through the term “([^”]+)” and the English gateway file through the "
                  r"term “([^”]+)”", text)
    assert m, "README: the demo paragraph no longer names the terms; update this test with it"
    claimed = {"zh/roles.md": m.group(1), "api/gateway.md": m.group(2)}
    index, _ = open_or_build(load_corpus(DOCS), tmp_path / "docs.sqlite")
    question = next(q for q in load_questions(ROOT / "sample_corpora" / "internal_docs.questions.jsonl")
                    if q.question.startswith("用户登录以后"))
    p = Run(index, question, Params(), LexicalJudge(index)).run().frames()["passages"]
    arrived = p[p["via_term"].notna()].sort_values("round").drop_duplicates("document")
    via = dict(zip(arrived["document"], arrived["via_term"]))
    rounds = dict(zip(arrived["document"], arrived["round"]))
    assert {doc: via.get(doc) for doc in claimed} == claimed
    assert all(rounds[doc] == 1 for doc in claimed)  # "in round 1"
