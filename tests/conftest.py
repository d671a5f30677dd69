"""Shared fixtures: small hand-checkable indexes built from inline passages."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from workbench.index.corpora import Unit
from workbench.index.store import Index

REPO = Path(__file__).resolve().parent.parent
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
