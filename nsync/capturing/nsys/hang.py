"""Telling a hung ``nsys profile`` from one that is finishing its report, from Linux's /proc.

Debian's nsys 2022.4 with CPU sampling hangs now and then once the program has ended (seen here: 3 captures
in 17, and 3 in 7 on a loaded 2-core machine): nsys waits forever, the program's process stays a zombie that
nsys never reaps, and the session's agent spins at 95 % CPU. An nsys that is finishing its report instead
uses CPU or writes its files within a fraction of a second of the program's end (both measured here). So:
once the program has ended, nsys is hung when neither its CPU time (and its children's) nor the files it
writes have moved for ``quiet_s`` seconds. The program's exit code is read from its zombie meanwhile
(``/proc/PID/stat``'s exit status), so that it survives the shutdown.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

QUIET_S = 10.0  # no progress this long after the program ended: hung (a working nsys moves within 0.3 s)
START_S = 60.0  # a Python program not started this long after nsys was: nsys hung at start (it takes 1-4 s here)


@dataclass(frozen=True)
class Process:
    pid: int
    ppid: int
    state: str
    cpu_ticks: int
    exit_status: int | None  # a zombie's wait status (Linux >= 3.5), else None


def processes() -> dict[int, Process]:
    """Every process readable in /proc (empty where there is no /proc)."""
    found: dict[int, Process] = {}
    try:
        entries = [e for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return found
    for entry in entries:
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as handle:
                _, rest = handle.read().rsplit(b")", 1)
        except OSError:
            continue
        fields = rest.split()
        state = fields[0].decode()
        found[int(entry.name)] = Process(
            pid=int(entry.name),
            ppid=int(fields[1]),
            state=state,
            cpu_ticks=int(fields[11]) + int(fields[12]),
            exit_status=int(fields[49]) if state == "Z" and len(fields) > 49 else None,
        )
    return found


def descendants(table: dict[int, Process], pid: int) -> list[Process]:
    children: dict[int, list[Process]] = {}
    for process in table.values():
        children.setdefault(process.ppid, []).append(process)
    found, pending = [], list(children.get(pid, []))
    while pending:
        process = pending.pop()
        found.append(process)
        pending.extend(children.get(process.pid, []))
    return found


def program_running(pid: int) -> bool:
    """Whether any process below ``pid`` is still alive (not a zombie). True when /proc cannot tell."""
    table = processes()
    if not table:
        return True
    return any(p.state != "Z" for p in descendants(table, pid))


def exit_code_of(status: int) -> int:
    """A wait status as a shell would report it: the code, or 128 + the signal that ended the process."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


class HangWatch:
    """Watches ``nsys profile`` (``pid``) after its program ended; ``hung()`` says when it stopped making
    progress (see the module docstring). ``files`` lists what nsys writes (its scratch folder, the report).

    ``program_started`` (where the program says so: nsync's sitecustomize in a Python program) also tells an
    nsys that never starts its program: one whose agent waited forever for its session (seen here when two
    nsys broke their shared session state) is hung at start once ``start_s`` passed (``hung_at_start``)."""

    def __init__(
        self,
        pid: int,
        files: Callable[[], Iterable[Path]],
        quiet_s: float = QUIET_S,
        program_started: Callable[[], bool] | None = None,
        start_s: float = START_S,
    ) -> None:
        self.pid = pid
        self.files = files
        self.quiet_s = quiet_s
        self.program_started = program_started
        self.start_s = start_s
        self.hung_at_start = False
        self.program_exit_code: int | None = None  # read from the program's zombie, where nsys left one
        self._progress: tuple[object, ...] | None = None
        self._since = 0.0
        self._started = False  # a program ran under nsys (before that, nsys is starting, not finishing)
        self._launched = time.monotonic()

    def hung(self) -> bool:
        if self.program_started is not None and time.monotonic() - self._launched >= self.start_s:
            if not self.program_started():
                self.hung_at_start = True
                return True
            self.program_started = None  # it started: no need to look again
        table = processes()
        below = descendants(table, self.pid)
        running = any(p.state != "Z" for p in below)
        self._started |= bool(below)  # a zombie below nsys is a program that ran too
        if not table or running or not self._started:
            self._progress = None  # the program runs (or has not started, or /proc cannot tell): nothing to judge
            return False
        for zombie in below:  # the program (nsys's launcher exits with the program's status)
            if zombie.exit_status is not None and zombie.ppid == self.pid:
                self.program_exit_code = exit_code_of(zombie.exit_status)
        me = table.get(self.pid)
        progress = (me.cpu_ticks if me else None, *self._file_states())
        now = time.monotonic()
        if progress != self._progress:
            self._progress, self._since = progress, now
            return False
        return now - self._since >= self.quiet_s

    def _file_states(self) -> list[tuple[str, int, int]]:
        states = []
        for path in self.files():
            with contextlib.suppress(OSError):
                info = path.stat()
                states.append((str(path), info.st_size, info.st_mtime_ns))
        return sorted(states)


def agents() -> list[tuple[int, str]]:
    """(pid, session name) of every nsys agent running: its command line holds ``--start-agent
    --session-name=profile-<program>-<nsys pid>``."""
    found = []
    for pid in processes():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                words = handle.read().split(b"\0")
        except OSError:
            continue
        names = [w.decode(errors="replace").split("=", 1)[1] for w in words if w.startswith(b"--session-name=")]
        if b"--start-agent" in words and names:
            found.append((pid, names[0]))
    return found


def session_agents(nsys_pid: int) -> list[tuple[int, str]]:
    """(pid, session name) of the agents of the session that ``nsys profile`` (``nsys_pid``) started."""
    return [(pid, name) for pid, name in agents() if name.endswith(f"-{nsys_pid}")]


AGENT_GRACE_S = 3.0  # an agent asked to stop cleans up within a fraction of a second (seen with 2022.4)


def stop_agents(nsys_pid: int, grace_s: float = AGENT_GRACE_S) -> int:
    """Stop the agents of ``nsys_pid``'s session still running (a hung session's agent spins at 95 % CPU after
    nsys itself is gone); how many there were. SIGTERM first: an agent so stopped removes its state from
    /dev/shm, which a SIGKILLed one leaves behind (nsync.capturing.nsys.leftovers); SIGKILL those still up after
    ``grace_s``."""
    agents = [pid for pid, _name in session_agents(nsys_pid)]
    for pid in agents:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    alive = agents
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        table = processes()
        alive = [pid for pid in alive if pid in table and table[pid].state != "Z"]
    for pid in alive:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return len(agents)
