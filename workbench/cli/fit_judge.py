"""`sag2wb fit-judge`: fit a learned judge on a teacher's judgments, cross-validated by question.

sag2wb fit-judge --db DB --questions Q.jsonl --teacher oracle --out J.json
sag2wb fit-judge --db DB --questions Q.jsonl --teacher cache:STUDY-CACHE --jev-endpoint URL --out J.json
sag2wb fit-judge --db DB --questions Q.jsonl --teacher semantic --out J.json      # distil a judge
sag2wb eval --db DB --questions Q.jsonl --judge learned:J.json --out OUT.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from workbench import safeio
from workbench.cli.io_roles import checked_before_work, declare_judge_inputs, param_files, path_option
from workbench.cli.options import number
from workbench.index.corpora import check_gold, load_questions
from workbench.index.store import Index
from workbench.judges.features import CONTEXT_WEIGHTS, FEATURES, MODEL_FEATURES, FeatureError, check_names
from workbench.judges.learned import DEFAULT_L2, SCHEMA, model_json
from workbench.params import Params
from workbench.runs.tasks import require_gold, require_unique_ids
from workbench.runs.training import (
    DEFAULT_CONTEXT_WEIGHTS,
    DEFAULT_FOLDS,
    MIN_EXAMPLES,
    MIN_QUESTIONS,
    TrainingError,
    fit_judge,
    teacher_for,
)


def add_parser(sub) -> None:
    p = sub.add_parser("fit-judge", help="fit a learned judge on a teacher's judgments (cross-validated by question)")
    path_option(p, "--db", role="input", required=True, help="the index (`sag2wb index`)")
    path_option(p, "--questions", role="input", required=True, help="questions .jsonl with supporting_titles (gold)")
    p.add_argument(
        "--teacher",
        default="oracle",
        help="oracle (gold labels), cache:DIR (a JEV judgment cache, replayed), or any judge (its scores are "
        "soft targets), e.g. semantic",
    )
    path_option(p, "--out", role="output", required=True, help="the model file (JSON) to write")
    p.add_argument(
        "--folds",
        type=number(int, minimum=2, maximum=1000),
        default=DEFAULT_FOLDS,
        help=f"cross-validation folds by question (default {DEFAULT_FOLDS})",
    )
    p.add_argument(
        "--l2",
        type=number(float, minimum=0),
        default=DEFAULT_L2,
        help=f"L2 penalty on standardised weights (default {DEFAULT_L2})",
    )
    p.add_argument(
        "--features",
        default=None,
        help=f"comma-separated subset of: {', '.join(FEATURES)} (default all; --no-model drops the model's)",
    )
    p.add_argument("--no-model", action="store_true", help="no embedding-model features (no model is loaded)")
    p.add_argument(
        "--context-weights",
        choices=CONTEXT_WEIGHTS,
        default=DEFAULT_CONTEXT_WEIGHTS,
        help="how the bridge features weigh a context passage: its previous score over the context's best "
        f"(relative) or the previous score itself (previous, the first fits' rule); default {DEFAULT_CONTEXT_WEIGHTS}",
    )
    p.add_argument(
        "--on-policy", action="store_true", help="add the model's own trajectories, labelled by the teacher (DAgger)"
    )
    p.add_argument(
        "--rounds", type=number(int, minimum=0, maximum=2), default=None, help="expansion rounds H (default 2)"
    )
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="any Params field")
    p.add_argument("--force", action="store_true", help="replace an existing --out file that is not a model file")
    p.add_argument("--quiet", action="store_true", help="print only the summary line")
    g = p.add_argument_group("a JEV cache as teacher (cache:DIR)")
    g.add_argument("--jev-endpoint", default=None, help="the endpoint the cached study used (typesafe, a URL, ...)")
    g.add_argument("--jev-model", default=None, help="the model the cached study asked")
    g.add_argument(
        "--payload-style",
        choices=["inline", "stateful"],
        default="stateful",
        help="the payload style the cached study used (default stateful)",
    )
    p.set_defaults(func=cmd_fit_judge)


def declare_io(args, io) -> None:
    io.input("--db", args.db)
    io.input("--questions", args.questions)
    teacher = str(args.teacher or "")
    if teacher.startswith("cache:"):
        io.input("--teacher", teacher[len("cache:") :] or None)  # the JEV cache folder it replays
    elif teacher != "oracle":
        declare_judge_inputs(args, io, "--teacher")  # learned:J.json, FILE.py:NAME: never replaced
    for path in param_files(args.param):
        io.input("--param", path)
    io.output("--out", args.out, ours=is_model_file)  # replaced only when recorded as ours, and a model


def is_model_file(path: Path) -> bool:
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("schema") == SCHEMA
    except (OSError, ValueError, AttributeError):
        return False


def feature_names(args) -> tuple[str, ...]:
    names = tuple(FEATURES) if not args.features else tuple(n.strip() for n in args.features.split(",") if n.strip())
    if args.no_model:
        names = tuple(n for n in names if n not in MODEL_FEATURES)
    try:
        return check_names(names)
    except FeatureError as exc:
        raise TrainingError(f"--features: {exc}") from None


def cmd_fit_judge(args) -> int:
    out = Path(args.out)  # checked before any work by declare_io (workbench/safeio.py: Outputs)
    if not checked_before_work(args):  # called without the CLI's main: check here
        safeio.check_output(out, inputs=[args.questions, args.db], ours=is_model_file, force=args.force)
    if args.folds < 2:
        raise TrainingError(f"--folds {args.folds}: cross-validation needs at least 2 folds")
    if args.l2 < 0:
        raise TrainingError(f"--l2 {args.l2}: the penalty must be >= 0")
    names = feature_names(args)
    index = Index(args.db)
    questions = load_questions(args.questions)
    check_gold(questions, set(index.documents.values()), args.questions)
    require_unique_ids(questions, args.questions)
    params = Params().with_assignments(args.param)
    if args.rounds is not None:
        params = params.replace(H=args.rounds)
    teacher = teacher_for(
        args.teacher, index, endpoint=args.jev_endpoint, model=args.jev_model, payload_style=args.payload_style
    )
    require_gold(questions, args.teacher, args.questions)  # the oracle teacher: every question needs gold
    say = (lambda line: None) if args.quiet else (lambda line: print(line, flush=True))
    say(
        f"fit-judge: {len(questions)} questions, teacher {args.teacher}, {len(names)} features, {args.folds}-fold "
        f"cross-validation by question (needs >= {MIN_EXAMPLES} examples from >= {MIN_QUESTIONS} questions)"
    )

    def fold_line(row: dict) -> None:
        say(
            f"  fold {row['fold']}: {row['questions']} held-out questions (fitted on {row['train_questions']}): "
            f"R@5 {_fmt(row['R@5'])}  R@10 {_fmt(row['R@10'])}  AE@10 {_fmt(row['AE@10'])}"
        )

    model, info = fit_judge(
        index,
        questions,
        teacher,
        names=names,
        folds=args.folds,
        l2=args.l2,
        on_policy=args.on_policy,
        params=params,
        teacher_name=args.teacher,
        report=fold_line,
        context_weights=args.context_weights,
    )
    info["fitted_on"] = {
        "db": str(args.db),
        "db_sha256": safeio.file_sha256(args.db),
        "questions": str(args.questions),
        "questions_sha256": safeio.file_sha256(args.questions),
        "params": params.to_dict() if hasattr(params, "to_dict") else str(params),
    }
    # how long it took is said, not stored: the same fit on the same inputs is the same file (and sha256,
    # and so the same cache keys and trace names)
    seconds = info.pop("seconds")
    model.info = info
    try:
        text = model_json(model)
    except ValueError:  # strict JSON: a weight or figure that is not a finite number
        raise TrainingError(
            f"teacher {args.teacher}: the fit gave weights that are not finite numbers (targets that one "
            f"feature separates perfectly?); give --l2 above {args.l2}, or other questions"
        ) from None
    out.parent.mkdir(parents=True, exist_ok=True)
    safeio.clean_stale_temps(out.parent, out.name)  # left by a fit killed mid-write
    safeio.atomic_write_text(out, text, record="fit-judge --out")
    cv = info["cv"]
    sha = json.loads(text)["sha256"]
    if not cv["folds"]:
        print(
            "fit-judge: fewer than 2 questions with gold labels (supporting_titles): the model is not cross-validated",
            file=sys.stderr,
        )
    if info["teacher_stopped"]:
        print(
            f"fit-judge: the teacher could not answer {info['teacher_stopped']} of {len(questions)} question(s) to the "
            f"end (their earlier rounds are used)",
            file=sys.stderr,
        )
    print(
        f"learned:{out}: {info['examples']} examples from {info['questions']} questions ({info['targets']}); "
        f"cross-validated R@5 {_fmt(cv['R@5'])}  R@10 {_fmt(cv['R@10'])}  AE@10 {_fmt(cv['AE@10'])} over "
        f"{cv['folds']} folds; sha256 {sha[:12]}; {seconds['total']:.1f} s"
    )
    return safeio.EXIT_OK


def _fmt(v) -> str:
    return "–" if v is None else f"{v:.2f}"
