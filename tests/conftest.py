"""Shared pieces of the tests: the repository's paths (`REPO`, `SAMPLES`, `ENC`), small
hand-checkable indexes built from inline passages, the encyclopedia sample's index (built once
per session: `enc_db`, `enc_index`), the reliability suite's `world`, and the two ways to run the
command: `sag2wb(...)` (a real process) and `sag2wb_here(...)` (workbench.cli's main in this one)."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.index.corpora import load_corpus
from workbench.index.store import Index
from workbench.index.units import Unit

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_corpora"
ENC = SAMPLES / "encyclopedia"
SHARED_DATA = Path(os.environ.get("SAG2WB_SHARED_DATA", REPO.parent / "shared" / "data"))


def units_from(passages) -> list[Unit]:
    """[(title, text), ...] -> benchmark-style units (one unit per passage)."""
    return [
        Unit(title=t, heading="", body=x, document=t, source="inline", location=f"item {i}")
        for i, (t, x) in enumerate(passages)
    ]


def build_index(tmp_path, passages, name="ix.sqlite") -> Index:
    return Index.build(units_from(passages), tmp_path / name)


# A tiny 2-hop world: the question names the film; the director's birthplace is only in
# the director's passage, reachable through the name "Mara Quell".
FILM_WORLD = [
    ("Glass Harbour", "Glass Harbour is a 1961 drama film directed by Mara Quell. It was shot in Vellor."),
    ("Mara Quell", "Mara Quell was a film director. She was born in Tessaly and studied painting."),
    ("Tessaly", "Tessaly is a river town known for bridges."),
    ("Glass Harbor (band)", "Glass Harbor is a band from Ostrow. The band released three albums."),
    ("Ostrow", "Ostrow is a port city with a film festival."),
    ("José Arriaga", "José Arriaga was a composer born in Lumen. He scored the film Glass Harbour."),
    ("Lumen", "Lumen is a hill village."),
    ("Harbour Lights", "Harbour Lights is a 1970 film directed by Piet Oduya."),
]


@pytest.fixture
def film_index(tmp_path) -> Index:
    return build_index(tmp_path, FILM_WORLD)


def shared_data(*parts) -> Path:
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"benchmark data not found at {path}")
    return path


# Bridge world: the director's passage shares no token with the question, so only
# expansion through the name "Mara Quell" reaches it; distractors share surface terms.
BRIDGE_WORLD = [
    ("Glass Harbour", "Glass Harbour is a 1961 drama film directed by Mara Quell."),  # 1
    ("Mara Quell", "Mara Quell grew up in Tessaly. Mara Quell painted rivers."),  # 2
    ("Tessaly", "Tessaly is a river town known for bridges."),  # 3
    ("Glass Harbor (band)", "Glass Harbor is a band from Ostrow. The band released albums."),  # 4
    ("Harbour Lights", "Harbour Lights is a 1970 film by a famous director born in Ostrow."),  # 5
    ("Ostrow", "Ostrow is a port city."),  # 6
    ("Quell family", "The Quell family ran a bakery."),  # 7
    ("Painters", "Painters of rivers include several artists."),  # 8
]


def title_judge(scores: dict, default: float = 0.1):
    """A function judge that scores by title, for hand-checked trajectories."""

    def judge(question, candidates, context):
        return [scores.get(c["title"], default) for c in candidates]

    return judge


@pytest.fixture(autouse=True, scope="session")
def _embedding_cache_in_tmp(tmp_path_factory):
    """The semantic judge's embedding cache goes to a session temp dir, never ~/.cache."""
    old = os.environ.get("SAG2WB_EMBED_CACHE")
    os.environ["SAG2WB_EMBED_CACHE"] = str(tmp_path_factory.mktemp("embeddings"))
    yield
    if old is None:
        os.environ.pop("SAG2WB_EMBED_CACHE", None)
    else:
        os.environ["SAG2WB_EMBED_CACHE"] = old


@pytest.fixture(scope="session")
def enc_db(tmp_path_factory) -> Path:
    """The encyclopedia sample's index file (169 passages), built once per session: read it, never change it."""
    db = tmp_path_factory.mktemp("encyclopedia") / "enc.sqlite"
    Index.build(load_corpus(ENC / "corpus.json"), db, source="encyclopedia").close()
    return db


@pytest.fixture(scope="session")
def enc_index(enc_db) -> Index:
    """`enc_db` opened once per session (shared: never close or update it)."""
    return Index(enc_db)


@pytest.fixture
def world(tmp_path) -> dict:
    """tests/reliability_world.py's small world (index, questions, a switchable judge) under tmp_path."""
    from .reliability_world import make_world

    return make_world(tmp_path / "w")


def cli_env(env: dict | None = None) -> dict:
    """This environment with the checkout importable, then `env` over it (a None value removes a variable)."""
    out = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    for name, value in (env or {}).items():
        if value is None:
            out.pop(name, None)
        else:
            out[name] = str(value)
    return out


def sag2wb(*args, cwd=None, env=None, input=None, timeout=300) -> subprocess.CompletedProcess:
    """`sag2wb ARGS` as a real process (`python -m workbench.cli`): its exit code and output as
    the user sees them. `env`: variables over this environment; `timeout` bounds a hang."""
    return subprocess.run(
        [sys.executable, "-m", "workbench.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd or REPO,
        env=cli_env(env),
        input=input,
        timeout=timeout,
    )


def reference_adapter(python, corpus, questions, out, judge, workdir, *args, timeout) -> subprocess.CompletedProcess:
    """The reference implementation, a black box in its own environment (`python`), on `corpus` and
    `questions` through benchmarks/reference_adapter.py: its trajectories in `out`, its files in
    `workdir`; `args`: the adapter's other options (--jev-url, --payload-style, --limit, ...)."""
    return subprocess.run(
        [
            python,
            str(REPO / "benchmarks" / "reference_adapter.py"),
            *("--corpus", str(corpus), "--questions", str(questions), "--out", str(out)),
            *("--judge", judge, "--workdir", str(workdir), *map(str, args)),
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def sag2wb_here(*args, cwd=None, env=None, input=None) -> subprocess.CompletedProcess:
    """`sag2wb ARGS` through workbench.cli's main in this process (its error mapping included; no
    interpreter start): the same CompletedProcess as `sag2wb`. An exception escaping main fails the test."""
    from workbench.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    saved = dict(os.environ)
    stdin = sys.stdin
    try:
        os.environ.clear()
        os.environ.update(cli_env(env))
        if input is not None:
            sys.stdin = io.StringIO(input)
        with contextlib.chdir(cwd or os.getcwd()), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main([str(a) for a in args])
    finally:
        os.environ.clear()
        os.environ.update(saved)
        sys.stdin = stdin
    return subprocess.CompletedProcess([str(a) for a in args], rc, out.getvalue(), err.getvalue())
