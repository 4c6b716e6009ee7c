"""What a killed nsys leaves behind on the machine, told to the user when it stops the next capture.

nsys keeps the state of its sessions in shared memory (``/dev/shm/NSys-<version>``) and removes it when the last
nsys ends. An nsys killed (a hang stopped, the OOM killer, a second Ctrl-C) leaves it behind, and every later
``nsys profile`` on the machine can then fail at once with "Agent launcher failed." and no report (seen here
with Debian's 2022.4, in this project's CI and on a developer's machine; removing the file made nsys work again).
The file is stale when no nsys runs: nsync says so and how to remove it, and never removes it itself.
"""

from __future__ import annotations

import os
from pathlib import Path

SHARED_MEMORY = Path("/dev/shm")


def running_nsys() -> list[int]:
    """Pids of the nsys processes running that this user can see in /proc (their program or interpreter's
    script is named ``nsys``, or ``nsys-``something: its launcher)."""
    found: list[int] = []
    try:
        entries = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return found
    for pid in entries:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                words = handle.read().split(b"\0")[:2]
        except OSError:
            continue
        if any(os.path.basename(word) == b"nsys" or os.path.basename(word).startswith(b"nsys-") for word in words):
            found.append(int(pid))
    return found


def stale_session_state() -> list[Path]:
    """nsys's session state files left behind by an nsys that no longer runs (none while any nsys runs)."""
    try:
        states = sorted(SHARED_MEMORY.glob("NSys-*"))
    except OSError:
        return []
    if not states or running_nsys():
        return []
    return states


def advice(states: list[Path], running: list[int] | None = None) -> str:
    """What to tell a user whose nsys failed to start: another nsys ``running`` now (checked when said), or
    ``states`` left behind while none runs ('' where neither)."""
    if running:
        pids = ", ".join(map(str, running[:5]))
        return (
            f"; another nsys runs now on this machine (pid {pids}): an nsys can fail to start beside it. Wait for "
            "it to end, then run again"
        )
    if not states:
        return ""
    listed = " ".join(str(s) for s in states)
    return (
        f"; nsys's session state is left in {listed} and no nsys that this user can see runs now: an nsys killed "
        "earlier left it, and it can stop every nsys from starting ('Agent launcher failed.'). Unless another "
        f"user's nsys runs (which /proc may hide), remove it and run again: rm {listed}"
    )
