"""Captures with nsys 2022 take turns on a machine (nsync.nsys.turns): a second one waits, and says so."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path

from nsync.nsys.turns import one_capture_at_a_time


def _held_for(lock: Path, seconds: float) -> threading.Event:
    """Another capture's turn: the lock held by a thread for ``seconds``; the event is set once it holds it."""
    holding = threading.Event()

    def hold() -> None:
        handle = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        fcntl.flock(handle, fcntl.LOCK_EX)
        holding.set()
        time.sleep(seconds)
        os.close(handle)

    threading.Thread(target=hold, daemon=True).start()
    assert holding.wait(5)
    return holding


def test_a_capture_with_nsys_2022_waits_for_the_one_running_and_says_so(tmp_path: Path) -> None:
    lock = tmp_path / "turn.lock"
    _held_for(lock, 1.0)
    said: list[str] = []
    started = time.monotonic()
    with one_capture_at_a_time((2022, 4, 2, 1), said.append, lock):
        waited = time.monotonic() - started
    assert waited >= 0.8
    assert said == [
        "another nsync capture with nsys 2022 is running on this machine: waiting for it (two sessions of this "
        "nsys at once can fail)"
    ]


def test_newer_nsys_and_a_free_turn_do_not_wait(tmp_path: Path) -> None:
    lock = tmp_path / "turn.lock"
    said: list[str] = []
    with one_capture_at_a_time((2022, 4, 2, 1), said.append, lock):  # nobody else's turn
        pass
    _held_for(lock, 2.0)
    started = time.monotonic()
    with one_capture_at_a_time((2025, 3, 1), said.append, lock):
        assert time.monotonic() - started < 0.5
    assert said == []
