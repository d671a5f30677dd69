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
    OFFLINE_JUDGES,
    JudgeKind,
    JudgeSpec,
    auto_reason,
    default_judge,
    judge_key,
    make_judge,
    resolve_judge,
)
from workbench.judgment import Judge, JudgeError, JudgmentMemo, validate_scores

__all__ = [
    "JUDGE_KINDS",
    "OFFLINE_JUDGES",
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
    "judge_key",
    "judge_timeout_from_env",
    "make_judge",
    "passage_tokens",
    "resolve_judge",
    "validate_scores",
]
