"""The one launcher of the user's program: the argv a command runs (``python SCRIPT ARGS``, ``python -m MODULE
ARGS``, or any command as given), and the :class:`Injection` that puts nsync's code (nsync/capturing/inject) into
it, with what it is asked to do there. This is the one module that spells the variables the injected code reads:
a new mode or setting is added here and in inject/ alone."""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

from nsync.capturing import inject
from nsync.capturing.window import CaptureWindow
from nsync.errors import UsageError

PYTHON_ENV = "NSYNC_PYTHON"  # the interpreter that runs a script (default: python3 on PATH)
TORCH_TRACE_SUFFIX = ".pt.trace.json.gz"
Mode = Literal["nsys", "torch", "calibrate", "switch"]
# what the injected code reads (nsync/capturing/inject): set for one run, never inherited by the next
_CALIBRATE_DIR, _TORCH_TRACE, _SWITCH_BLOCK = "NSYNC_CALIBRATE_DIR", "NSYNC_TORCH_TRACE", "NSYNC_AB"
_WINDOW, _WINDOW_DIR, _WINDOW_END = "NSYNC_WINDOW", "NSYNC_WINDOW_DIR", "NSYNC_WINDOW_END"
_WINDOW_WAIT_S, _WINDOW_SECONDS, _WINDOW_ROOT = "NSYNC_WINDOW_WAIT_S", "NSYNC_WINDOW_SECONDS", "NSYNC_WINDOW_ROOT"
_PROTOCOL = frozenset({_CALIBRATE_DIR, _TORCH_TRACE, _SWITCH_BLOCK, _WINDOW, _WINDOW_DIR, _WINDOW_END})
_PROTOCOL |= {_WINDOW_WAIT_S, _WINDOW_SECONDS, _WINDOW_ROOT}


@dataclass(frozen=True)
class Injection:
    """nsync's sitecustomize in the program, and what it does there: mark steps under nsys (``nsys``), start and
    stop torch.profiler (``torch``), time steps unprofiled (``calibrate``), or that and alternate the program's
    two versions in blocks of ``block_steps`` optimizer steps (``switch``, nsync measure). The injected code
    writes what it saw into ``folder``; with ``window``, it opens and closes the capture window (``ending``
    overrides the window's ``run_to_end``: a calibration run always ends after its window)."""

    mode: Mode
    folder: Path
    window: CaptureWindow | None = None
    ending: bool | None = None
    block_steps: int | None = None

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this process's environment) with the injected code first on PYTHONPATH and its
        settings for this run (an outer nsync's left out)."""
        env = {k: v for k, v in (os.environ if base is None else base).items() if k not in _PROTOCOL}
        env["PYTHONPATH"] = inject.pythonpath(env.get("PYTHONPATH"))
        if self.mode == "torch":
            env[_TORCH_TRACE] = str(self.folder / f"trace-{{pid}}{TORCH_TRACE_SUFFIX}")
        elif self.mode in ("calibrate", "switch"):
            env[_CALIBRATE_DIR] = str(self.folder)
            if self.mode == "switch":
                env[_SWITCH_BLOCK] = str(self.block_steps or 1)
        else:
            env[_WINDOW_DIR] = str(self.folder)  # where the program says it started, under nsys
        if self.window is not None:
            env.update(self._window_env(self.window))
        return env

    def _window_env(self, window: CaptureWindow) -> dict[str, str]:
        end = not window.run_to_end if self.ending is None else self.ending
        return {
            _WINDOW: f"{window.warmup_steps}:{window.steps}",
            _WINDOW_DIR: str(self.folder),
            _WINDOW_END: "exit" if end else "run",
            _WINDOW_WAIT_S: f"{window.wait_s:g}",
            _WINDOW_SECONDS: f"{window.seconds:g}",
            _WINDOW_ROOT: "1",
        }


def kineto_hooks() -> tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]]:
    """torch.profiler as the injected code starts and stops it (``new_profiler``, ``enter_range``,
    ``exit_range``), for a capture in nsync's own process (nsync.capture())."""
    from nsync.capturing.inject import _nsync_kineto

    return _nsync_kineto.new_profiler, _nsync_kineto.enter_range, _nsync_kineto.exit_range


def build_command(target: Sequence[str], module: str | None, python: str | None = None) -> list[str]:
    """The argv to run: ``python SCRIPT ARGS``, ``python -m MODULE ARGS``, or any command as given."""
    interpreter = python or os.environ.get(PYTHON_ENV) or shutil.which("python3") or sys.executable
    if module:
        return [interpreter, "-m", module, *target]
    if not target:
        raise UsageError("nothing to profile: give SCRIPT [ARGS]..., -m MODULE [ARGS]... or -- COMMAND [ARGS]...")
    first = target[0]
    if first.endswith(".py"):
        if not Path(first).is_file():
            raise UsageError(f"script not found: {first}")
        return [interpreter, *target]
    if not (Path(first).is_file() or shutil.which(first)):
        raise UsageError(f"command not found: {first}")
    return list(target)


def command_of_line(label: str, text: str, python: str | None = None) -> list[str]:
    """The argv of one quoted command line (``SCRIPT ARGS``, ``-m MODULE ARGS`` or any command; split as a
    shell would split it, and no shell runs it); ``label`` names it in errors."""
    try:
        words = shlex.split(text)
    except ValueError as error:
        raise UsageError(f"{label} {text!r}: {error}") from None
    module = words[1] if words[:1] == ["-m"] and len(words) > 1 else None
    return build_command(words[2:] if module else words, module, python)


def output_name(target: Sequence[str], module: str | None) -> str:
    """Base name of the outputs: the module, script or command name."""
    if module:
        return module.rsplit(".", 1)[-1]
    if not target:
        return "nsync"
    return next((Path(arg).stem for arg in target if arg.endswith(".py")), Path(target[0]).name)


DRAIN_S = 5.0  # how long the program's output is still read once it has exited (a worker left holding it)


def start_program(command: Sequence[str], env: Mapping[str, str], stdout: int | None = None) -> Started:
    """Start the user's program, its stdout going to ``stdout`` (a file descriptor; None: ours). Where that is a
    pipe (``nsync profile train.py | head``), nsync reads the program's output and passes it on, and goes on
    reading once the pipe is closed downstream: the program never sees it closed (it would die on its next
    print, and be blamed). Raises OSError when it cannot start."""
    sink = 1 if stdout is None else stdout
    if not _a_pipe(sink):
        return Started(subprocess.Popen(list(command), env=dict(env), stdout=stdout), None)
    proc = subprocess.Popen(list(command), env=dict(env), stdout=subprocess.PIPE)
    assert proc.stdout is not None
    pump = threading.Thread(target=_pass_on, args=(proc.stdout, sink), name="program-stdout", daemon=True)
    pump.start()
    return Started(proc, pump)


@dataclass(frozen=True)
class Started:
    """A started program, and the thread that passes its output on (None: it writes where it goes itself)."""

    proc: subprocess.Popen[bytes]
    pump: threading.Thread | None

    def wait(self) -> int:
        """Its exit code, once its output is passed on. Interrupted (Ctrl-C), it is killed as subprocess.run
        kills it: after a moment to end on the SIGINT it got too, so that nothing of it outlives the run."""
        try:
            code = self.proc.wait()
        except BaseException:
            try:
                self.proc.wait(timeout=0.25)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            raise
        self.drained()
        return code

    def drained(self) -> None:
        """Once the program has exited: its last output passed on."""
        if self.pump is not None:
            self.pump.join(timeout=DRAIN_S)


def _a_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _pass_on(source: IO[bytes], sink: int) -> None:
    """Copy ``source`` to the file descriptor ``sink`` until it ends; a sink that goes away stops the writing,
    never the reading."""
    open_sink = True
    while chunk := os.read(source.fileno(), 1 << 16):
        open_sink = open_sink and _written(sink, chunk)


def _written(sink: int, chunk: bytes) -> bool:
    """Whether all of ``chunk`` went to ``sink`` (False: the reader downstream is gone, BrokenPipeError)."""
    try:
        while chunk:
            chunk = chunk[os.write(sink, chunk) :]
    except OSError:
        return False
    return True
