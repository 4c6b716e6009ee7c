"""What ``nsync profile`` takes (ProfileOptions) and gives (ProfileResult), and where the program's output goes."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from nsync.capturing.nsys import CaptureOptions
from nsync.capturing.run import output_name
from nsync.capturing.window import CaptureWindow, window_of
from nsync.config import AnalysisConfig
from nsync.errors import UsageError
from nsync.load.calibration import Calibration
from nsync.report import Analysis
from nsync.settings import setting
from nsync.stdio import drop_stdout

CAPTURE_RANGES = ("cudaProfilerApi", "nvtx")
BACKENDS = ("nsys", "torch", "auto")
# what only nsys does: not with --backend torch
NSYS_ONLY = ("capture_range", "nvtx_range", "python_sampling", "cpu_sampling", "nsys_arg", "nsys_path")


@dataclass(frozen=True)
class ProfileOptions:
    """What ``nsync profile`` takes besides the program, by its flags' names; the defaults are the command's.

    The window: ``warmup_steps`` optimizer steps (10), then ``steps`` captured (40), the program then ended unless
    ``run_to_end``; a program without optimizer steps is captured for ``duration`` seconds (20) once it has used
    CUDA ``wait_for_steps`` seconds (60). ``whole_run`` (or a ``capture_range``): no window, the whole run (nsys
    stopped after ``duration`` seconds, if given). ``calibrate``: run the program ``calibration_runs`` times
    without the profiler first, to fit predictions to its own speed; ``cpus``: pin both runs to these CPUs.
    ``backend``: the profiler: ``nsys``, ``torch`` (torch.profiler, started and stopped in the program), or
    ``auto`` (nsys where one that records Python backtraces is found, else torch.profiler)."""

    module: str | None = None  # run python -m MODULE
    out_dir: Path = Path("nsync-out")
    base_name: str | None = None  # the outputs' base name (default: the script's name)
    steps: int | None = None
    warmup_steps: int | None = None
    whole_run: bool = False
    run_to_end: bool = False
    wait_for_steps: float | None = None
    duration: float | None = None
    capture_range: str | None = None  # cudaProfilerApi | nvtx
    nvtx_range: str | None = None
    python_sampling: bool = False
    cpu_sampling: bool | None = None  # None: where this nsys records Python backtraces (2025.1+)
    step_marks: bool = True
    calibrate: bool = True
    calibration_runs: int = 1
    cpus: frozenset[int] | None = None
    nsys_arg: tuple[str, ...] = ()
    keep_report: bool = True
    nsys_path: str | None = None
    python: str | None = None
    config: AnalysisConfig = field(default_factory=AnalysisConfig)  # the analysis's (its step_range: --step-range)
    rerun_whole_s: float = CaptureWindow.rerun_whole_s  # a program that ends before its window this soon: rerun whole
    program_output: str = "stdout"  # where the program's own stdout goes: "stdout", or "stderr" (JSON on stdout)
    label_runs: bool = False  # a line before each run's output, where it goes: which run it is
    backend: str = "nsys"  # nsys | torch | auto

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise UsageError(f"{setting('ProfileOptions.backend')} must be nsys, torch or auto, not {self.backend!r}")
        if self.backend == "torch":
            default = ProfileOptions()
            nsys_only = [setting(f"ProfileOptions.{n}") for n in NSYS_ONLY if getattr(self, n) != getattr(default, n)]
            if nsys_only:
                raise UsageError(f"{', '.join(nsys_only)}: nsys's, not with {setting('ProfileOptions.backend')} torch")
        if self.program_output not in ("stdout", "stderr"):
            raise UsageError(f"{setting('ProfileOptions.program_output')} must be stdout or stderr")
        if self.capture_range not in (None, *CAPTURE_RANGES):
            raise UsageError(
                f"{setting('ProfileOptions.capture_range')} must be cudaProfilerApi or nvtx, not {self.capture_range!r}"
            )
        if self.whole_run or self.capture_range is not None:
            chosen: dict[str, object] = {"steps": self.steps, "warmup_steps": self.warmup_steps}
            chosen |= {"run_to_end": self.run_to_end or None, "wait_for_steps": self.wait_for_steps}
            given = [setting(f"ProfileOptions.{name}") for name, value in chosen.items() if value is not None]
            if given:
                whole = setting("ProfileOptions.whole_run or capture_range")
                raise UsageError(f"{', '.join(given)} choose a window of steps: not with {whole}")

    @property
    def window(self) -> CaptureWindow | None:
        """The window of steps captured (None: the whole run, or the capture range given)."""
        if self.whole_run or self.capture_range is not None:
            return None
        window = window_of(self.steps, self.warmup_steps, self.run_to_end, self.wait_for_steps, self.duration)
        return replace(window, rerun_whole_s=self.rerun_whole_s)

    def capture(self, target: Sequence[str]) -> CaptureOptions:
        """How nsys captures the program ``target`` (its words after nsync profile's flags)."""
        window = self.window
        return CaptureOptions(
            out_dir=self.out_dir,
            name=self.base_name or output_name(target, self.module),
            duration_s=self.duration if window is None else None,
            capture_range=self.capture_range,
            nvtx_range=self.nvtx_range,
            python_sampling=self.python_sampling,
            cpu_sampling=self.cpu_sampling,
            nsys_args=self.nsys_arg,
            keep_report=self.keep_report,
            step_marks=self.step_marks,
            window=window,
            program_output=self.program_output,
        )


@dataclass(frozen=True)
class ProfileResult:
    analysis: Analysis
    trace: Path  # the SQLite export, or torch.profiler's trace (.pt.trace.json.gz)
    report: Path | None  # the .nsys-rep, where kept
    exit_code: int  # the program's own exit code
    interrupted: bool
    calibration: Calibration | None = None

    @property
    def sqlite(self) -> Path:
        """The trace (its name before torch.profiler traces could be captured)."""
        return self.trace


def program_fd(program_output: str) -> int | None:
    """The file descriptor the program's stdout goes to (None: where ours does)."""
    return 2 if program_output == "stderr" else None


def label_run(options: ProfileOptions, run: str) -> None:
    """Which run the output below is of, where the program's output goes (a pipe or a log shows both runs)."""
    if options.label_runs:
        stream = sys.stderr if options.program_output == "stderr" else sys.stdout
        try:
            stream.write(f"-- nsync: the program's output in {run} --\n")
            stream.flush()
        except BrokenPipeError:  # (`nsync profile ... | head`: the capture goes on, its output goes nowhere)
            if stream is sys.stdout:
                drop_stdout()
