"""Waiting for a worker thread's result from the main thread, in a way Ctrl-C can interrupt."""

from __future__ import annotations

import concurrent.futures
from typing import TypeVar

T = TypeVar("T")
POLL_S = 0.2


def result(job: concurrent.futures.Future[T]) -> T:
    """``job.result()``, waking every POLL_S: a Ctrl-C that the kernel hands to a worker thread only marks it
    pending, and a wait with no timeout would not see it until the job ends (seen: a hang of ``nsync
    analyze`` after Ctrl-C, about 1 run in 100)."""
    while not concurrent.futures.wait([job], timeout=POLL_S).done:
        pass
    return job.result()
