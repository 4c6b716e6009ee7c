"""The ``nsync`` command: thin wiring of the library's public functions to files and exit codes."""

from __future__ import annotations

import dataclasses
import functools
import gc
import io
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from typer.core import TyperCommand

import nsync
from nsync import EXIT_CODES, AnalysisConfig, NsyncError, UsageError, gates
from nsync.errors import CannotJudge, GateFailed, Interrupted
from nsync.memory import release_freed_memory, tune_allocator
from nsync.render.text import printable
from nsync.render.write import check_writable
from nsync.settings import name_settings
from nsync.source import search_folders
from nsync.stdio import drop_stdout, raise_if_interrupted

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's plain help: no boxes, no option name cut to fit a column
    help="Find the Python lines whose CUDA syncs make the GPU wait, from Nsight Systems traces.\n\n"
    "Exit codes: " + "; ".join(f"{code} {text}" for code, text in EXIT_CODES.items()),
)
err = Console(stderr=True, highlight=False, soft_wrap=True)


class Command(TyperCommand):
    """A command whose help reads at 80 columns on any typer: the arguments by name in the usage line and
    described in the command's text (typer adds a type to each, '<path>', '<list[str]>'), the options alone
    listed."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                name = param.metavar or (param.name or "").upper()
                name = name if param.required else f"[{name}]"
                pieces.append(f"{name}..." if param.nargs != 1 and not name.endswith("...") else name)
        return pieces

    def format_options(self, ctx: Any, formatter: Any) -> None:
        options = [p.get_help_record(ctx) for p in self.get_params(ctx) if p.param_type_name == "option"]
        if any(options):
            with formatter.section("Options"):
                formatter.write_dl([record for record in options if record])


def examples(*lines: str) -> str:
    """A command's examples for its help, kept as written (click's \\b: no rewrapping), each under 80 columns."""
    return "Examples:\n\n\b\n" + "\n".join(f"  {line}" for line in lines)


# Options several commands share, declared once.
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


def _print_version(value: bool) -> None:
    if value:
        sys.stdout.write(f"nsync {nsync.__version__}\n")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Find the Python lines whose CUDA syncs make the GPU wait, from Nsight Systems traces."""


# The library's messages name its API; this command line's users read its flags instead.
FLAG_OF_SETTING = {
    "AnalysisConfig.window_s": "--window START:END",
    "AnalysisConfig.warmup_steps": "--warmup-steps",
    "profile(calibrate=False)": "--no-calibrate",
    "CaptureWindow(run_to_end=True)": "--run-to-end",
    "CaptureWindow.warmup_steps": "--warmup-steps",
    "CaptureOptions.window=None": "--whole-run",
    "profile(step_marks=False)": "--no-step-marks",
}


def progress(status: Status, prefix: str = "") -> Callable[[str], None]:
    """A stage's name on the spinner; between stages, the memory the last one freed goes back to the OS (a
    process-wide setting, so the command line's and not the library's)."""

    def say(stage: str) -> None:
        raise_if_interrupted()  # a Ctrl-C a library swallowed ends the command at the next stage
        release_freed_memory()
        status.update(prefix + stage)

    return say


def reported(command: Callable[..., None]) -> Callable[..., None]:
    """Turn NsyncError into one line on stderr and its exit code (the one place errors are handled)."""

    @functools.wraps(command)
    def wrapper(*args: object, **kwargs: object) -> None:
        try:
            command(*args, **kwargs)
        except typer.Exit:
            raise
        except KeyboardInterrupt:  # past typer, which would end it silently with 130
            raise Interrupted from None
        except BrokenPipeError:  # the reader went away (`| head`): nothing left to say, and no error
            drop_stdout()
            raise typer.Exit(0) from None
        except GateFailed as error:  # the gate's verdict, not an error of nsync's
            sys.stderr.write(f"nsync: {printable(str(error))}\n")
            raise typer.Exit(error.exit_code) from None
        except NsyncError as error:
            sys.stderr.write(f"nsync: error: {printable(str(error))}\n")
            raise typer.Exit(error.exit_code) from None
        except MemoryError:
            sys.stderr.write(
                "nsync: error: out of memory: analyse a part of the trace with --window START:END, "
                "or plan for less with --max-memory\n"
            )
            raise typer.Exit(1) from None
        except Exception as error:  # a bug must not print a traceback at users
            if os.environ.get("NSYNC_DEBUG"):
                raise
            err.print(
                f"nsync: internal error: {type(error).__name__}: {printable(str(error))} (set NSYNC_DEBUG=1 for "
                "the traceback)",
                markup=False,
            )
            raise typer.Exit(1) from None

    return wrapper


@app.command(
    "analyze",
    cls=Command,
    short_help="Rank sync call sites by what fixing them saves.",
    epilog=examples(
        "nsync analyze report.sqlite",
        "nsync analyze report.sqlite --json result.json --top 20",
        "nsync analyze report.sqlite --step-range train_step --json -",
        "nsync analyze report.sqlite --fail-above 5   # CI: fail over 5 % of a step",
        "nsync analyze report.sqlite --suggest-patch fix.patch  # git apply fix.patch",
        "nsync analyze report.sqlite --suggest-switch both.patch  # for nsync measure",
        "nsync analyze --from result.json --html r.html  # render a saved result",
    ),
)
@reported
def analyze_command(
    trace: Annotated[
        Path | None,
        typer.Argument(show_default=False, metavar="TRACE"),  # described in the docstring: typer adds type noise
    ] = None,
    saved: Annotated[
        Path | None,
        typer.Option(
            "--from",
            help="Render a result that --json saved instead of analysing a trace (terminal, --html, --markdown, "
            "--json, --fail-above).",
            metavar="RESULT.json",
        ),
    ] = None,
    json_path: JsonOption = None,
    top: TopOption = 10,
    step_range: StepRangeOption = None,
    step_kernel: StepKernelOption = None,
    warmup_steps: WarmupOption = None,
    window: WindowOption = None,
    max_memory: MaxMemoryOption = None,
    html_path: HtmlOption = None,
    markdown_path: MarkdownOption = None,
    source_dir: SourceDirOption = None,
    suggest_patch: SuggestPatchOption = None,
    suggest_switch: SuggestSwitchOption = None,
    db_path: DbOption = None,
    fail_above: Annotated[
        float | None,
        typer.Option(
            min=0,
            help="Exit 3 when fixing a sync is predicted to save more than PCT % of a step (a CI gate); "
            "exit 1 when there is no prediction to gate on.",
            metavar="PCT",
        ),
    ] = None,
    pass_inconclusive: PassInconclusiveOption = False,
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
    calibrate: CalibrationOption = True,
    calibration_file: Annotated[
        Path | None,
        typer.Option(
            "--calibration", help="Calibration file to use instead of the one beside the trace.", metavar="FILE"
        ),
    ] = None,
) -> None:
    """Rank the Python call sites by what fixing their syncs would save per step.

    TRACE is the nsys SQLite export (.sqlite or .sqlite.xz, from 'nsys export --type sqlite
    --include-blobs=true'), or an .nsys-rep when nsys is installed."""
    outputs = Outputs(json_path, html_path, markdown_path, db_path, suggest_patch, suggest_switch)
    analysis: nsync.Analysis | None = None
    if saved is not None:  # render a saved result: no flag that needs a trace
        _refuse_with_from(TRACE=trace, **{"--step-range": step_range, "--step-kernel": step_kernel,
                          "--warmup-steps": warmup_steps, "--window": window, "--max-memory": max_memory,
                          "--db": db_path, "--calibration": calibration_file,
                          "--no-calibrate": None if calibrate else True})  # fmt: skip
        outputs.check(saved)
        report = nsync.read_report(saved)
    else:
        if trace is None:
            raise UsageError(
                "Missing argument 'TRACE': the trace to analyse (or --from RESULT.json, a saved result to render)"
            )
        outputs.check(trace)
        config = AnalysisConfig(
            step_range=step_range,
            step_kernel=step_kernel,
            warmup_steps=warmup_steps,
            window_s=parse_window(window),
            max_memory_bytes=None if max_memory is None else parse_size(max_memory),
        )
        calibration = _calibration(trace, calibrate, calibration_file)
        with err.status("loading trace", spinner="dots") as status:
            analysis = nsync.analyze(
                trace, config, progress=progress(status), calibration=calibration, source_dirs=source_dir
            )
        report = nsync.build_report(analysis)
    complete = _emit(report, top, outputs, source_dir, analysis, quiet=quiet, verbose=verbose)
    if fail_above is not None:
        _gate(lambda: gates.fail_above(report, fail_above), "--fail-above", pass_inconclusive)
    if not complete:
        raise typer.Exit(1)


def _refuse_with_from(**given: object) -> None:
    """--from renders a saved result as it is: the flags (and TRACE) that need a trace are refused."""
    named = [flag for flag, value in given.items() if value is not None]
    if named:
        need = "needs" if len(named) == 1 else "need"
        raise UsageError(f"--from renders a saved result as it is: {', '.join(named)} {need} a trace to analyse")


def _calibration(trace: Path, use: bool, explicit: Path | None = None) -> Calibration | None:
    """The calibration to fit predictions to: ``explicit``, else the one ``nsync profile`` left beside the
    trace (none: uncalibrated). A bad file is an error, never silently ignored."""
    from nsync.calibration import beside, read_calibration

    if explicit is not None and not use:
        raise UsageError("--calibration and --no-calibrate contradict each other")
    path = explicit or beside(trace)
    if not use or (explicit is None and not path.is_file()):
        return None
    calibration = read_calibration(path)  # (said once it is read: a missing or bad file is an error alone)
    err.print(f"nsync: calibrated by {path}", markup=False)
    return calibration


def _gate(check: Callable[[], None], flag: str, pass_inconclusive: bool) -> None:
    """Run a CI gate (nsync.gates): exit 3 when it fails (said by ``reported``), 1 when it cannot judge, unless
    --pass-inconclusive lets that pass (said as much)."""
    try:
        check()
    except CannotJudge as error:
        if not pass_inconclusive:
            raise CannotJudge(f"{flag} {error.what}", f"{error.why} (--pass-inconclusive lets it pass)") from None
        why = printable(error.why)
        err.print(f"nsync: {flag} {error.what} ({why}): passing, as --pass-inconclusive asks", markup=False)


@app.command(
    "profile",
    cls=Command,
    context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True},
    short_help="Capture a program under nsys, then analyse it.",
    epilog=examples(
        "nsync profile train.py --epochs 1",
        "nsync profile -m mypkg.train --lr 3e-4",
        "nsync profile --steps 100 --warmup-steps 50 train.py",
        "nsync profile --whole-run train.py",
        "nsync profile -o runs --name base -- torchrun --nproc-per-node 1 train.py",
    ),
)
@reported
def profile_command(
    target: Annotated[
        list[str] | None,
        typer.Argument(show_default=False, metavar="PROGRAM"),
    ] = None,
    module: Annotated[
        str | None, typer.Option("-m", "--module", help="Run a module (python -m MODULE).", metavar="MODULE")
    ] = None,
    out_dir: Annotated[
        Path, typer.Option("-o", "--out-dir", help="Folder for the report, SQLite and JSON.", metavar="DIR")
    ] = Path("nsync-out"),
    base_name: Annotated[  # (not `name`: typer 0.27 took an option of that name for the program)
        str | None,
        typer.Option("--name", help="Base name of the outputs (default: the script's name).", metavar="NAME"),
    ] = None,
    json_path: JsonOption = None,
    top: TopOption = 10,
    html_path: Annotated[
        Path | None, typer.Option("--html", help="HTML report path (default: OUT_DIR/NAME.html).", metavar="PATH")
    ] = None,
    markdown_path: MarkdownOption = None,
    source_dir: SourceDirOption = None,
    suggest_patch: SuggestPatchOption = None,
    suggest_switch: SuggestSwitchOption = None,
    db_path: DbOption = None,
    step_range: StepRangeOption = None,
    steps: Annotated[
        int | None, typer.Option(min=4, help="Optimizer steps to capture (default 40).", metavar="K")
    ] = None,
    warmup_steps: Annotated[
        int | None,
        typer.Option(
            min=1, help="Optimizer steps the program runs before the capture starts (default 10).", metavar="W"
        ),
    ] = None,
    whole_run: Annotated[
        bool, typer.Option(help="Capture the whole run, not a window of steps (and let it finish).")
    ] = False,
    run_to_end: Annotated[
        bool, typer.Option(help="Let the program run to its end after the window (the capture stops anyway).")
    ] = False,
    wait_for_steps: Annotated[
        float | None,
        typer.Option(
            min=1,
            help="Seconds of CUDA use to wait for a first optimizer step; a program with none is then captured "
            "by the clock, for --duration seconds (default 60).",
            metavar="SECONDS",
        ),
    ] = None,
    duration: Annotated[
        float | None,
        typer.Option(
            min=1,
            help="Seconds to capture: with --whole-run, nsys stops after them; without optimizer steps, the "
            "window by the clock (default 20).",
            metavar="SECONDS",
        ),
    ] = None,
    capture_range: Annotated[
        str | None, typer.Option(help="Capture only inside 'cudaProfilerApi' or 'nvtx' ranges.", metavar="KIND")
    ] = None,
    nvtx_range: Annotated[
        str | None, typer.Option(help="With --capture-range nvtx: the range, e.g. step.", metavar="NAME")
    ] = None,
    python_sampling: Annotated[bool, typer.Option(help="Also sample Python stacks (nsys >= 2023.4).")] = False,
    cpu_sampling: Annotated[
        bool | None,
        typer.Option(
            "--cpu-sampling/--no-cpu-sampling",
            help="CPU sampling, which CUDA and Python backtraces need (default: on where nsys records Python "
            "backtraces, nsys >= 2025.1; off with older ones, whose sampling hangs now and then).",
            show_default=False,
        ),
    ] = None,
    step_marks: Annotated[
        bool,
        typer.Option(
            help="Mark each optimizer step with an NVTX range (PyTorch's global optimizer hooks, loaded through "
            "PYTHONPATH; the program is not edited), so steps are found exactly."
        ),
    ] = True,
    calibrate: Annotated[
        bool,
        typer.Option(
            help="First run the program once without the profiler, timing its steps with CUDA events, so that "
            "predictions are fitted to its own unprofiled speed (costs one more run of the program)."
        ),
    ] = True,
    calibration_runs: Annotated[
        int,
        typer.Option(
            min=1,
            max=10,
            help="How many calibration runs to make: their steps are pooled, so that one run on a slow moment of "
            "a shared host counts for its share, and the likely ranges span the runs' spread (each costs one more "
            "bounded run of the program).",
            metavar="N",
        ),
    ] = 1,
    cpus: Annotated[
        str | None,
        typer.Option(
            help="Run the calibration run and the capture on these CPUs only (e.g. 2-5): both then run at the same "
            "host speed, which calibrated predictions need on a shared machine.",
            metavar="LIST",
        ),
    ] = None,
    nsys_arg: Annotated[
        list[str] | None, typer.Option(help="Extra flag for 'nsys profile' (repeatable).", metavar="FLAG")
    ] = None,
    keep_report: Annotated[bool, typer.Option(help="Keep the .nsys-rep next to the SQLite.")] = True,
    nsys_path: Annotated[
        str | None,
        typer.Option("--nsys", help="nsys executable (default: $NSYS, PATH, usual install folders).", metavar="PATH"),
    ] = None,
    python: Annotated[
        str | None, typer.Option(help="Python interpreter for SCRIPT/-m (default: python3 on PATH).", metavar="PATH")
    ] = None,
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Run a program under nsys with Python backtraces, export the trace, and rank its sync call sites.

    PROGRAM is SCRIPT [ARGS]... (a .py file), -m MODULE [ARGS]..., or -- COMMAND [ARGS]... By default the
    program runs 10 optimizer steps, nsys captures the next 40, and the program is then ended: once without
    the profiler first (the calibration run), then under nsys."""
    from nsync.nsys import CaptureOptions
    from nsync.profiling import build_command, output_name, prepare_output, profile

    if capture_range not in (None, "cudaProfilerApi", "nvtx"):
        raise UsageError(f"--capture-range must be cudaProfilerApi or nvtx, not {capture_range!r}")
    window = _capture_window(
        whole_run or capture_range is not None, steps, warmup_steps, run_to_end, wait_for_steps, duration
    )
    command = build_command(target or [], module, python)
    prepare_output(out_dir)
    Outputs(json_path, html_path, markdown_path, db_path, suggest_patch, suggest_switch).check()  # before the capture
    options = CaptureOptions(
        out_dir=out_dir,
        name=base_name or output_name(target or [], module),
        duration_s=duration if window is None else None,
        capture_range=capture_range,
        nvtx_range=nvtx_range,
        python_sampling=python_sampling,
        cpu_sampling=cpu_sampling,
        nsys_args=tuple(nsys_arg or ()),
        keep_report=keep_report,
        step_marks=step_marks,
        window=window,
    )
    config = AnalysisConfig(step_range=step_range)

    def say(message: str) -> None:
        err.print(f"nsync: {printable(message)}", markup=False)

    def release(_stage: str) -> None:  # between the analysis's stages: see progress()
        release_freed_memory()

    result = profile(
        command,
        options,
        config,
        nsys_path,
        say=say,
        progress=release,
        calibrate=calibrate,
        cpus=parse_cpus(cpus),
        calibration_runs=calibration_runs,
    )
    err.print(f"nsync: wrote {result.sqlite}" + (f" and {result.report}" if result.report else ""), markup=False)
    html = html_path or out_dir / f"{options.name}.html"
    outputs = Outputs(json_path, html, markdown_path, db_path, suggest_patch, suggest_switch)
    report = nsync.build_report(result.analysis)
    complete = _emit(report, top, outputs, source_dir, result.analysis, quiet=quiet, verbose=verbose)
    if report.verdict is not None and report.verdict.measure and not quiet:
        words = ["-m", module, *(target or [])] if module else list(target or [])
        settle = _to_settle(report, words, result.sqlite, suggest_switch, python, source_dir)
        err.print(f"nsync: {printable(settle)}", markup=False)
    if result.interrupted:
        raise Interrupted
    if result.exit_code:  # the program's own exit code comes first
        err.print(f"nsync: the program exited with code {result.exit_code}", markup=False)
        raise typer.Exit(result.exit_code)
    if not complete:
        raise typer.Exit(1)


def _to_settle(
    report: nsync.Report,
    words: list[str],
    sqlite: Path,
    switch: Path | None,
    python: str | None,
    source_dirs: list[Path] | None = None,
) -> str:
    """After a "measure it" verdict: the commands that settle it, with the program's own command line; the
    switched patch where it would hold a switch (the patch renderer tells: the files found, their lines fit)."""
    import shlex

    from nsync.render.patch import SWITCH, render_patch

    measure = "nsync measure " + (f"--python {shlex.quote(python)} " if python else "") + shlex.quote(shlex.join(words))
    # a loop without optimizer steps (its steps found otherwise): the measure switches on its nsync.step() calls
    if report.steps.source != "marks":
        measure += "; it has no optimizer step: end each of its steps with nsync.step()"
    if SWITCH not in render_patch(report, source_dirs, switched=True):
        return f"to settle it, put the fix behind `if nsync.fixed():` in the program, then: {measure}"
    if switch is None:
        analyze = f"nsync analyze {shlex.quote(str(sqlite))} --suggest-switch both.patch"
        return f"to settle it: {analyze} && git apply both.patch && {measure}"
    return f"to settle it: git apply {shlex.quote(str(switch))} && {measure}"


def _capture_window(
    whole: bool,
    steps: int | None,
    warmup_steps: int | None,
    run_to_end: bool,
    wait_s: float | None,
    seconds: float | None,
) -> CaptureWindow | None:
    """The window of steps ``nsync profile`` captures (None: the whole run, or the capture range given)."""
    from nsync.nsys.window import CaptureWindow

    chosen: dict[str, object] = {"--steps": steps, "--warmup-steps": warmup_steps, "--run-to-end": run_to_end or None}
    chosen["--wait-for-steps"] = wait_s
    if whole:
        given = [flag for flag, value in chosen.items() if value is not None]
        if given:
            raise UsageError(f"{', '.join(given)} choose a window of steps: not with --whole-run or --capture-range")
        return None
    default = CaptureWindow()
    return CaptureWindow(
        warmup_steps=default.warmup_steps if warmup_steps is None else warmup_steps,
        steps=default.steps if steps is None else steps,
        run_to_end=run_to_end,
        wait_s=default.wait_s if wait_s is None else wait_s,
        seconds=default.seconds if seconds is None else seconds,
    )


@app.command(
    "ranks",
    cls=Command,
    short_help="Line up the ranks of a data-parallel run.",
    epilog=examples(
        "nsync ranks run/            # a folder of per-rank exports",
        "nsync ranks rank0.sqlite rank1.sqlite --json ranks.json",
        "nsync ranks run/ --scheduler tcp://10.0.0.5:8786",
    ),
)
@reported
def ranks_command(
    exports: Annotated[
        list[Path],
        typer.Argument(
            show_default=False,
            metavar="EXPORT...",
        ),
    ],
    json_path: JsonOption = None,
    top: TopOption = 10,
    step_range: StepRangeOption = None,
    max_memory: MaxMemoryOption = None,
    scheduler: Annotated[
        str | None,
        typer.Option(help="Address of a Dask scheduler to run on (default: a local cluster).", metavar="ADDRESS"),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(min=1, help="Worker processes of the local cluster (default: one per core).", metavar="N"),
    ] = None,
) -> None:
    """Line the ranks of a data-parallel run up on their collectives: the rank that reaches them last, and the
    sync that makes it late, by the delay it adds to every rank.

    EXPORT... are the ranks' SQLite exports (.sqlite or .sqlite.xz), or folders of them: one export per rank
    (nsys profile -o run/rank%q{RANK})."""
    from nsync.ranks import analyze_ranks

    outputs = Outputs(json=json_path)
    outputs.check()
    config = AnalysisConfig(
        step_range=step_range, max_memory_bytes=None if max_memory is None else parse_size(max_memory)
    )
    with err.status("starting Dask", spinner="dots") as status:
        report = analyze_ranks(exports, config, scheduler, workers, progress=progress(status))
    if not _finish(outputs, report, top):
        raise typer.Exit(1)


@app.command(
    "diff",
    cls=Command,
    short_help="Compare two runs; gate CI on a regression.",
    epilog=examples(
        "nsync diff main.sqlite pr.sqlite",
        "nsync diff main.sqlite pr.sqlite --html diff.html --markdown diff.md",
        "nsync diff main.sqlite pr.sqlite --fail-on-regression 5   # CI gate",
    ),
)
@reported
def diff_command(
    baseline: Annotated[
        Path,
        typer.Argument(show_default=False, metavar="BASELINE"),
    ],
    candidate: Annotated[Path, typer.Argument(show_default=False, metavar="CANDIDATE")],
    json_path: JsonOption = None,
    html_path: HtmlOption = None,
    markdown_path: MarkdownOption = None,
    fail_on_regression: Annotated[
        float | None,
        typer.Option(
            help="Exit 3 when the verdict is a regression and the step time grew by more than PCT %; exit 1 "
            "when the runs cannot be compared.",
            metavar="PCT",
            min=0,
        ),
    ] = None,
    pass_inconclusive: PassInconclusiveOption = False,
    top: TopOption = 10,
    step_range: StepRangeOption = None,
    calibrate: CalibrationOption = True,
) -> None:
    """Compare two runs: step time against its noise, and the call sites whose syncs grew or shrank. When
    both were calibrated (nsync profile), the verdict is on their predicted unprofiled step times.

    BASELINE is the healthy or reference run, CANDIDATE the run to judge (each an SQLite export or an
    .nsys-rep)."""
    from nsync.comparison import diff

    outputs = Outputs(json=json_path, html=html_path, markdown=markdown_path)
    outputs.check(baseline)
    outputs.check(candidate)
    config = AnalysisConfig(step_range=step_range)
    with err.status("loading baseline", spinner="dots") as status:
        base = nsync.analyze(
            baseline,
            config,
            progress=progress(status, "baseline: "),
            calibration=_calibration(baseline, calibrate),
        )
        cand = nsync.analyze(
            candidate,
            config,
            progress=progress(status, "candidate: "),
            calibration=_calibration(candidate, calibrate),
        )
    result = diff(base, cand)
    complete = _finish(outputs, nsync.build_diff_report(result), top)
    if fail_on_regression is not None:
        threshold = fail_on_regression
        _gate(lambda: gates.fail_on_regression(result, threshold), "--fail-on-regression", pass_inconclusive)
    if not complete:
        raise typer.Exit(1)


@app.command(
    "measure",
    cls=Command,
    short_help="Time two versions of a program unprofiled; is the change beyond noise?",
    epilog=examples(
        "nsync measure train.py train_fixed.py",
        "nsync measure train.py   # train.py asks `if nsync.fixed():` at each step",
        "nsync measure --runs 8 'train.py --lr 3e-4' 'train.py --lr 3e-4 --fix'",
        "nsync measure --cpus 2-5 --json m.json '-m pkg.train' '-m pkg.train2'",
        "nsync measure a.py b.py --markdown comment.md   # for a PR comment",
        "nsync measure --wait-for-steps 5 --duration 10 serve.py serve2.py",
        "nsync measure main.py pr.py --fail-on-regression 5   # CI gate",
    ),
)
@reported
def measure_command(
    baseline: Annotated[str, typer.Argument(show_default=False, metavar="A")],
    candidate: Annotated[str | None, typer.Argument(show_default=False, metavar="[B]")] = None,
    runs: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=100,
            help="Runs of each command, alternated (A B B A A B...), or of the one command (default 5).",
            metavar="N",
        ),
    ] = None,
    steps: Annotated[
        int | None,
        typer.Option(min=4, help="Optimizer steps to time (default 40; one command: 200).", metavar="K"),
    ] = None,
    block_steps: Annotated[
        int | None,
        typer.Option(
            min=2, help="One command: optimizer steps in each block of one version (default 10).", metavar="N"
        ),
    ] = None,
    warmup_steps: Annotated[
        int | None,
        typer.Option(min=1, help="Optimizer steps each run makes before they are timed (default 10).", metavar="W"),
    ] = None,
    wait_for_steps: Annotated[
        float | None,
        typer.Option(
            min=1,
            help="Seconds of CUDA use to wait for a first optimizer step; a program with none then has its NVTX "
            "ranges timed for --duration seconds (default 60).",
            metavar="SECONDS",
        ),
    ] = None,
    duration: Annotated[
        float | None,
        typer.Option(min=1, help="Seconds a program without optimizer steps is timed (default 20).", metavar="SECONDS"),
    ] = None,
    cpus: Annotated[
        str | None,
        typer.Option(
            help="Run every run on these CPUs only (e.g. 2-5; on the H200 it did not narrow the runs' spread).",
            metavar="LIST",
        ),
    ] = None,
    json_path: JsonOption = None,
    markdown_path: MarkdownOption = None,
    fail_on_regression: Annotated[
        float | None,
        typer.Option(
            help="Exit 3 when B is slower than A beyond the runs' noise and by more than PCT %; exit 1 when the "
            "runs are too noisy to tell whether it is.",
            metavar="PCT",
            min=0,
        ),
    ] = None,
    pass_inconclusive: PassInconclusiveOption = False,
    python: Annotated[
        str | None,
        typer.Option(help="Python interpreter for a script or -m (default: python3 on PATH).", metavar="PATH"),
    ] = None,
) -> None:
    """Run A and B (e.g. a program as it is and with nsync's fix) alternately without the profiler, timing
    each run's steps, and say whether B is faster or slower than A beyond the runs' own noise.

    A and B are each one command line, quoted: SCRIPT [ARGS]..., -m MODULE [ARGS]..., or any command (split as
    a shell would split it; no shell runs it). Each run times optimizer steps 11-50 (or NVTX ranges) with CUDA
    events and is then ended. A run's median step is one sample: the change is the ratio of the two commands'
    geometric means, with its 95 % interval.

    One command A whose program asks `if nsync.fixed():` where its versions differ runs both in each process,
    in alternating blocks of optimizer steps (A: as it is, B: fixed), free of the process's own speed, which
    separate runs differ by: a run's change is its pairs of neighbouring blocks', the runs' changes the
    samples."""
    import shlex

    from nsync import gates
    from nsync.measuring import BLOCK_STEPS, RUNS, SWITCHED_STEPS, measure, measure_switched
    from nsync.profiling import build_command
    from nsync.render.measurement import measurement_json, measurement_markdown, measurement_text

    if candidate is None and steps is None:
        steps = SWITCHED_STEPS
    if candidate is not None and block_steps is not None:
        raise UsageError("--block-steps is for one command, whose program asks nsync.fixed(); two were given")
    if candidate is not None and runs == 1:
        raise UsageError("--runs 1 cannot tell two commands' noise: give 2 or more (or one command)")
    commands = []
    for label, text in (("A", baseline), ("B", candidate)):
        if text is None:
            continue
        try:
            words = shlex.split(text)
        except ValueError as error:
            raise UsageError(f"{label} {text!r}: {error}") from None
        module = words[1] if words[:1] == ["-m"] and len(words) > 1 else None
        commands.append(build_command(words[2:] if module else words, module, python))
    json_file = Path(json_path) if json_path not in (None, "-") else None
    files = [(flag, path) for flag, path in (("--json", json_file), ("--markdown", markdown_path)) if path]
    check_writable(files)  # before the runs, not after minutes of them
    window = _capture_window(False, steps, warmup_steps, False, wait_for_steps, duration)

    def say(message: str) -> None:
        err.print(f"nsync: {printable(message)}", markup=False)

    if candidate is None:
        result = measure_switched(
            commands[0], runs or RUNS, block_steps or BLOCK_STEPS, window, say=say, cpus=parse_cpus(cpus)
        )
    else:
        result = measure(commands[0], commands[1], runs or RUNS, window, say=say, cpus=parse_cpus(cpus))
    for flag, path in files:
        path.write_text(measurement_json(result) if flag == "--json" else measurement_markdown(result))
        err.print(f"nsync: wrote {path}", markup=False)
    sys.stdout.write(measurement_json(result) if json_path == "-" else measurement_text(result))
    if result.interrupted:  # (its figures said; no gate judges a measure cut short)
        raise Interrupted
    if fail_on_regression is not None:
        threshold = fail_on_regression
        _gate(lambda: gates.fail_on_slowdown(result, threshold), "--fail-on-regression", pass_inconclusive)


class StdoutConsole(Console):
    """The summary's console: a reader that goes away ends the command quietly (rich would exit 1)."""

    def on_broken_pipe(self) -> None:
        drop_stdout()
        raise typer.Exit(0)


def _width() -> int | None:
    """Rich's width: the terminal's, or 120 columns when piped (rich would pick 80)."""
    return 120 if not sys.stdout.isatty() and "COLUMNS" not in os.environ else None


@dataclasses.dataclass(frozen=True)
class Outputs:
    """The files a command writes (``json`` may be '-': stdout), checked before the analysis runs."""

    json: str | None = None
    html: Path | None = None
    markdown: Path | None = None
    db: Path | None = None
    patch: Path | None = None
    switch: Path | None = None

    def files(self) -> list[tuple[str, Path]]:
        named = [("--json", None if self.json in (None, "-") else Path(str(self.json)))]
        named += [("--html", self.html), ("--markdown", self.markdown), ("--db", self.db)]
        named += [("--suggest-patch", self.patch), ("--suggest-switch", self.switch)]
        return [(flag, path) for flag, path in named if path is not None]

    def check(self, trace: Path | None = None) -> None:
        """Refuse now, before minutes of analysis, a file that cannot be written (nsync.render.write), or a
        database path that holds something else (nsync.render.database)."""
        check_writable(self.files(), trace)
        if self.db is not None:
            from nsync.render.database import check_database_path

            try:
                check_database_path(self.db, trace)
            except UsageError as error:
                raise UsageError(f"--db {error}") from None


def _emit(
    report: nsync.Report,
    top: int,
    outputs: Outputs,
    source_dirs: list[Path] | None = None,
    analysis: nsync.Analysis | None = None,
    quiet: bool = False,
    verbose: bool = False,
) -> bool:
    """The outputs the analysing commands write: files, then JSON on stdout or the terminal summary, then the
    warnings on stderr (``quiet``: the verdict alone, no warnings). The database needs the ``analysis``'s
    syncs. False when a file could not be written."""
    search = search_folders(report.trace.path, source_dirs)

    def summary(width: int) -> object:
        if quiet:
            return printable(f"verdict: {report.verdict.text}" if report.verdict else "verdict: none (no prediction)")
        return nsync.summary(report, top, width, search, warnings=False, verbose=verbose)

    complete = _finish(outputs, report, top, source_dirs, analysis, summary)
    for warning in [] if quiet else report.warnings:
        err.print(f"nsync: {'note' if report.status != 'ok' else 'warning'}: {printable(warning)}", markup=False)
    return complete


FORMAT_OF = {
    "--json": "json",
    "--html": "html",
    "--markdown": "markdown",
    "--db": "db",
    "--suggest-patch": "patch",
    "--suggest-switch": "switch",
}


def _finish(
    outputs: Outputs,
    report: AnyReport,
    top: int,
    source_dirs: list[Path] | None = None,
    analysis: nsync.Analysis | None = None,
    summary: Callable[[int], object] | None = None,
) -> bool:
    """Write each requested file (one that fails keeps no other from being written; the database from the
    ``analysis``), then JSON on stdout or the terminal summary. False when a file could not be written (each
    failure said on stderr)."""
    written, failed = [], []
    for flag, path in outputs.files():
        try:
            with err.status(f"rendering {flag[2:]}", spinner="dots"):
                format = FORMAT_OF[flag]
                source = analysis if format == "db" and analysis is not None else report
                nsync.write(source, path, format, top=None if format == "html" else top, source_dirs=source_dirs)
            written.append(path)
        except NsyncError as error:  # noqa: PERF203 -- a few files, each failure reported
            failed.append(str(error))
    show = summary or (lambda width: nsync.summary(report, top, width))
    if outputs.json == "-":
        sys.stdout.write(nsync.render_json(report))
    elif sys.stdout.isatty():
        terminal = StdoutConsole(highlight=False, width=_width())
        terminal.print(show(terminal.width))
    else:  # a pipe or a CI log: plain text, and no line padded with the spaces rich leaves where it wraps
        buffer = io.StringIO()
        plain = Console(file=buffer, highlight=False, width=_width(), color_system=None)
        plain.print(show(plain.width))
        sys.stdout.write("".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines()))
    for path in written:
        err.print(f"nsync: wrote {path}", markup=False)
    for message in failed:
        sys.stderr.write(f"nsync: error: {printable(message)}\n")
    return not failed


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


def parse_size(text: str) -> int:
    """``800M``, ``2G``, ``1.5GiB`` or a byte count -> bytes."""
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


# The base of click's usage errors, from a public typer name: typer 0.26+ vendors click, older ones use it.
if TYPE_CHECKING:
    from click import ClickException
    from rich.status import Status

    from nsync.calibration import Calibration
    from nsync.nsys.window import CaptureWindow
    from nsync.report import AnyReport
else:  # click comes with typer: found through typer's own classes, not imported as a dependency of nsync's
    ClickException = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


def run(argv: list[str]) -> int:
    """Run the command line ``argv``; every error is one line on stderr (``nsync: error: ...``)."""
    tune_allocator()
    name_settings(FLAG_OF_SETTING)  # messages written from now on name the flags
    # A one-shot command makes few reference cycles, and the collector's passes over pandas' objects cost
    # 0.2-0.3 s of a 10 M-row analysis (make bench); memory is handed back when the process ends.
    gc.disable()
    try:
        code = app(argv, prog_name="nsync", standalone_mode=False)
    except typer.Abort:  # older click turns a Ctrl-C outside a command into Abort
        raise Interrupted from None
    except ClickException as error:  # bad option or argument: one line, not a box
        message = error.format_message().strip()
        if message:  # (empty when a bare `nsync` printed its help)
            commands = {info.name for info in app.registered_commands}
            command = f"nsync {argv[0]}" if argv and argv[0] in commands else "nsync"
            sys.stderr.write(f"nsync: error: {message} (see '{command} --help')\n")
        return int(getattr(error, "exit_code", 2))
    if code == Interrupted.exit_code:  # typer >= 0.29 turns a Ctrl-C outside a command into a silent 130
        raise Interrupted
    return code if isinstance(code, int) else 0
