"""Captures with Debian's nsys 2022.4 take turns on a machine.

Two of its sessions at once now and then fail, exit 1 and no report ("sem_open", "Connection reset by peer",
"Failed to find session"): 3 times in about 200 captures made two at a time in this project's fresh-clone
suites, never with one at a time (and not in 70 made two at a time on an idle machine: rare, and not
understood). nsync's captures with an nsys older than 2023 therefore hold a lock for as long as nsys profiles
(an advisory lock on a file in /tmp, released by the kernel if nsync dies); one that finds it held says so and
waits. Newer nsys and everything else (the calibration run, the export, the analysis) run side by side.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path

TURNS_BEFORE = (2023,)  # nsys versions below this take turns
LOCK = Path("/tmp/nsync-nsys-2022.lock")


@contextlib.contextmanager
def one_capture_at_a_time(version: tuple[int, ...], say: Callable[[str], None], lock: Path = LOCK) -> Iterator[None]:
    """Hold the machine's turn for nsys ``version`` (no turn needed from 2023 on, or where the lock file cannot
    be opened: a capture is never refused for it)."""
    if version[:1] >= TURNS_BEFORE:
        yield
        return
    try:
        handle = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        yield
        return
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(
                "another nsync capture with nsys 2022 is running on this machine: waiting for it (two sessions of "
                "this nsys at once can fail)"
            )
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)  # (releases the lock)
