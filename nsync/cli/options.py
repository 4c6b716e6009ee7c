"""The options several commands share, declared once; the parsing of their values; and the flag each library
setting is, for messages that tell the reader to change one."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from nsync.errors import UsageError

# Options several commands share, declared once.
SavedOption = Annotated[
    Path | None,
    typer.Option(
        "--from",
        help="Render (and gate) a result that --json saved, instead of running the command: the terminal summary, "
        "--json, --markdown, --html where the result has one.",
        metavar="RESULT.json",
    ),
]
JsonOption = Annotated[
    str | None, typer.Option("--json", help="Write the JSON result here ('-': stdout).", metavar="PATH")
]
TopOption = Annotated[int, typer.Option(min=1, help="Call sites to show in the table.", metavar="N")]
StepRangeOption = Annotated[
    str | None, typer.Option(help="NVTX range that marks one step (default: automatic).", metavar="NAME")
]
StepKernelOption = Annotated[
    str | None,
    typer.Option(help="A kernel launched once per step: steps run from one launch to the next.", metavar="NAME"),
]
WarmupOption = Annotated[
    int | None, typer.Option(min=0, help="Leading steps to skip (default: 1 when there are at least 4).", metavar="N")
]
WindowOption = Annotated[
    str | None,
    typer.Option(
        "--window", help="Analyse only START:END seconds of the capture (e.g. 10:20, or 30: to the end).", metavar="S:E"
    ),
]
MaxMemoryOption = Annotated[
    str | None,
    typer.Option(
        help="Memory to plan for, e.g. 2G (default: what is available). A bigger trace is analysed for the "
        "first part of its time that fits, with a warning.",
        metavar="SIZE",
    ),
]
PassInconclusiveOption = Annotated[
    bool,
    typer.Option(
        help="When the gate cannot judge (no prediction; runs that cannot be compared), pass (exit 0) instead "
        "of failing (exit 1)."
    ),
]
QuietOption = Annotated[
    bool, typer.Option("-q", "--quiet", help="Print the verdict alone: no table, no warnings, no notes (CI logs).")
]
VerboseOption = Annotated[bool, typer.Option("-v", "--verbose", help="Print each call site's whole stack too.")]
HtmlOption = Annotated[Path | None, typer.Option("--html", help="Write the HTML report here.", metavar="PATH")]
DbOption = Annotated[
    Path | None,
    typer.Option(
        "--db",
        help="Write every sync and the call-site table to this SQLite database (tables syncs, callsites, "
        "nsync_meta; query with sqlite-utils or Datasette). Never the trace itself.",
        metavar="PATH",
    ),
]
CalibrationOption = Annotated[
    bool,
    typer.Option(
        help="Fit predictions to the program's unprofiled run: NAME.calibration.json beside the trace, which "
        "nsync profile writes (off: the uncalibrated model)."
    ),
]
SarifOption = Annotated[
    Path | None,
    typer.Option(
        "--sarif",
        help="Write the findings as SARIF 2.1.0 here, for code scanning (each on its line of a pull request).",
        metavar="PATH",
    ),
]
AnnotationsOption = Annotated[
    bool,
    typer.Option(
        "--annotations",
        help="Print the findings as GitHub Actions workflow commands (::warning file=...,line=...::), after the "
        "summary: each shows on its line of the pull request.",
    ),
]
MarkdownOption = Annotated[
    Path | None, typer.Option("--markdown", help="Write a Markdown summary here.", metavar="PATH")
]
SourceDirOption = Annotated[
    list[Path] | None,
    typer.Option(
        help="Where to look for the traced Python files, to quote their lines and write their fixes (repeatable).",
        metavar="DIR",
    ),
]
SuggestPatchOption = Annotated[
    Path | None,
    typer.Option(
        "--suggest-patch",
        help="Write the fixes nsync can write from your code as a unified diff here, to review and apply yourself "
        "(git apply FILE); nsync never edits your files.",
        metavar="FILE",
    ),
]

SuggestSwitchOption = Annotated[
    Path | None,
    typer.Option(
        "--suggest-switch",
        help="Write the same fixes as a diff that keeps both versions, each fix behind `if nsync.fixed():` and "
        "the code as it is under `else:`, for `nsync measure SCRIPT` to time both.",
        metavar="FILE",
    ),
]


# nsync analyze's own options
AnalyzeTraceOption = Annotated[
    Path | None,
    typer.Argument(show_default=False, metavar="TRACE"),  # described in the docstring: typer adds type noise
]
AnalyzeFailAboveOption = Annotated[
    float | None,
    typer.Option(
        min=0,
        help="Exit 3 when fixing a sync is predicted to save more than PCT % of a step (a CI gate); "
        "exit 1 when there is no prediction to gate on.",
        metavar="PCT",
    ),
]
RanksFailAboveOption = Annotated[
    float | None,
    typer.Option(
        "--fail-above",
        min=0,
        help="Exit 3 when one rank's sync holds every rank's collectives for more than PCT % of a step (a CI gate); "
        "exit 1 when no collective lines the ranks up.",
        metavar="PCT",
    ),
]
AnalyzeCalibrationFileOption = Annotated[
    Path | None,
    typer.Option("--calibration", help="Calibration file to use instead of the one beside the trace.", metavar="FILE"),
]

# nsync profile's own options
TargetOption = Annotated[
    list[str] | None,
    typer.Argument(show_default=False, metavar="PROGRAM"),
]
ModuleOption = Annotated[
    str | None, typer.Option("-m", "--module", help="Run a module (python -m MODULE).", metavar="MODULE")
]
OutDirOption = Annotated[
    Path, typer.Option("-o", "--out-dir", help="Folder for the report, SQLite and JSON.", metavar="DIR")
]
BaseNameOption = Annotated[  # (not `name`: typer 0.27 took an option of that name for the program)
    str | None,
    typer.Option("--name", help="Base name of the outputs (default: the script's name).", metavar="NAME"),
]
HtmlPathOption = Annotated[
    Path | None, typer.Option("--html", help="HTML report path (default: OUT_DIR/NAME.html).", metavar="PATH")
]
StepsOption = Annotated[int | None, typer.Option(min=4, help="Optimizer steps to capture (default 40).", metavar="K")]
WarmupStepsOption = Annotated[
    int | None,
    typer.Option(min=1, help="Optimizer steps the program runs before the capture starts (default 10).", metavar="W"),
]
WholeRunOption = Annotated[bool, typer.Option(help="Capture the whole run, not a window of steps (and let it finish).")]
RunToEndOption = Annotated[
    bool, typer.Option(help="Let the program run to its end after the window (the capture stops anyway).")
]
WaitForStepsOption = Annotated[
    float | None,
    typer.Option(
        min=1,
        help="Seconds of CUDA use to wait for a first optimizer step; a program with none is then captured "
        "by the clock, for --duration seconds (default 60).",
        metavar="SECONDS",
    ),
]
DurationOption = Annotated[
    float | None,
    typer.Option(
        min=1,
        help="Seconds to capture: with --whole-run, nsys stops after them; without optimizer steps, the "
        "window by the clock (default 20).",
        metavar="SECONDS",
    ),
]
BackendOption = Annotated[
    str,
    typer.Option(
        help="The profiler: nsys; torch (torch.profiler, no nsys needed); auto (nsys where one recording Python "
        "backtraces is found, else torch).",
        metavar="nsys|torch|auto",
    ),
]
CaptureRangeOption = Annotated[
    str | None, typer.Option(help="Capture only inside 'cudaProfilerApi' or 'nvtx' ranges.", metavar="KIND")
]
NvtxRangeOption = Annotated[
    str | None, typer.Option(help="With --capture-range nvtx: the range, e.g. step.", metavar="NAME")
]
CpuSamplingOption = Annotated[
    bool | None,
    typer.Option(
        "--cpu-sampling/--no-cpu-sampling",
        help="CPU sampling, which CUDA and Python backtraces need (default: on where nsys records Python "
        "backtraces, nsys >= 2025.1; off with older ones, whose sampling hangs now and then).",
        show_default=False,
    ),
]
StepMarksOption = Annotated[
    bool,
    typer.Option(
        help="Mark each optimizer step with an NVTX range (PyTorch's global optimizer hooks, loaded through "
        "PYTHONPATH; the program is not edited), so steps are found exactly."
    ),
]
CalibrateOption = Annotated[
    bool,
    typer.Option(
        help="First run the program once without the profiler, timing its steps with CUDA events, so that "
        "predictions are fitted to its own unprofiled speed (costs one more run of the program)."
    ),
]
CalibrationRunsOption = Annotated[
    int,
    typer.Option(
        min=1,
        max=10,
        help="How many calibration runs to make: their steps are pooled, so that one run on a slow moment of "
        "a shared host counts for its share, and the likely ranges span the runs' spread (each costs one more "
        "bounded run of the program).",
        metavar="N",
    ),
]
CpusOption = Annotated[
    str | None,
    typer.Option(
        help="Run the calibration run and the capture on these CPUs only (e.g. 2-5): both then run at the same "
        "host speed, which calibrated predictions need on a shared machine.",
        metavar="LIST",
    ),
]
NsysArgOption = Annotated[
    list[str] | None, typer.Option(help="Extra flag for 'nsys profile' (repeatable).", metavar="FLAG")
]
NsysPathOption = Annotated[
    str | None,
    typer.Option("--nsys", help="nsys executable (default: $NSYS, PATH, usual install folders).", metavar="PATH"),
]
PythonOption = Annotated[
    str | None, typer.Option(help="Python interpreter for SCRIPT/-m (default: python3 on PATH).", metavar="PATH")
]

# nsync measure's own options
MeasureRunsOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        max=100,
        help="Runs of each command, alternated (A B B A A B...), or of the one command (default 5).",
        metavar="N",
    ),
]
MeasureStepsOption = Annotated[
    int | None,
    typer.Option(min=4, help="Optimizer steps to time (default 40; one command: 200).", metavar="K"),
]
MeasureBlockStepsOption = Annotated[
    int | None,
    typer.Option(min=2, help="One command: optimizer steps in each block of one version (default 10).", metavar="N"),
]
MeasureWarmupStepsOption = Annotated[
    int | None,
    typer.Option(min=1, help="Optimizer steps each run makes before they are timed (default 10).", metavar="W"),
]
MeasureWaitForStepsOption = Annotated[
    float | None,
    typer.Option(
        min=1,
        help="Seconds of CUDA use to wait for a first optimizer step; a program with none then has its NVTX "
        "ranges timed for --duration seconds (default 60).",
        metavar="SECONDS",
    ),
]
MeasureDurationOption = Annotated[
    float | None,
    typer.Option(min=1, help="Seconds a program without optimizer steps is timed (default 20).", metavar="SECONDS"),
]
MeasureCpusOption = Annotated[
    str | None,
    typer.Option(
        help="Run every run on these CPUs only (e.g. 2-5; on the H200 it did not narrow the runs' spread).",
        metavar="LIST",
    ),
]
MeasureFailOnRegressionOption = Annotated[
    float | None,
    typer.Option(
        help="Exit 3 when B is slower than A beyond the runs' noise and by more than PCT %; exit 1 when the "
        "runs are too noisy to tell whether it is.",
        metavar="PCT",
        min=0,
    ),
]
MeasurePythonOption = Annotated[
    str | None,
    typer.Option(help="Python interpreter for a script or -m (default: python3 on PATH).", metavar="PATH"),
]

# The library's messages name its API; this command line's users read its flags instead.
FLAG_OF_SETTING = {
    "AnalysisConfig.window_s": "--window START:END",
    "AnalysisConfig.max_memory_bytes": "--max-memory",
    "AnalysisConfig.warmup_steps": "--warmup-steps",
    "ProfileOptions.calibrate=False": "--no-calibrate",
    "ProfileOptions.run_to_end=True": "--run-to-end",
    "ProfileOptions.whole_run=True": "--whole-run",
    "ProfileOptions.step_marks=False": "--no-step-marks",
    "ProfileOptions.capture_range": "--capture-range",
    "ProfileOptions.backend": "--backend",
    "ProfileOptions.nvtx_range": "--nvtx-range",
    "ProfileOptions.python_sampling": "--python-sampling",
    "ProfileOptions.cpu_sampling": "--cpu-sampling/--no-cpu-sampling",
    "ProfileOptions.nsys_arg": "--nsys-arg",
    "ProfileOptions.nsys_path": "--nsys",
    "ProfileOptions.steps": "--steps",
    "ProfileOptions.warmup_steps": "--warmup-steps",
    "ProfileOptions.run_to_end": "--run-to-end",
    "ProfileOptions.wait_for_steps": "--wait-for-steps",
    "ProfileOptions.whole_run or capture_range": "--whole-run or --capture-range",
    "MeasureOptions.block_steps": "--block-steps",
    "MeasureOptions.runs": "--runs",
}


def parse_window(text: str | None) -> tuple[float, float | None] | None:
    """``10:20`` -> (10.0, 20.0); ``30:`` runs to the end (None), ``:5`` from the start."""
    if text is None:
        return None
    first, sep, second = text.partition(":")
    try:
        start, end = float(first or 0), float(second) if second else None
    except ValueError:
        start = end = float("nan")
    if not sep or not 0 <= start < (float("inf") if end is None else end):
        raise UsageError(f"--window {text!r}: expected START:END in seconds, with START < END (e.g. 10:20)")
    return start, end


def parse_cpus(text: str | None) -> frozenset[int] | None:
    """``--cpus 2-5,8`` -> {2, 3, 4, 5, 8}: CPUs this process may run on."""
    if text is None:
        return None
    try:
        cpus = set()
        for part in text.split(","):
            first, _, last = part.strip().partition("-")
            cpus |= set(range(int(first), int(last or first) + 1))
    except ValueError:
        raise UsageError(f"--cpus {text!r}: expected CPU numbers and ranges such as 2-5 or 0,2,4") from None
    allowed = os.sched_getaffinity(0)
    if not cpus or not cpus <= allowed:
        raise UsageError(
            f"--cpus {text!r}: this process may run on CPUs {_ranges(sorted(allowed))} only"
            + (f" (not {_ranges(sorted(cpus - allowed))})" if cpus else "")
        )
    return frozenset(cpus)


def _ranges(numbers: list[int]) -> str:
    """[0, 1, 2, 5] -> '0-2,5'."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def parse_size(text: str | None) -> int | None:
    """``800M``, ``2G``, ``1.5GiB`` or a byte count -> bytes (None: none given)."""
    if text is None:
        return None
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    cleaned = text.strip().upper().removesuffix("B").removesuffix("I")
    number, unit = (cleaned[:-1], cleaned[-1]) if cleaned[-1:] in units and cleaned[-1:] else (cleaned, "")
    try:
        value = float(number) * units[unit]
    except ValueError:
        raise UsageError(f"--max-memory {text!r}: expected a size such as 800M or 2G") from None
    if value <= 0:
        raise UsageError(f"--max-memory {text!r}: must be above zero")
    return int(value)


def given(parameters: dict[str, Any], kind: Any, **values: Any) -> dict[str, Any]:
    """The command's ``parameters`` (its ``locals()`` before anything else: typer's converted values, where
    ``ctx.params`` holds click's, a ``str`` for a ``Path`` under typer 0.27) that are fields of ``kind`` (a
    library's options, named as the flags are), with ``values`` (those the command parsed) over them."""
    fields = {field.name for field in dataclasses.fields(kind)}
    return {name: value for name, value in parameters.items() if name in fields} | values
