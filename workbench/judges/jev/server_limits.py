"""What the judge server bounds, so that every request gets an answer: the time a client may take
to send one (a whole-request deadline, not a per-read timeout) and the work one generic request
may ask for (docs/reliability-judges.md).

A per-read socket timeout restarts with every byte: a client trickling headers or a body at
1 byte/s kept a connection (and its thread) past any limit. `DeadlineReader` gives each read
only what is left of the request's deadline.

>>> import socket
>>> a, b = socket.socketpair()
>>> reader = DeadlineReader(a)
>>> reader.start(0.05)
>>> _ = b.send(b"x")
>>> bytearray_ = bytearray(8); reader.readinto(bytearray_), reader.received
(1, 1)
>>> reader.readinto(bytearray_)        # nothing more arrives within the deadline
Traceback (most recent call last):
...
workbench.judges.jev.server_limits.RequestDeadline
>>> a.close(); b.close()
"""

from __future__ import annotations

import io
import time

from workbench.judges.jev.served import text_of

# A generic question is judged once per option or level, each time with the whole state as its passage:
# its cost is (judge calls) x (the state's length), not the body's size. Measured with the slowest
# built-in judge (data-hash, ~19 ms per call on a 1 MB state, ~75 us per call on a short one), these
# keep one request within ~10 s, well under a client's 60 s timeout.
MAX_JUDGE_CALLS = 100_000
MAX_JUDGED_CHARACTERS = 256 * 10**6


class TooMuchWork(Exception):
    """A valid request that asks for more judging than one request may: HTTP 413 with the limit."""


class RequestDeadline(Exception):
    """The request did not arrive within the read timeout (not an OSError: the handler answers 408)."""


class DeadlineReader(io.RawIOBase):
    """A connection's bytes, every read bounded by what is left of the current request's deadline."""

    def __init__(self, sock) -> None:
        self.sock = sock
        self.deadline: float | None = None
        self.received = 0  # bytes read on this connection so far

    def start(self, seconds: float | None) -> None:
        """The next request must arrive within `seconds` from now (None: no limit)."""
        self.deadline = None if seconds is None else time.monotonic() + seconds

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise RequestDeadline
            self.sock.settimeout(left)
        try:
            n = self.sock.recv_into(buffer)
        except TimeoutError:
            raise RequestDeadline from None
        self.received += n
        return n


def generic_work_problem(state, questions: dict) -> str | None:
    """Why a generic request asks for more work than one request may (a 413's message), or None.

    >>> generic_work_problem("s", {"q": {"type": "choice", "criteria": {str(i): None for i in range(255)}}}) is None
    True
    >>> generic_work_problem("x" * 10**6, {f"q{i}": {"type": "noul"} for i in range(300)})[:61]
    '300 judge calls over a state of 1000000 characters: 300000000'
    """
    calls = sum(1 if q["type"] == "noul" else len(q["criteria"]) for q in questions.values())
    if calls > MAX_JUDGE_CALLS:
        return (
            f"{calls} judge calls (one per noul question, per choice option, per score level) are over "
            f"this server's limit of {MAX_JUDGE_CALLS} per request; send the questions in several requests"
        )
    size = len(text_of(state))
    if calls * size > MAX_JUDGED_CHARACTERS:
        return (
            f"{calls} judge calls over a state of {size} characters: {calls * size} characters judged, over "
            f"this server's limit of {MAX_JUDGED_CHARACTERS} per request; send fewer questions per request"
        )
    return None
