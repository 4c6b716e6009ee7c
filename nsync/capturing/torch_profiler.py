"""``nsync profile --backend torch``: the capture under torch.profiler instead of nsys. The program runs with
nsync's sitecustomize (nsync/capturing/inject), which starts torch.profiler where the window of steps opens and
writes its Chrome trace where it closes (``_nsync_kineto``), so that the same steps are captured as under nsys;
the trace is then read as any torch.profiler trace (nsync.load.kineto)."""

from __future__ import annotations

import signal
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from nsync.capturing.nsys.capture import CaptureOptions
from nsync.capturing.run import TORCH_TRACE_SUFFIX as TRACE_SUFFIX
from nsync.capturing.run import Injection, start_program
from nsync.capturing.window import WindowNeverOpened, WindowOutcome, never_opened, no_cuda_said, no_torch_said, outcome
from nsync.errors import NoCudaUsed, TorchProfilerError

Say = Callable[[str], None]


@dataclass(frozen=True)
class TorchCapture:
    """The trace written (of the process that wrote the most, where several did: the others are kept beside it
    in ``others``), the program's exit code, whether Ctrl-C ended it, and what its window saw."""

    trace: Path
    exit_code: int
    interrupted: bool
    window: WindowOutcome | None
    others: tuple[Path, ...] = ()


def trace_path(options: CaptureOptions) -> Path:
    return options.out_dir / f"{options.name}{TRACE_SUFFIX}"


def run_torch_capture(command: Sequence[str], options: CaptureOptions, say: Say) -> TorchCapture:
    """Run ``command`` with torch.profiler started and stopped by its window (the whole run without one)."""
    target = trace_path(options)
    target.unlink(missing_ok=True)  # an earlier run's must never pass for this one's
    with tempfile.TemporaryDirectory(prefix="nsync-torch-") as scratch:
        folder = Path(scratch)
        env = Injection("torch", folder, options.window).env()
        stdout = 2 if options.program_output == "stderr" else None
        try:
            started = start_program(command, env, stdout)
        except OSError as err:
            raise TorchProfilerError(f"cannot start {command[0]}: {err.strerror}") from err
        code, interrupted = _wait(started.proc)
        started.drained()
        seen = outcome(folder) if options.window is not None else None
        written = sorted(folder.glob(f"trace-*{TRACE_SUFFIX}"), key=lambda p: p.stat().st_size, reverse=True)
        _check(written, seen, options, code, interrupted)
        written[0].replace(target)
        others = tuple(_kept_beside(path, options) for path in written[1:])
    if others:
        say(f"{len(others) + 1} processes wrote traces: analysing the largest, the others kept beside it")
    if seen is not None and seen.ended_program and seen.opened_by == "time" and code in (-signal.SIGTERM, 143):
        code = 0  # the SIGTERM that ended a window by the clock was nsync's, not the program's failure
    return TorchCapture(target, code, interrupted, seen, others)


def _wait(proc: subprocess.Popen[bytes]) -> tuple[int, bool]:
    """The program's exit code, and whether Ctrl-C ended it (it gets the SIGINT too, and may still write)."""
    try:
        return proc.wait(), False
    except KeyboardInterrupt:
        try:
            return proc.wait(timeout=30), True
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            proc.kill()
            return proc.wait(), True


def _check(written: list[Path], seen: WindowOutcome | None, options: CaptureOptions, code: int, stopped: bool) -> None:
    """Raise the error that says why no trace was written, where none was."""
    if written:
        return
    window = options.window
    if window is not None and seen is not None and seen.processes and not seen.opened_by:
        if stopped:
            raise KeyboardInterrupt
        if seen.no_cuda:
            raise NoCudaUsed(no_cuda_said(window, "under torch.profiler"))
        raise WindowNeverOpened(never_opened(window, seen), seen)
    if window is not None and seen is not None and seen.opened_by and not seen.torch:
        raise NoCudaUsed(no_torch_said("under torch.profiler"))
    raise TorchProfilerError(
        f"torch.profiler wrote no trace (the program exited with code {code}): is torch importable by "
        f"{options.name}'s Python, and did the program run to its window?"
    )


def _kept_beside(path: Path, options: CaptureOptions) -> Path:
    pid = path.name.removeprefix("trace-").removesuffix(TRACE_SUFFIX)
    kept = options.out_dir / f"{options.name}.{pid}{TRACE_SUFFIX}"
    path.replace(kept)
    return kept
