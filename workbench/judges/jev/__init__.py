"""Hosted JEV: the paper's judge through a Noul-compatible service, batched, concurrent,
retried, and cached on disk (one entry per judgment) by a CachedJudge around it.

>>> from workbench.judges.jev import make_jev_judge
>>> judge = make_jev_judge(endpoint=judge_server.url, cache_dir=".sag2wb/jev-cache")  # "openrouter": the hosted one
>>> candidates = [{"unit_id": 1, "title": "Glass Harbour", "text": "A film."},
...               {"unit_id": 2, "title": "Porto Calven", "text": "A town."}]
>>> judge.judge("Who directed Glass Harbour?", candidates, [])   # here a local server's lexical judge answers
[0.69163..., 0.0]
>>> judge.close()

Modules: `payload` (instructions, request bodies, answers), `client` (endpoint, key, HTTP,
retries), `cache` (judgment keys, the cache directory, export/import, `sag2wb cache`),
`judge` (JEVJudge, JEVCachedJudge, make_jev_judge), `errors`, and `server` (a local Jev-compatible judge
server, imported on its own, with `reading`, its reading of a request, and `served`, what a
served judge answers).
"""

from workbench.judges.jev.cache import (
    CACHE_FILE,
    CACHE_KEY_PREFIX,
    DEFAULT_CACHE_DIR,
    ImportReport,
    JudgmentStore,
    cache_errors,
    cache_stats,
    check_cache_dir,
    export_cache,
    import_cache,
    judgment_key,
    judgment_keys,
    open_cache,
    open_store,
    request_keys,
)
from workbench.judges.jev.client import (
    ATTEMPTS,
    CONCURRENCY,
    DEFAULT_ENDPOINT,
    KEY_VARIABLES,
    PRESETS,
    SCRUBBED_LOGGERS,
    JEVClient,
    Preset,
    read_key,
    resolve_endpoint,
    scrub_known_keys,
)
from workbench.judges.jev.errors import (
    JEVAuthError,
    JEVCacheError,
    JEVCacheMiss,
    JEVError,
    JEVInputError,
    JEVPayloadError,
)
from workbench.judges.jev.instructions import DEFAULT_INSTRUCTIONS, INSTRUCTIONS, Template, get_instructions
from workbench.judges.jev.judge import USAGE_COUNTERS, JEVCachedJudge, JEVJudge, make_jev_judge
from workbench.judges.jev.payload import (
    INSTRUCTION_VERSION,
    MAX_QUESTIONS,
    MAX_REQUEST_TOKENS,
    PAYLOAD_STYLES,
    base_state,
    build_request,
    context_items,
    encode_request,
    estimate_request_tokens,
    estimate_tokens,
    parse_answer,
    plan_requests,
)
from workbench.judges.jev.reading import read_payload  # the server's reading of a request (moved from payload)

__all__ = [
    "ATTEMPTS",
    "CACHE_FILE",
    "CACHE_KEY_PREFIX",
    "CONCURRENCY",
    "DEFAULT_CACHE_DIR",
    "DEFAULT_ENDPOINT",
    "DEFAULT_INSTRUCTIONS",
    "INSTRUCTIONS",
    "INSTRUCTION_VERSION",
    "KEY_VARIABLES",
    "MAX_QUESTIONS",
    "MAX_REQUEST_TOKENS",
    "PAYLOAD_STYLES",
    "PRESETS",
    "SCRUBBED_LOGGERS",
    "USAGE_COUNTERS",
    "ImportReport",
    "JEVAuthError",
    "JEVCacheError",
    "JEVCacheMiss",
    "JEVCachedJudge",
    "JEVClient",
    "JEVError",
    "JEVInputError",
    "JEVJudge",
    "JEVPayloadError",
    "JudgmentStore",
    "Preset",
    "Template",
    "base_state",
    "build_request",
    "cache_errors",
    "cache_stats",
    "check_cache_dir",
    "context_items",
    "encode_request",
    "estimate_request_tokens",
    "estimate_tokens",
    "export_cache",
    "get_instructions",
    "import_cache",
    "judgment_key",
    "judgment_keys",
    "make_jev_judge",
    "open_cache",
    "open_store",
    "parse_answer",
    "plan_requests",
    "read_key",
    "read_payload",
    "request_keys",
    "resolve_endpoint",
    "scrub_known_keys",
]
