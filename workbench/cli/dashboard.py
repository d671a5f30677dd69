"""`sag2wb dashboard [CORPUS] [--question ID] [--judge J]`: serve the dashboard with Voilà.

Checks everything it can first (the corpus loads, the questions file parses and its gold
names documents of the corpus, the question id exists, the judge is known), so a mistake is
one line on the command line, not a broken page. Then runs `python -m widgets.voila
notebooks/dashboard.ipynb` (the kernel ends when its page closes, no CDN request) and hands
the notebook its choices in `SAG2WB_DASHBOARD_*` variables, paths made absolute (the kernel
runs in the notebook's folder, not here). With no CORPUS: the bundled teaching example
(`workbench.runs.examples.default_example()`). It writes no files (the notebook's index goes to
the temp folder).
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
from pathlib import Path

from workbench.cli.errors import CLIError
from workbench.cli.options import number
from workbench.index.corpora import check_gold, find_questions, load_corpus, load_questions
from workbench.judges.registry import JudgeSpec, judge_help
from workbench.runs.examples import bundled_paths, default_example

VARIABLES = (
    "SAG2WB_DASHBOARD_CORPUS",
    "SAG2WB_DASHBOARD_QUESTIONS",
    "SAG2WB_DASHBOARD_QUESTION",
    "SAG2WB_DASHBOARD_JUDGE",
)


def add_parser(sub) -> None:
    p = sub.add_parser(
        "dashboard",
        help="serve the trajectory dashboard in the browser (Voilà); no CORPUS: the bundled teaching example",
    )
    p.add_argument(
        "corpus",
        nargs="?",
        help="a folder of .md/.txt files, a corpus.json or a folder holding one "
        "(default: the bundled encyclopedia, question enc-33, semantic judge)",
    )
    p.add_argument(
        "--questions",
        metavar="FILE",
        help="a questions .jsonl (default: CORPUS.questions.jsonl next to the folder, or questions.jsonl inside)",
    )
    p.add_argument("--question", metavar="ID", help="the question to open on (default: the file's first)")
    p.add_argument(
        "--judge",
        metavar="J",
        help=judge_help(),
    )
    p.add_argument(
        "--port", type=number(int, minimum=1, maximum=65535), default=8866, help="the port to serve on (default 8866)"
    )
    p.add_argument("--ip", default="127.0.0.1", help="the address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--no-browser", action="store_true", help="do not open a browser tab; just print the address")
    p.set_defaults(func=cmd_dashboard)


def dashboard_notebook() -> Path:
    spec = importlib.util.find_spec("widgets")  # found, not imported: the CLI sits below widgets
    if spec is None or not spec.origin:
        raise CLIError("the widgets package is not installed (pip install -e . from the checkout)")
    notebook = Path(spec.origin).resolve().parents[1] / "notebooks" / "dashboard.ipynb"
    if not notebook.is_file():
        raise CLIError(f"{notebook}: the dashboard notebook is missing (it ships with the checkout)")
    return notebook


def dashboard_choices(args) -> dict:
    """The checked choices as the notebook's environment variables (absolute paths)."""
    question, judge = args.question, args.judge
    if args.corpus is None:
        example = default_example()
        corpus, default_questions = bundled_paths(example.corpus)
        questions = Path(args.questions).resolve() if args.questions else default_questions
        if not args.questions:
            question = question or example.question_id
        judge = judge or example.judge
    else:
        corpus = Path(args.corpus).resolve()
        if not corpus.exists():
            raise CLIError(f"{args.corpus}: no such file or folder")
        found = Path(args.questions) if args.questions else find_questions(corpus)
        if found is None:
            raise CLIError(
                f"{args.corpus}: no questions file next to it ({corpus.name}.questions.jsonl) or inside "
                "(questions.jsonl); pass --questions FILE"
            )
        questions = found.resolve()
    source = corpus / "corpus.json" if corpus.is_dir() and (corpus / "corpus.json").is_file() else corpus
    units = load_corpus(source)
    loaded = load_questions(questions)
    if not loaded:
        raise CLIError(f"{questions}: no questions in the file")
    check_gold(loaded, {u.document for u in units}, questions)
    ids = [q.id for q in loaded]
    if question is not None and question not in ids:
        shown = ", ".join(ids[:8]) + (f" … ({len(ids)} in all)" if len(ids) > 8 else "")
        raise CLIError(f"--question {question!r}: no such question in {questions}; the questions are {shown}")
    judge = str(JudgeSpec.parse(judge or "auto"))  # an unknown judge fails here (JudgeError)
    return {
        "SAG2WB_DASHBOARD_CORPUS": str(corpus),
        "SAG2WB_DASHBOARD_QUESTIONS": str(questions),
        "SAG2WB_DASHBOARD_QUESTION": question or ids[0],
        "SAG2WB_DASHBOARD_JUDGE": judge,
    }


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def cmd_dashboard(args) -> int:
    choices = dashboard_choices(args)
    notebook = dashboard_notebook()
    argv = [sys.executable, "-m", "widgets.voila", str(notebook), f"--port={args.port}", f"--Voila.ip={args.ip}"]
    argv += ["--Voila.port_retries=0"] + (["--no-browser"] if args.no_browser else [])
    print(
        f"sag2wb dashboard: {choices['SAG2WB_DASHBOARD_QUESTION']} of {choices['SAG2WB_DASHBOARD_CORPUS']} "
        f"with the {choices['SAG2WB_DASHBOARD_JUDGE']} judge at http://{args.ip}:{args.port}/ (Ctrl-C stops it)",
        flush=True,
    )
    env = {**{k: v for k, v in os.environ.items() if k not in VARIABLES}, **choices}
    proc = subprocess.Popen(argv, env=env)
    try:
        # a terminated `sag2wb dashboard` ends its Voilà server too, not only on Ctrl-C
        previous = signal.signal(signal.SIGTERM, _interrupt)
    except ValueError:  # not the main thread: no handler, Ctrl-C still works
        previous = None
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    if code != 0:
        raise CLIError(f"Voilà exited with status {code}: its own message is above (a port in use: try --port)")
    return 0
