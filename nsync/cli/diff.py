"""``nsync diff``: two runs of one program compared, a CI gate on a regression."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

import nsync
from nsync.cli.app import Command, app, examples, reported
from nsync.cli.options import (
    AnnotationsOption,
    CalibrationOption,
    HtmlOption,
    JsonOption,
    MarkdownOption,
    PassInconclusiveOption,
    QuietOption,
    SarifOption,
    SavedOption,
    StepRangeOption,
    TopOption,
)
from nsync.cli.output import Gate, Outputs, View, calibration_for, finish, loaded, refuse_with_from, required, spinning


@app.command(
    "diff",
    cls=Command,
    short_help="Compare two runs; gate CI on a regression.",
    epilog=examples(
        "nsync diff main.sqlite pr.sqlite",
        "nsync diff main.sqlite pr.sqlite --html diff.html --markdown diff.md",
        "nsync diff main.sqlite pr.sqlite --fail-on-regression 5   # CI gate",
        "nsync diff --from diff.json --markdown diff.md   # a saved diff again",
    ),
)
@reported
def diff_command(
    baseline: Annotated[Path | None, typer.Argument(show_default=False, metavar="BASELINE")] = None,
    candidate: Annotated[Path | None, typer.Argument(show_default=False, metavar="CANDIDATE")] = None,
    saved: SavedOption = None,
    json_path: JsonOption = None,
    html_path: HtmlOption = None,
    markdown_path: MarkdownOption = None,
    sarif_path: SarifOption = None,
    annotations: AnnotationsOption = False,
    fail_on_regression: Annotated[
        float | None,
        typer.Option(
            help="Exit 3 when the verdict is a regression and the step time grew by more than PCT %; exit 1 "
            "when the runs cannot be compared, or the profiler may hide a regression (verdict unclear).",
            metavar="PCT",
            min=0,
        ),
    ] = None,
    pass_inconclusive: PassInconclusiveOption = False,
    top: TopOption = 10,
    step_range: StepRangeOption = None,
    calibrate: CalibrationOption = True,
    quiet: QuietOption = False,
) -> None:
    """Compare two runs: step time against its noise, and the call sites whose syncs grew or shrank. When
    both were calibrated (nsync profile), the verdict is on their predicted unprofiled step times.

    BASELINE is the healthy or reference run, CANDIDATE the run to judge (each an nsys SQLite export or
    .nsys-rep, or a torch.profiler trace)."""
    outputs = Outputs(json=json_path, html=html_path, markdown=markdown_path, sarif=sarif_path, annotations=annotations)
    if saved is not None:
        refuse_with_from(BASELINE=baseline, CANDIDATE=candidate, **{"--step-range": step_range})
        result = loaded(saved, nsync.Diff, outputs)
    else:
        runs = [required(path, name, "the two runs to compare") for path, name in zip((baseline, candidate), SIDES)]
        for path in runs:
            outputs.check(path)
        result = _compared(runs, nsync.AnalysisConfig(step_range=step_range), calibrate, quiet)
    gate = Gate("--fail-on-regression", fail_on_regression, nsync.gates.fail_on_regression, pass_inconclusive)
    finish(result, outputs, View(top, quiet), gate)


SIDES = ("BASELINE", "CANDIDATE")


def _compared(runs: list[Path], config: nsync.AnalysisConfig, calibrate: bool, quiet: bool) -> nsync.Diff:
    """The two runs analysed, each with the calibration beside it (said), then compared."""
    with spinning("loading baseline") as progress:
        base, cand = (
            nsync.analyze(path, config, progress(f"{side.lower()}: "), calibration_for(path, calibrate, quiet=quiet))
            for path, side in zip(runs, SIDES)
        )
        return nsync.diff(base, cand)
