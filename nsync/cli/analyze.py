"""``nsync analyze``: one trace's call sites ranked by what fixing their syncs saves."""

from __future__ import annotations

import nsync
from nsync.cli.app import Command, app, examples, reported
from nsync.cli.options import (
    AnalyzeCalibrationFileOption,
    AnalyzeFailAboveOption,
    AnalyzeTraceOption,
    AnnotationsOption,
    CalibrationOption,
    DbOption,
    HtmlOption,
    JsonOption,
    MarkdownOption,
    MaxMemoryOption,
    PassInconclusiveOption,
    QuietOption,
    SarifOption,
    SavedOption,
    SourceDirOption,
    StepKernelOption,
    StepRangeOption,
    SuggestPatchOption,
    SuggestSwitchOption,
    TopOption,
    VerboseOption,
    WarmupOption,
    WindowOption,
    parse_size,
    parse_window,
)
from nsync.cli.output import Gate, Outputs, View, calibration_for, finish, loaded, refuse_with_from, required, spinning


@app.command(
    "analyze",
    cls=Command,
    short_help="Rank sync call sites by what fixing them saves.",
    epilog=examples(
        "nsync analyze report.sqlite",
        "nsync analyze report.sqlite --json result.json --top 20",
        "nsync analyze run.pt.trace.json.gz   # a torch.profiler trace",
        "nsync analyze report.sqlite --step-range train_step --json -",
        "nsync analyze report.sqlite --fail-above 5   # CI: fail over 5 % of a step",
        "nsync analyze report.sqlite --suggest-patch fix.patch  # git apply fix.patch",
        "nsync analyze report.sqlite --suggest-switch both.patch  # for nsync measure",
        "nsync analyze --from result.json --html r.html  # render a saved result",
    ),
)
@reported
def analyze_command(
    trace: AnalyzeTraceOption = None,
    saved: SavedOption = None,
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
    sarif_path: SarifOption = None,
    annotations: AnnotationsOption = False,
    fail_above: AnalyzeFailAboveOption = None,
    pass_inconclusive: PassInconclusiveOption = False,
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
    calibrate: CalibrationOption = True,
    calibration_file: AnalyzeCalibrationFileOption = None,
) -> None:
    """Rank the Python call sites by what fixing their syncs would save per step.

    TRACE is the nsys SQLite export (.sqlite or .sqlite.xz, from 'nsys export --type sqlite
    --include-blobs=true'), an .nsys-rep when nsys is installed, or a torch.profiler trace (.json or
    .json.gz, from export_chrome_trace or tensorboard_trace_handler, captured with with_stack=True)."""
    outputs = Outputs(
        json_path, html_path, markdown_path, db_path, suggest_patch, suggest_switch, sarif_path, annotations
    )
    if saved is not None:  # render a saved result: no flag that needs a trace
        refuse_with_from(TRACE=trace, **{"--step-range": step_range, "--step-kernel": step_kernel,
                         "--warmup-steps": warmup_steps, "--window": window, "--max-memory": max_memory,
                         "--db": db_path, "--calibration": calibration_file,
                         "--no-calibrate": None if calibrate else True})  # fmt: skip
        result = loaded(saved, nsync.Analysis, outputs)
    else:
        trace = required(trace, "TRACE", "the trace to analyse (or --from RESULT.json, a saved result to render)")
        outputs.check(trace)
        config = nsync.AnalysisConfig(step_range, step_kernel, warmup_steps, window_s=parse_window(window),
                                      max_memory_bytes=parse_size(max_memory))  # fmt: skip
        calibration = calibration_for(trace, calibrate, calibration_file, quiet)
        with spinning("loading trace") as progress:
            result = nsync.analyze(trace, config, progress(), calibration, source_dir)
    view = View(top, quiet, verbose, tuple(source_dir or ()))
    finish(result, outputs, view, Gate("--fail-above", fail_above, nsync.gates.fail_above, pass_inconclusive))
