"""Judges: one narrow interface, (question, candidates, context) -> one probability each.

    judge(question: str, candidates: list[dict], context: list[dict]) -> list[float]

Each candidate dict has "unit_id", "title", "text" and "document"; each context dict has
"unit_id", "title", "text" and, in the final round, "previous_score". A judge object has
a `name`, a `key` (everything that changes its answers, for caching) and `judge(...)`.
"""

from workbench.judges.base import (
    FunctionJudge,
    JudgeTimeout,
    JudgeTimeoutSetting,
    call_with_time_limit,
    judge_timeout_from_env,
)
from workbench.judges.lexical import LexicalJudge, OracleJudge, passage_tokens
from workbench.judges.registry import (
    JUDGE_KINDS,
    JudgeKind,
    JudgeSpec,
    auto_reason,
    default_judge,
    judge_help,
    judge_key,
    judge_names,
    make_judge,
    register_judge_kind,
    resolve_judge,
)
from workbench.judgment import JudgeError, JudgmentMemo, validate_scores
from workbench.protocols import Judge


def __getattr__(name: str):
    if name == "OFFLINE_JUDGES":  # the old hand-written list, now from the registry (docs/deprecations.md)
        import warnings

        from workbench.deprecation import deprecated
        from workbench.judges import registry

        deprecated("workbench.judges.OFFLINE_JUDGES is deprecated: use judge_names() (every kind, from the registry)")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return registry.OFFLINE_JUDGES
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "JUDGE_KINDS",
    "FunctionJudge",
    "Judge",
    "JudgeError",
    "JudgeKind",
    "JudgeSpec",
    "JudgeTimeout",
    "JudgeTimeoutSetting",
    "JudgmentMemo",
    "LexicalJudge",
    "OracleJudge",
    "auto_reason",
    "call_with_time_limit",
    "default_judge",
    "judge_help",
    "judge_key",
    "judge_names",
    "judge_timeout_from_env",
    "make_judge",
    "passage_tokens",
    "register_judge_kind",
    "resolve_judge",
    "validate_scores",
]
