"""``nsync profile``: a program captured under nsys (or torch.profiler), with a calibration run first, then analysed."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer

import nsync
from nsync.cli.app import Command, app, examples, reported, say
from nsync.cli.options import (
    BackendOption,
    BaseNameOption,
    CalibrateOption,
    CalibrationRunsOption,
    CaptureRangeOption,
    CpuSamplingOption,
    CpusOption,
    DbOption,
    DurationOption,
    HtmlPathOption,
    JsonOption,
    MarkdownOption,
    ModuleOption,
    NsysArgOption,
    NsysPathOption,
    NvtxRangeOption,
    OutDirOption,
    PythonOption,
    QuietOption,
    RunToEndOption,
    SourceDirOption,
    StepMarksOption,
    StepRangeOption,
    StepsOption,
    SuggestPatchOption,
    SuggestSwitchOption,
    TargetOption,
    TopOption,
    VerboseOption,
    WaitForStepsOption,
    WarmupStepsOption,
    WholeRunOption,
    given,
    parse_cpus,
)
from nsync.cli.output import Outputs, View, emit, release
from nsync.errors import Interrupted
from nsync.load.files import trace_stem


@app.command(
    "profile",
    cls=Command,
    context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True},
    short_help="Capture a program under nsys (or torch.profiler), then analyse it.",
    epilog=examples(
        "nsync profile train.py --epochs 1",
        "nsync profile -m mypkg.train --lr 3e-4",
        "nsync profile --steps 100 --warmup-steps 50 train.py",
        "nsync profile --whole-run train.py",
        "nsync profile --backend torch train.py   # torch.profiler: no nsys needed",
        "nsync profile -o runs --name base -- torchrun --nproc-per-node 1 train.py",
    ),
)
@reported
def profile_command(
    target: TargetOption = None,
    module: ModuleOption = None,
    out_dir: OutDirOption = Path("nsync-out"),
    base_name: BaseNameOption = None,
    json_path: JsonOption = None,
    top: TopOption = 10,
    html_path: HtmlPathOption = None,
    markdown_path: MarkdownOption = None,
    source_dir: SourceDirOption = None,
    suggest_patch: SuggestPatchOption = None,
    suggest_switch: SuggestSwitchOption = None,
    db_path: DbOption = None,
    step_range: StepRangeOption = None,
    steps: StepsOption = None,
    warmup_steps: WarmupStepsOption = None,
    whole_run: WholeRunOption = False,
    run_to_end: RunToEndOption = False,
    wait_for_steps: WaitForStepsOption = None,
    duration: DurationOption = None,
    backend: BackendOption = "nsys",
    capture_range: CaptureRangeOption = None,
    nvtx_range: NvtxRangeOption = None,
    python_sampling: Annotated[bool, typer.Option(help="Also sample Python stacks (nsys >= 2023.4).")] = False,
    cpu_sampling: CpuSamplingOption = None,
    step_marks: StepMarksOption = True,
    calibrate: CalibrateOption = True,
    calibration_runs: CalibrationRunsOption = 1,
    cpus: CpusOption = None,
    nsys_arg: NsysArgOption = None,
    keep_report: Annotated[bool, typer.Option(help="Keep the .nsys-rep next to the SQLite.")] = True,
    nsys_path: NsysPathOption = None,
    python: PythonOption = None,
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Run a program under nsys with Python backtraces, export the trace, and rank its sync call sites.

    PROGRAM is SCRIPT [ARGS]... (a .py file), -m MODULE [ARGS]..., or -- COMMAND [ARGS]... By default the
    program runs 10 optimizer steps, nsys captures the next 40, and the program is then ended: once without
    the profiler first (the calibration run), then under nsys (--backend torch: torch.profiler)."""
    parameters = dict(locals())
    config = nsync.AnalysisConfig(step_range=step_range)
    # stdout is the JSON's where it is asked there: the program's own output then goes to stderr
    where = {"program_output": "stderr" if json_path == "-" else "stdout", "label_runs": not quiet}
    options = nsync.ProfileOptions(**given(parameters, nsync.ProfileOptions, cpus=parse_cpus(cpus), config=config,
                                           nsys_arg=tuple(nsys_arg or ()), **where))  # fmt: skip
    outputs = Outputs(json_path, html_path, markdown_path, db_path, suggest_patch, suggest_switch)
    tell = (lambda _message: None) if quiet else say  # -q: errors alone on stderr
    result = nsync.profile(target or [], options, say=tell, progress=release, before=outputs.check)
    tell(f"wrote {result.trace}" + (f" and {result.report}" if result.report else ""))
    html = html_path or out_dir / f"{trace_stem(result.trace)}.html"
    view = View(top, quiet, verbose, tuple(source_dir or ()))
    complete = emit(result.analysis, dataclasses.replace(outputs, html=html), view)
    if result.analysis.verdict is not None and result.analysis.verdict.measure and not quiet:
        say(nsync.to_settle(result, target or [], options, suggest_switch, source_dir or ()))
    _exit(result, complete, quiet)


def _exit(result: nsync.ProfileResult, complete: bool, quiet: bool) -> None:
    """Ctrl-C, then the program's own exit code, then 1 where a file could not be written."""
    if result.interrupted:
        raise Interrupted
    if result.exit_code:
        if not quiet:
            say(f"the program exited with code {result.exit_code}")
        raise typer.Exit(result.exit_code)
    if not complete:
        raise typer.Exit(1)
