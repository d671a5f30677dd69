"""Token counts for request batching: the o200k_base encoding, offline (quicktok's bundled
vocabulary), counted by our compiled kernel over quicktok's data files (`o200k_kernel`: ~20 ms to
load against quicktok's 0.66-0.80 s, the same counts) or by quicktok itself without a compiler.
Checked against the reference implementation's bundled o200k counter on 14,293
texts (every 2Wiki title and passage, request states and questions): 0 differences.

Counts are remembered (a count depends on the text only): a candidate's passage is counted
once however many rounds and requests it is planned in, and a request's state once although
both its planning and its sending read the count. Short texts (a passage, a question) are kept
by the tens of thousands, long ones (a request's state) only the most recent few, so the memory
stays bounded (~20 MiB at most for the long ones).

>>> count_tokens("Who directed Glass Harbour?")
5
"""

from __future__ import annotations

import functools
import threading

from workbench.judges.jev import o200k_kernel
from workbench.recent import Recent

SHORT_TEXT = 4_096  # characters: a text up to this long is remembered among the many
SHORT_KEPT = 16_384
LONG_KEPT = 64


_ENCODING: list = []
_ENCODING_LOCK = threading.Lock()


def _encoding():
    """quicktok's o200k_base tokenizer, loaded once (~1 s of CPU): the counter without a compiler,
    and for text UTF-8 cannot encode. Under a lock: with 16 questions at once, an unlocked cache
    let every question thread load its own copy at the first round."""
    if not _ENCODING:
        with _ENCODING_LOCK:
            if not _ENCODING:
                import quicktok  # a wheel with the vocabulary inside: no download

                _ENCODING.append(quicktok.get_encoding("o200k_base"))
    return _ENCODING[0]


_KERNEL: list = []  # [the compiled counter or None], found at the first count of the process


def _kernel():
    """`o200k_kernel.load()` once: it reads its switch from the environment at each call (two
    look-ups, as it was, cost ~11 us a count; 3,853 counts in 30 questions)."""
    if not _KERNEL:
        _KERNEL.append(o200k_kernel.load())  # load() builds under its own lock: a race appends the same
    return _KERNEL[0]


def load_tokenizer() -> None:
    """Load the counter now, in the process that builds a JEV judge: a process pool forked
    afterwards inherits it (each of 2 workers loading quicktok's cost ~0.4-0.9 s of CPU at the
    first round, issue 33); the judge needs it at its first call anyway."""
    if _kernel() is None:
        _encoding()


def _count(text: str) -> int:
    lib = _KERNEL[0] if _KERNEL else _kernel()
    if lib is not None:
        known = o200k_kernel.count(lib, text)
        if known is not None:
            return known
    # quicktok's own count: len(encode_ordinary(text)) without the list of ids (~35% less CPU on
    # 2Wiki passages; equal on the whole 2Wiki corpus and special-token text, tests/test_jev_plan_cost.py)
    return _encoding().count(text)


_count_short = functools.lru_cache(maxsize=SHORT_KEPT)(_count)
_long = Recent(LONG_KEPT)  # the most recent long texts' counts


def remember_count(text: str, tokens: int) -> None:
    """Record the count of a long text found otherwise (a request's state, summed from its parts
    by `payload.state_tokens`), so that counting it later reads this instead of encoding it."""
    if len(text) > SHORT_TEXT:
        _long.put(text, tokens)


def count_tokens(text: str) -> int:
    """o200k_base tokens of `text` (special-token text counts as ordinary text)."""
    if len(text) <= SHORT_TEXT:
        return _count_short(text)
    known = _long.get(text)
    if known is None:
        known = _count(text)
        remember_count(text, known)
    return known
