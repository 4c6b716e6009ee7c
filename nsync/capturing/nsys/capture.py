"""Run a program under nsys with the flags nsync needs, import the capture, export it to SQLite.

Every subprocess gets an argument list; nothing is ever passed through a shell.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from nsync.capturing.nsys import leftovers
from nsync.capturing.nsys.hang import QUIET_S, START_S, HangWatch, session_agents, stop_agents
from nsync.capturing.nsys.leftovers import advice, stale_session_state
from nsync.capturing.nsys.output import program_stream, relay
from nsync.capturing.run import Injection
from nsync.capturing.window import (
    NVTX_CAPTURE_ENV,
    CaptureWindow,
    WindowNeverOpened,
    WindowOutcome,
    cpu_steps_said,
    is_python,
    never_opened,
    no_cuda_said,
    no_torch_said,
    outcome,
)
from nsync.errors import NoCudaUsed, NsysError
from nsync.load.model import PYTHON_FRAMES_NSYS
from nsync.load.nsys.locate import Nsys
from nsync.stdio import forget_ctrl_c

Say = Callable[[str], None]


@dataclass(frozen=True)
class CaptureOptions:
    """What to capture and where. ``capture_range``: None, 'cudaProfilerApi' or 'nvtx' (with ``nvtx_range``)."""

    out_dir: Path
    name: str
    duration_s: float | None = None
    capture_range: str | None = None
    nvtx_range: str | None = None
    python_sampling: bool = False
    cpu_sampling: bool | None = None  # None: where this nsys records Python frames (Nsys.records_python_frames)
    nsys_args: tuple[str, ...] = ()
    keep_report: bool = True
    hang_s: float = (
        QUIET_S  # nsys making no progress this long after the program ended: hung (nsync.capturing.nsys.hang)
    )
    start_s: float = START_S  # a Python program not started this long after nsys: nsys hung at start
    step_marks: bool = True  # mark each optimizer step with an NVTX range (nsync.capturing.inject)
    window: CaptureWindow | None = None  # capture these steps only (needs step_marks' sitecustomize)
    program_output: str = "stdout"  # where the program's stdout goes: ours, or "stderr" (ours is for JSON)

    @property
    def base(self) -> Path:
        return self.out_dir / self.name


@dataclass
class CaptureResult:
    report: Path | None
    exit_code: int
    interrupted: bool
    window: WindowOutcome | None = None  # what the capture window saw, when there was one


def profile_flags(nsys: Nsys, options: CaptureOptions) -> tuple[list[str], list[str]]:
    """The ``nsys profile`` flags for this nsys version, and notes on what it cannot record."""
    flags = ["-t", "cuda,nvtx,osrt", "--cpuctxsw=none", "-o", str(options.base), "--force-overwrite=true"]
    notes = []
    sampling = options.cpu_sampling if options.cpu_sampling is not None else nsys.records_python_frames
    if not sampling:
        # backtraces need CPU sampling: without it call sites come only from --python-sampling, if asked
        flags.append("--sample=none")
        if options.cpu_sampling is None:
            notes.append(
                f"nsys {nsys.version_str} records no Python backtraces (nsys >= {PYTHON_FRAMES_NSYS} does), and its "
                "CPU sampling can hang after the program ends: capturing without it, so call sites will be unknown "
                "(--cpu-sampling adds native CUDA backtraces)"
            )
        else:
            notes.append(
                "CPU sampling off: no CUDA or Python backtraces, so call sites will be unknown"
                + ("" if options.python_sampling else " (add --python-sampling for approximate ones)")
            )
    else:
        flags.append("--sample=process-tree")
        if "backtrace" in nsys.profile_flags:
            flags.append("--backtrace=fp")  # LBR is unavailable in most VMs; fp is cheap and enough here
        if "cudabacktrace" in nsys.profile_flags:
            flags.append("--cudabacktrace=sync,memory")  # backtraces on launches too would slow the host
        else:
            notes.append(f"nsys {nsys.version_str} cannot record CUDA backtraces: call sites will be unknown")
        if "python-backtrace" in nsys.profile_flags:
            flags.append("--python-backtrace=cuda")
        elif "cudabacktrace" in nsys.profile_flags:
            notes.append(
                f"nsys {nsys.version_str} cannot record Python backtraces (nsys >= {PYTHON_FRAMES_NSYS} records "
                "and exports them): call sites will come from native CUDA backtraces"
            )
    if options.python_sampling:
        if "python-sampling" in nsys.profile_flags:
            flags.append("--python-sampling=true")
        else:
            notes.append(f"nsys {nsys.version_str} has no --python-sampling: ignored")
    if options.duration_s is not None:
        flags.append(f"--duration={max(1, round(options.duration_s))}")
    if options.window is not None:
        flags += options.window.nsys_flags()
    elif options.capture_range:
        flags += [f"--capture-range={options.capture_range}", "--capture-range-end=stop"]
        if options.capture_range == "nvtx" and options.nvtx_range:
            flags.append(f"--nvtx-capture={options.nvtx_range}")  # (and NVTX_CAPTURE_ENV: program_env)
    return [*flags, *options.nsys_args], notes


def run_capture(nsys: Nsys, command: Sequence[str], options: CaptureOptions, say: Say) -> CaptureResult:
    """Run ``command`` under ``nsys profile`` with live output; Ctrl-C stops the program, not the capture.

    The program's stdout reaches ours as it comes; nsys's own lines on that stream (progress bars, the
    'Generated:' block) do not (nsync.capturing.nsys.output). nsys writes its raw capture (``.qdstrm``) into a folder of
    nsync's own, removed whatever happens, and the program keeps its own TMPDIR. When nsys hangs after the
    program ended (nsync.capturing.nsys.hang), it is shut down, its agent stopped, what it wrote imported if it can be,
    and the program's exit code kept.
    """
    flags, notes = profile_flags(nsys, options)
    for note in notes:
        say(f"note: {note}")
    for earlier in (options.base.with_suffix(".nsys-rep"), options.base.with_suffix(".qdstrm")):
        earlier.unlink(missing_ok=True)  # an earlier run's, which nsys overwrites: never taken for this run's
    with tempfile.TemporaryDirectory(prefix="nsync-capture-") as scratch:
        _share_sessions(Path(scratch))
        if "env-var" in nsys.profile_flags:  # the program sees the TMPDIR it would have had
            flags = [f"--env-var=TMPDIR={os.environ.get('TMPDIR', tempfile.gettempdir())}", *flags]
        argv = [str(nsys.path), "profile", *flags, *command]
        try:
            proc = subprocess.Popen(argv, env=program_env(options, Path(scratch)), stdout=subprocess.PIPE)
        except OSError as err:
            raise NsysError(f"cannot start {nsys.path}: {err.strerror}") from err
        assert proc.stdout is not None
        relaying = relay(proc.stdout, program_stream(options.program_output), say)
        says_started = options.step_marks and is_python(list(command))  # (nsync's sitecustomize says so)
        watch = HangWatch(
            proc.pid,
            lambda: _written(options, Path(scratch)),
            options.hang_s,
            (lambda: _started(Path(scratch))) if says_started else None,
            options.start_s,
        )
        code, interrupted, hung = _wait(nsys, proc, watch, say)
        relaying.join(timeout=RELAY_DRAIN_S)  # an agent left holding the pipe must not block us
        report = _report(nsys, options, say, Path(scratch))
        seen = outcome(Path(scratch) / WINDOW_FOLDER) if options.window is not None else None
        started = _started(Path(scratch))
    ended = _Ended(code, interrupted, hung, report, seen, started, says_started)
    return _result(ended, watch, options, say)


@dataclass(frozen=True)
class _Ended:
    """How nsys ended: its exit code, whether Ctrl-C or a hang ended it, the report it left (None: none), what the
    window saw, and whether the program started (and was to say so)."""

    code: int
    interrupted: bool
    hung: bool
    report: Path | None
    seen: WindowOutcome | None
    started: bool
    says_started: bool


def _result(ended: _Ended, watch: HangWatch, options: CaptureOptions, say: Say) -> CaptureResult:
    """The capture as nsys ended it, or the error that says why there is none."""
    code, interrupted, hung, report, seen = ended.code, ended.interrupted, ended.hung, ended.report, ended.seen
    ended_normally = code >= 0 and not (hung or interrupted)
    if ended_normally and options.window is not None and seen is not None and seen.processes and not seen.opened_by:
        if report is not None:
            report.unlink()  # nsys 2022.4 writes an empty report when its capture range never began
        if seen.no_cuda:
            raise NoCudaUsed(no_cuda_said(options.window, "under nsys"))
        raise WindowNeverOpened(never_opened(options.window, seen), seen)
    if report is None and options.window is not None and seen is not None and seen.opened_by and not seen.torch:
        raise NoCudaUsed(no_torch_said("under nsys"))
    if report is None and seen is not None and seen.opened_by == "steps" and not seen.cuda:
        raise NoCudaUsed(cpu_steps_said(seen, "under nsys"))
    if interrupted and report is None and seen is not None and not seen.opened_by:
        say("interrupted before the capture window opened: nothing was captured")
        raise KeyboardInterrupt
    if code < 0 and report is None and not hung:
        raise NsysError(f"nsys was killed by signal {_signal_name(-code)} before writing a report")
    if watch.hung_at_start:
        raise NsysFailedFirst(f"nsys had not started the program {watch.start_s:.0f} s after it was started itself")
    if report is None and hung:
        exited = "" if watch.program_exit_code is None else f" (the program exited with code {watch.program_exit_code})"
        raise NsysError(
            f"nsys hung after the program ended{exited} and what it had written was incomplete: nothing was saved. "
            "The hang is intermittent (nsys 2022.4 with CPU sampling): run again, or capture with --no-cpu-sampling"
        )
    if report is None:
        running = leftovers.running_nsys() if code > 0 else []  # (nsys that failed to start exits 1; ours has ended)
        left = stale_session_state() if code > 0 else []
        failed = f"nsys exited with code {code} and wrote no report ({options.base}.nsys-rep)"
        if code > 0 and ended.says_started and not ended.started:  # (state left then may be another nsys's)
            raise NsysFailedFirst(f"{failed} before the program started", running, advice(left, running))
        raise NsysError(f"{failed}{advice(left, running)}")
    if hung:  # nsys's own exit code after a shutdown is not the program's
        if watch.program_exit_code is None:
            say("note: the program's exit code is unknown: nsys was shut down after it ended")
        code = watch.program_exit_code or 0
    if seen is not None and seen.ended_program and seen.opened_by == "time" and code in (-signal.SIGTERM, 143):
        code = 0  # the SIGTERM that ended a window by the clock was nsync's, not the program's failure
    return CaptureResult(report=report, exit_code=code, interrupted=interrupted, window=seen)


RELAY_DRAIN_S = 5


class NsysFailedFirst(NsysError):
    """nsys failed before the program it was to run started (it says so when nsync's sitecustomize runs in it):
    trying again runs nothing twice. Seen now and then with Debian's nsys 2022.4. ``running``: the other nsys
    running then (their pids), where any was; ``advice``: what the user can do (a state left behind, another
    nsys), said once trying again has failed too."""

    def __init__(self, message: str, running: list[int] | None = None, advice: str = "") -> None:
        super().__init__(message + advice)
        self.failed = message
        self.running = running or []
        self.advice = advice


def _written(options: CaptureOptions, scratch: Path) -> list[Path]:
    """The files nsys writes while it finishes: its raw capture in ``scratch``, the report beside the outputs."""
    own = [p for p in scratch.glob("*") if p.name != SESSIONS]  # (the sessions folder is every nsys's)
    return [*own, *options.out_dir.glob(f"{glob.escape(options.name)}.*")]


SESSIONS = "nvidia"  # in TMPDIR: nsys's session folders and the lock that keeps its sessions' shared state whole


def _share_sessions(scratch: Path) -> None:
    """Link the scratch TMPDIR's ``nvidia`` folder to the real TMPDIR's, which every other nsys uses.

    nsys takes a lock in ``$TMPDIR/nvidia/nsight_systems`` before it touches its sessions' shared memory
    (``/dev/shm/NSys-<version>``). With a private TMPDIR each, two nsys took two different locks and broke that
    state: two captures started together here failed with 'Agent launcher failed.', or one waited forever for
    an agent (5 of 6 pairs, Debian's 2022.4). The raw capture stays in the scratch folder; only the lock and
    the sessions' folders are shared. Where the real folder cannot be made, nsys keeps a private one."""
    shared = Path(tempfile.gettempdir()) / SESSIONS
    with contextlib.suppress(OSError):
        shared.mkdir(exist_ok=True)
        (scratch / SESSIONS).symlink_to(shared, target_is_directory=True)


WINDOW_FOLDER = "window"  # in the scratch folder: what the program's processes saw of the window


def _started(scratch: Path) -> bool:
    """Whether a program under nsys has started (nsync's sitecustomize writes ``started-<pid>`` first thing)."""
    return any((scratch / WINDOW_FOLDER).glob("started-*"))


def program_env(options: CaptureOptions, scratch: Path) -> dict[str, str]:
    """The environment nsys (and the program it starts) runs in: nsys's scratch TMPDIR, and with
    ``step_marks`` the folder of nsync's ``sitecustomize`` first on PYTHONPATH, with the window's settings."""
    env = {**os.environ, "TMPDIR": str(scratch)}
    if options.window is not None or options.capture_range == "nvtx":
        env.update(NVTX_CAPTURE_ENV)
    if options.step_marks:
        (scratch / WINDOW_FOLDER).mkdir()  # where the program says it started (and what its window saw)
        env = Injection("nsys", scratch / WINDOW_FOLDER, options.window).env(env)
    return env


def _wait(nsys: Nsys, proc: subprocess.Popen[bytes], watch: HangWatch, say: Say) -> tuple[int, bool, bool]:
    """Wait for nsys: (its exit code, whether Ctrl-C was pressed, whether it hung and was stopped). Whatever
    happens, no agent of its session is left running."""
    try:
        code, interrupted, hung = _until_exit(nsys, proc, watch, say)
    except KeyboardInterrupt:
        stop_agents(proc.pid)
        raise
    stop_agents(proc.pid)  # nsys is gone: an agent of its session left spinning would be a hung one
    return code, interrupted, hung


POLL_S = 0.5


def _until_exit(nsys: Nsys, proc: subprocess.Popen[bytes], watch: HangWatch, say: Say) -> tuple[int, bool, bool]:
    interrupted = False
    while True:
        try:  # a Ctrl-C is handled wherever it lands in the poll, the hang check included
            code = _exit_code(proc, POLL_S)
            if code is not None:
                return code, interrupted, False
            if watch.hung():
                if watch.hung_at_start:
                    say(f"nsys had not started the program after {watch.start_s:.0f} s: shutting it down")
                else:
                    say(
                        f"nsys made no progress for {watch.quiet_s:.0f} s after the program ended (nsys 2022.4 with "
                        "CPU sampling hangs so now and then): shutting it down"
                    )
                return stop_nsys(nsys, proc), interrupted, True
        except KeyboardInterrupt:  # noqa: PERF203 -- one poll every POLL_S
            if interrupted:  # a second Ctrl-C: stop waiting for nsys to finish its report
                stop_nsys(nsys, proc, gently=False)
                raise
            interrupted = True
            forget_ctrl_c()  # handled: the capture so far is analysed
            say("interrupted: waiting for nsys to write what it captured (Ctrl-C again to abort)")


def _exit_code(proc: subprocess.Popen[bytes], wait_s: float) -> int | None:
    """nsys's exit code, or None while it still runs after ``wait_s``."""
    try:
        return proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        return None


STOP_WAIT_S = 20


def stop_nsys(nsys: Nsys, proc: subprocess.Popen[bytes], gently: bool = True) -> int:
    """End a capture whose program has ended: ``nsys shutdown`` of its session (``nsys stop`` is "not
    applicable" and ``nsys cancel`` "not implemented" in that state, seen with 2022.4), then SIGINT, then
    SIGKILL (``gently=False``: SIGKILL at once). Returns nsys's exit code."""
    code = -signal.SIGKILL
    if gently:
        for session in sorted({name for _pid, name in session_agents(proc.pid)}):
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                subprocess.run(
                    [str(nsys.path), "shutdown", f"--session={session}"], capture_output=True, timeout=STOP_WAIT_S
                )
    stops = (lambda: None, lambda: proc.send_signal(signal.SIGINT), proc.kill) if gently else (proc.kill,)
    for stop in stops:
        stop()
        with contextlib.suppress(subprocess.TimeoutExpired):
            code = proc.wait(timeout=STOP_WAIT_S)
            break
    return code


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def _report(nsys: Nsys, options: CaptureOptions, say: Say, scratch: Path) -> Path | None:
    """The .nsys-rep: the one nsys wrote, or one imported from a .qdstrm nsys left unimported, beside the
    outputs (its own import failed) or in ``scratch`` (it hung or was stopped)."""
    rep = options.base.with_suffix(".nsys-rep")
    if rep.is_file():
        return rep
    left = options.base.with_suffix(".qdstrm")
    raw = sorted(scratch.glob("*.qdstrm"), key=lambda p: p.stat().st_mtime, reverse=True)
    for qdstrm in ([left] if left.is_file() else []) + raw:
        importer = nsys.importer()
        if importer is None:
            raise NsysError(
                f"nsys left {qdstrm} unimported and no QdstrmImporter was found beside {nsys.path}: "
                f"run 'QdstrmImporter -i {qdstrm}' from your Nsight Systems install, then "
                f"'nsync analyze' the exported SQLite"
            )
        say(f"importing {qdstrm.name} with {importer}")
        done = subprocess.run([str(importer), "-i", str(qdstrm)], capture_output=True, text=True, check=False)
        imported = qdstrm.with_suffix(".nsys-rep")
        if imported.is_file():
            shutil.move(imported, rep)
            qdstrm.unlink()
            return rep
        detail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
        if qdstrm == left:
            raise NsysError(f"QdstrmImporter could not import {qdstrm}: {detail[0]}")
        say(f"note: {qdstrm.name} could not be imported: {detail[0]}")
    return None
