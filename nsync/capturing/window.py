"""The capture window: which optimizer steps of a long job ``nsync profile`` captures, and what happened.

The injected ``sitecustomize`` (nsync/capturing/inject) counts the program's optimizer steps, begins the NVTX
range :data:`WINDOW_RANGE` at step W and ends it after step W+K, then ends the program; nsys, run with
``--capture-range=nvtx``, captures only inside that range. A program with no optimizer step gets a window by
the clock. Each process writes what it saw into a folder of nsync's (:func:`outcome` reads them).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from nsync.errors import NsysError
from nsync.marks import WINDOW_RANGE
from nsync.settings import setting
from nsync.words import counted

STATE_SCHEMA = "nsync.window/1"


@dataclass(frozen=True)
class CaptureWindow:
    """Capture ``steps`` optimizer steps after ``warmup_steps`` (at least 1: the window opens at an optimizer
    step); without optimizer steps, ``seconds`` seconds once CUDA has run ``wait_s`` seconds. ``run_to_end``:
    let the program finish after the window (the capture stops either way). A program that ends before its
    window opened, within ``rerun_whole_s`` seconds, is captured again whole (else: an error)."""

    warmup_steps: int = 10
    steps: int = 40
    run_to_end: bool = False
    wait_s: float = 60.0
    seconds: float = 20.0
    rerun_whole_s: float = 60.0  # a program that ended before its window this fast is captured again, whole

    def describe(self) -> str:
        first, last = self.warmup_steps + 1, self.warmup_steps + self.steps
        then = (
            "letting it run to its end"
            if self.run_to_end
            else f"then ending it ({setting('ProfileOptions.run_to_end=True')} lets it finish)"
        )
        return (
            f"capturing optimizer steps {first}-{last} of the program (after {self.warmup_steps} of warm-up), "
            f"{then}; a program with no optimizer step is captured for {self.seconds:g} s once it has used CUDA "
            f"for {self.wait_s:g} s"
        )

    @staticmethod
    def nsys_flags() -> list[str]:
        """nsys captures inside the range (whose plain, unregistered name needs NVTX_CAPTURE_ENV)."""
        return ["--capture-range=nvtx", f"--nvtx-capture={WINDOW_RANGE}", "--capture-range-end=stop"]


# In the program's environment (nsys allows one --env-var flag, which carries its TMPDIR): nsys's NVTX capture
# ranges then match plain (unregistered) range names, as torch.cuda.nvtx's are
NVTX_CAPTURE_ENV = {"NSYS_NVTX_PROFILER_REGISTER_ONLY": "0"}


@dataclass(frozen=True)
class WindowOutcome:
    """What the program's processes saw (``processes``: how many said): the most optimizer steps one of them
    ended, how the window opened (``steps``, ``time``, or None: never), whether it closed and whether nsync
    ended the program."""

    processes: int = 0
    optimizer_steps: int = 0
    opened_by: str | None = None
    closed: bool = False
    ended_program: bool = False
    no_cuda: bool = False  # ended for using no CUDA within the window's wait
    torch: bool = True  # some process imported torch (False: none did, so nothing of PyTorch's ran)
    cuda: bool = True  # some process had used CUDA when it last said (False: its steps ran on the CPU)
    uncaught: str | None = None  # the exception that ended a process, by name

    def complete(self, window: CaptureWindow) -> bool:
        return self.opened_by == "time" or self.optimizer_steps >= window.warmup_steps + window.steps


def no_cuda_said(window: CaptureWindow, run: str) -> str:
    """Why a program that used no CUDA within the window's wait was ended (``run``: which run it was)."""
    return (
        f"the program used no CUDA in its first {window.wait_s:g} s ({run}), so nsync ended it: there is nothing on "
        "a GPU to capture. Does it run on the CPU (torch.cuda.is_available())? A program that prepares its data "
        f"longer before it uses the GPU: {setting('ProfileOptions.wait_for_steps')} with more seconds"
    )


def no_torch_said(run: str) -> str:
    """Why a windowed program that never imported torch is not captured (``run``: which run it was)."""
    return (
        f"the program never imported torch ({run}): nsync captures the steps of PyTorch programs on a GPU. "
        f"A program that uses CUDA otherwise can be captured whole ({setting('ProfileOptions.whole_run=True')})"
    )


def cpu_steps_said(seen: WindowOutcome, run: str) -> str:
    """Why a program whose window opened without CUDA is not captured under nsys (``run``: which run it was)."""
    return (
        f"the program made {counted(seen.optimizer_steps, 'optimizer step')} without using CUDA ({run}): nsys captures "
        "the GPU's work, and it has none. Does it run on the CPU (torch.cuda.is_available())? "
        f"{setting('ProfileOptions.backend')} torch captures its steps under torch.profiler"
    )


def outcome(folder: Path) -> WindowOutcome:
    """Read what the processes wrote (unreadable or foreign files are left out)."""
    states = []
    for path in sorted(folder.glob("window-*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("schema") == STATE_SCHEMA:
            states.append(data)
    if not states:
        return WindowOutcome()
    opened = [s for s in states if s.get("opened_by") in ("steps", "time")]
    return WindowOutcome(
        processes=len(states),
        optimizer_steps=max(int(s.get("optimizer_steps") or 0) for s in states),
        opened_by=str(opened[0]["opened_by"]) if opened else None,
        closed=any(bool(s.get("closed")) for s in opened),
        ended_program=any(bool(s.get("ended_program")) for s in states),
        no_cuda=any(bool(s.get("no_cuda")) for s in states),
        torch=any(bool(s.get("torch", True)) for s in states),
        cuda=any(bool(s.get("cuda", True)) for s in states),
        uncaught=next((str(s["uncaught"]) for s in states if s.get("uncaught")), None),
    )


def is_python(command: list[str]) -> bool:
    """Whether ``command`` starts a Python interpreter or a Python script (torchrun, accelerate...): only
    there can the sitecustomize open the window."""
    first = command[0] if command else ""
    if Path(first).name.startswith("python"):
        return True
    found = first if os.sep in first else shutil.which(first)
    try:
        with open(found or first, "rb") as handle:
            head = handle.readline(200)
    except OSError:
        return False
    return head.startswith(b"#!") and b"python" in head


def window_of(
    steps: int | None = None,
    warmup_steps: int | None = None,
    run_to_end: bool = False,
    wait_s: float | None = None,
    seconds: float | None = None,
) -> CaptureWindow:
    """A window of steps, each setting given or its default (None)."""
    default = CaptureWindow()
    return CaptureWindow(
        warmup_steps=default.warmup_steps if warmup_steps is None else warmup_steps,
        steps=default.steps if steps is None else steps,
        run_to_end=run_to_end,
        wait_s=default.wait_s if wait_s is None else wait_s,
        seconds=default.seconds if seconds is None else seconds,
    )


class WindowNeverOpened(NsysError):
    """The program ended before its capture window opened: nothing was captured."""

    def __init__(self, message: str, seen: WindowOutcome) -> None:
        super().__init__(message)
        self.seen = seen


def never_opened(window: CaptureWindow, seen: WindowOutcome) -> str:
    if seen.optimizer_steps:
        return (
            f"nothing was captured: the program ended after {counted(seen.optimizer_steps, 'optimizer step')}, "
            f"before the capture window opened at step {window.warmup_steps} "
            f"({setting('ProfileOptions.warmup_steps')}): capture fewer warm-up steps, or the whole run "
            f"({setting('ProfileOptions.whole_run=True')})"
        )
    return (
        "nothing was captured: the program ended before any optimizer step, and before it had used CUDA for "
        f"{window.wait_s:g} s (when a window by the clock opens): capture the whole run "
        f"({setting('ProfileOptions.whole_run=True')})"
    )
