"""Everything README.md and docs/*.md name exists: repository paths (`workbench/...`, `docs/...`,
`benchmarks/...`, `notebooks/...`, `tests/...`, `sample_corpora/...`, `widgets/...`, `.ci/run`) and
relative Markdown links on disk, with the heading a link's #anchor names; every `sag2wb SUBCOMMAND`
written in code (a code span or block) in `sag2wb --help`, and every `--option` after it on that
command line in that subcommand's --help (read from one real process that prints every help)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

from .conftest import REPO

DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

# a repository path: one of these roots, not inside a longer path (../shared/data/..., ~/.cache/...)
PATH = re.compile(
    r"(?<![\w./~-])((?:workbench|docs|benchmarks|notebooks|tests|sample_corpora|widgets)/[\w./-]*|\.ci/run)(.?)"
)
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
SPAN = re.compile(r"`([^`\n]+)`")
COMMAND = re.compile(r"(?<![\w-])sag2wb ([a-z][a-z-]*)((?: [a-z][a-z-]*)?)([^\n]*)")
OPTION = re.compile(r"(?<![\w-])(--[a-zA-Z][\w-]*)")
PLACEHOLDER_AFTER = set("<{*[$")  # tests/test_<module>.py, runs/{a,b}: a pattern, not a path

HELP_SCRIPT = r"""
import contextlib, io, json, re, sys
from workbench.cli import main

def help_of(argv):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            main([*argv, "--help"])
        except SystemExit:
            pass
    return buf.getvalue()

def choices(text):
    m = re.search(r"\{([a-z,-]+)\}", text)
    return m.group(1).split(",") if m else []

top = help_of([])
out = {"": top}
for name in choices(top):
    text = out[name] = help_of([name])
    for sub in choices(text):
        out[f"{name} {sub}"] = help_of([name, sub])
print(json.dumps(out))
"""


@lru_cache(maxsize=1)
def cli_help() -> dict[str, str]:
    proc = subprocess.run(
        [sys.executable, "-c", HELP_SCRIPT], cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def code_text(markdown: str) -> list[str]:
    """The code of a Markdown text: fenced blocks (continuation lines joined) and inline spans."""
    blocks = [m.group(0).replace("\\\n", " ") for m in FENCE.finditer(markdown)]
    prose = FENCE.sub("", markdown)
    return blocks + [m.group(1) for m in SPAN.finditer(prose)]


def missing_paths(markdown: str, base: Path, root: Path = REPO) -> list[str]:
    """Repository paths and relative links a text names that are not on disk."""
    out = []
    for m in PATH.finditer(markdown):
        path, after = m.group(1).rstrip("."), m.group(2)
        if after in PLACEHOLDER_AFTER:
            continue
        if not (root / path).exists() and path not in out:
            out.append(path)
    for m in LINK.finditer(markdown):
        target, _, anchor = m.group(1).partition("#")
        if re.match(r"[a-z]+:", target):
            continue  # a URL
        path = base / target if target else None
        if path is not None and not path.exists():
            if target not in out:
                out.append(target)
        elif anchor and (path is None or path.suffix == ".md"):
            text = markdown if path is None else path.read_text(encoding="utf-8")
            if anchor not in heading_anchors(text):
                out.append(m.group(1))
    return out


def heading_anchors(markdown: str) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    titles = (line.lstrip("#").strip().lower() for line in FENCE.sub("", markdown).splitlines() if line.startswith("#"))
    return {re.sub(r"\s", "-", re.sub(r"[^\w\- ]", "", title)) for title in titles}


def missing_commands(markdown: str, helps: dict[str, str]) -> list[str]:
    """`sag2wb SUBCOMMAND [--option ...]` in code that `sag2wb --help` / `SUBCOMMAND --help` does not list."""
    out = []
    for code in code_text(markdown):
        for m in COMMAND.finditer(code):
            name, second, rest = m.group(1), m.group(2).strip(), m.group(3)
            if name not in helps:
                out.append(f"sag2wb {name}")
                continue
            key = f"{name} {second}" if f"{name} {second}" in helps else name
            line = re.split(r"\s#\s|\s\|\s|&&|;", rest)[0]  # up to a comment, a pipe or the next command
            known = set(OPTION.findall(helps[key]))
            out += [f"sag2wb {key} {opt}" for opt in OPTION.findall(line) if opt not in known]
    return out


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_path_named_exists(document):
    assert missing_paths(document.read_text(encoding="utf-8"), document.parent) == []


@pytest.mark.slow
@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_command_and_option_named_exists(document):
    assert missing_commands(document.read_text(encoding="utf-8"), cli_help()) == []


@pytest.mark.parametrize(
    "text, missing",
    [
        ("See `workbench/no_such_module.py` and `benchmarks/bench_engine.py`.", ["workbench/no_such_module.py"]),
        ("Run `tests/test_<module>.py` and `.ci/run`.", []),
        ("[the index](docs/no-such-page.md#top) and [ok](README.md)", ["docs/no-such-page.md"]),
        (
            "[a heading](docs/judges.md#no-such-heading), [one](docs/judges.md#current-figures)",
            ["docs/judges.md#no-such-heading"],
        ),
    ],
)
def test_a_missing_path_is_found(text, missing):
    assert missing_paths(text, REPO) == missing


@pytest.mark.parametrize(
    "text, missing",
    [
        ("```sh\nsag2wb frobnicate --db DB\n```", ["sag2wb frobnicate"]),
        ("`sag2wb eval --db DB --no-such-option 3 --out X`", ["sag2wb eval --no-such-option"]),
        (
            "```\nsag2wb cache export --cache-dir D \\\n    --no-such-file F   # a comment --ignored\n```",
            ["sag2wb cache export --no-such-file"],
        ),
        ("`sag2wb eval --db DB --questions Q --out O` and, in prose, sag2wb frobnicates", []),
    ],
)
def test_a_missing_command_or_option_is_found(text, missing):
    assert missing_commands(text, cli_help()) == missing
