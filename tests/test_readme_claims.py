"""README claims, checked against the engine: a sentence naming the terms through which the demo's
expansion reached a file must name the `via_term` the trace records for that file; the demo's figures
are what `evaluate` computes; the Step example runs, and what it says renders as a table does.
(The reference-comparison figures the README ends with are checked by the `-m slow` and
`-m reference` suites; the other measured figures live in docs/performance.md, with their commands.)"""

from __future__ import annotations

import re

import pytest

from workbench.engine import Run
from workbench.index.corpora import load_corpus, load_questions
from workbench.index.store import open_or_build
from workbench.judges.lexical import LexicalJudge
from workbench.params import Params

from .conftest import REPO

DOCS = REPO / "sample_corpora" / "internal_docs"


def test_readme_demo_names_the_terms_the_trace_records(tmp_path):
    readme = REPO / "README.md"
    text = " ".join(readme.read_text(encoding="utf-8").split())
    m = re.search(
        r"the Chinese role table through the term “([^”]+)” and the English gateway file through the "
        r"term “([^”]+)”",
        text,
    )
    assert m, "README: the demo paragraph no longer names the terms; update this test with it"
    claimed = {"zh/roles.md": m.group(1), "api/gateway.md": m.group(2)}
    index, _ = open_or_build(load_corpus(DOCS), tmp_path / "docs.sqlite")
    question = next(
        q
        for q in load_questions(REPO / "sample_corpora" / "internal_docs.questions.jsonl")
        if q.question.startswith("用户登录以后")
    )
    p = Run(index, question, Params(), LexicalJudge(index)).run().frames()["passages"]
    arrived = p[p["via_term"].notna()].sort_values("round").drop_duplicates("document")
    via = dict(zip(arrived["document"], arrived["via_term"]))
    rounds = dict(zip(arrived["document"], arrived["round"]))
    assert {doc: via.get(doc) for doc in claimed} == claimed
    assert all(rounds[doc] == 1 for doc in claimed)  # "in round 1"


@pytest.mark.slow
def test_readme_demo_figures_are_what_the_demo_computes(tmp_path):
    """The per-judge R@10 figures the README quotes for the demo's 9 sample questions are
    the ones `evaluate` (which the demo prints from) gives now."""
    from workbench.runs.evaluation import evaluate
    from workbench.runs.options import RunOptions

    text = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    m = re.search(
        r"BM25 R@10 (\d+\.\d+), SAG2 with the offline lexical judge (\d+\.\d+), with the semantic judge "
        r"(\d+\.\d+), with the shipped learned judge (\d+\.\d+) .*?the oracle ceiling (\d+\.\d+)",
        text,
    )
    assert m, "README: the demo's figures sentence changed; update this test with it"
    claimed = dict(zip(("bm25", "lexical", "semantic", "learned", "oracle"), map(float, m.groups())))
    index, _ = open_or_build(load_corpus(DOCS), tmp_path / "docs.sqlite")
    questions = load_questions(REPO / "sample_corpora" / "internal_docs.questions.jsonl")
    got = {
        name: evaluate(index, questions, name, Params(), RunOptions(progress=False)).metrics["R@10"] for name in claimed
    }
    assert got == claimed


@pytest.mark.slow
def test_readme_step_example_runs_and_every_object_renders_as_a_table(tmp_path):
    """The README's "Step" example runs as written (in a fresh process, from a folder holding
    `sample_corpora/`), and each object it names as rendering in a notebook has a `_repr_html_`
    that gives a table: `Params`, `Run`, the `RoundState` of `run.step()` and the `Trace`."""
    import subprocess
    import sys

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    m = re.search(r"in a notebook (.*?) render as\s+a compact table:\s*```python\n(.*?)```", readme, re.S)
    assert m, "README: the Step example (and its 'render as a compact table' claim) changed; update this test with it"
    named = re.findall(r"`(\w+)`", m.group(1))
    assert named == ["Params", "Run", "RoundState", "Trace"]
    (tmp_path / "sample_corpora").symlink_to(REPO / "sample_corpora", target_is_directory=True)
    check = (
        "\nfor obj in (run.params, run, state, trace):\n"
        "    page = obj._repr_html_()\n"
        "    assert '<table>' in page, (type(obj).__name__, page[:200])\n"
        "    print(type(obj).__name__)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", m.group(2) + check],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == named
