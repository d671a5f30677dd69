"""The progress bar of a run: questions (x configurations) done, judgments per second and,
for a judge that counts requests (JEV), requests and cost so far.

>>> from workbench.judges.jev import make_jev_judge
>>> jev_judge = make_jev_judge(endpoint=judge_server.url, cache_dir="jev-cache")   # a local judge server
>>> bar = Progress(9, "jev", judges=[jev_judge])
>>> jev_judge.judge("Who directed Glass Harbour?", [{"unit_id": 1, "title": "Glass Harbour", "text": "A film."},
...                                                 {"unit_id": 2, "title": "Porto Calven", "text": "A town."}], [])
[0.69163..., 0.0]
>>> bar.update(1, judgments=2); bar.usage()["requests"], bar.judgments
(1, 2)
>>> bar.close(); jev_judge.close()
"""

from __future__ import annotations

import time

from tqdm.auto import tqdm

from workbench.protocols import summed_usage


class _Quiet:
    def update(self, n):
        pass

    def set_postfix(self, postfix, refresh=False):
        pass

    def close(self):
        pass


def progress_bar(total: int, desc: str, enabled: bool):
    """tqdm's notebook-aware bar, or a silent stand-in."""
    return tqdm(total=total, desc=desc, leave=False) if enabled else _Quiet()


class Progress:
    """One tqdm bar over questions × configurations. `judges`: the caller's judges, whose
    counters are read (local executors); remote outcomes add theirs with `add_usage`."""

    def __init__(self, total: int, desc: str, enabled: bool = True, judges=()):
        self.bar = progress_bar(total, desc, enabled)
        self.judges = [j for j in judges if j is not None]
        self.remote: dict = {}
        self.judgments = 0
        self.t0 = time.perf_counter()
        self._start = summed_usage(self.judges)

    def add_usage(self, usage: dict) -> None:
        for k, v in usage.items():
            self.remote[k] = self.remote.get(k, 0) + v

    def usage(self) -> dict:
        out = {k: v - self._start.get(k, 0) for k, v in summed_usage(self.judges).items()}
        for k, v in self.remote.items():
            out[k] = out.get(k, 0) + v
        return out

    def update(self, n: int = 1, judgments: int = 0) -> None:
        self.judgments += judgments
        seconds = max(time.perf_counter() - self.t0, 1e-9)
        postfix = {"judgments/s": f"{self.judgments / seconds:.0f}"}
        u = self.usage()
        if u.get("requests"):
            postfix["requests"] = u["requests"]
            postfix["cost"] = f"{u.get('cost', 0):.4g}" + ("+unknown" if u.get("usage_unknown") else "")
        self.bar.set_postfix(postfix, refresh=False)
        self.bar.update(n)

    def close(self) -> None:
        self.bar.close()
