"""What can go wrong with JEV: the service, the key, a request, replay, a cache directory."""

from __future__ import annotations

from workbench.judges.cached import CacheMiss
from workbench.judgment import JudgeError
from workbench.safeio import InputError


class JEVError(JudgeError):
    """The JEV service failed or answered something unusable; the message says what and where."""


class JEVAuthError(JEVError):
    """Missing or rejected API key (never retried)."""


class JEVCacheMiss(JEVError, CacheMiss):
    """Replay (cache-only) mode met a judgment that is not in the cache."""


class JEVPayloadError(JEVError):
    """A request that cannot be built (e.g. a candidate too long for one request)."""


class JEVInputError(JEVError, InputError):
    """Bad input or environment around the JEV judge (a cache directory, an export file): one
    line naming the path and what to do; the CLI exits 2. Nothing about the service itself."""


class JEVCacheError(JEVInputError):
    """A JEV cache directory that cannot be used: not a directory, corrupt, unreadable."""
