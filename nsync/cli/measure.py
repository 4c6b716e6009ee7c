"""``nsync measure``: two versions of a program timed without the profiler, the change told from their noise."""

from __future__ import annotations

from typing import Annotated

import typer

import nsync
from nsync.cli.app import Command, app, examples, reported, say
from nsync.cli.options import (
    JsonOption,
    MarkdownOption,
    MeasureBlockStepsOption,
    MeasureCpusOption,
    MeasureDurationOption,
    MeasureFailOnRegressionOption,
    MeasurePythonOption,
    MeasureRunsOption,
    MeasureStepsOption,
    MeasureWaitForStepsOption,
    MeasureWarmupStepsOption,
    PassInconclusiveOption,
    QuietOption,
    SavedOption,
    given,
    parse_cpus,
)
from nsync.cli.output import Gate, Outputs, View, finish, loaded, refuse_with_from, required


@app.command(
    "measure",
    cls=Command,
    short_help="Time two versions unprofiled: is the change beyond noise?",
    epilog=examples(
        "nsync measure train.py train_fixed.py",
        "nsync measure train.py   # train.py asks `if nsync.fixed():` at each step",
        "nsync measure --runs 8 'train.py --lr 3e-4' 'train.py --lr 3e-4 --fix'",
        "nsync measure --cpus 2-5 --json m.json '-m pkg.train' '-m pkg.train2'",
        "nsync measure a.py b.py --markdown comment.md   # for a PR comment",
        "nsync measure --wait-for-steps 5 --duration 10 serve.py serve2.py",
        "nsync measure main.py pr.py --fail-on-regression 5   # CI gate",
        "nsync measure --from m.json --markdown comment.md",
    ),
)
@reported
def measure_command(
    baseline: Annotated[str | None, typer.Argument(show_default=False, metavar="A")] = None,
    candidate: Annotated[str | None, typer.Argument(show_default=False, metavar="B")] = None,
    saved: SavedOption = None,
    runs: MeasureRunsOption = None,
    steps: MeasureStepsOption = None,
    block_steps: MeasureBlockStepsOption = None,
    warmup_steps: MeasureWarmupStepsOption = None,
    wait_for_steps: MeasureWaitForStepsOption = None,
    duration: MeasureDurationOption = None,
    cpus: MeasureCpusOption = None,
    json_path: JsonOption = None,
    markdown_path: MarkdownOption = None,
    fail_on_regression: MeasureFailOnRegressionOption = None,
    pass_inconclusive: PassInconclusiveOption = False,
    python: MeasurePythonOption = None,
    quiet: QuietOption = False,
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
    parameters = dict(locals())
    outputs = Outputs(json=json_path, markdown=markdown_path)
    if saved is not None:
        refuse_with_from(A=baseline, B=candidate)
        result = loaded(saved, nsync.Measurement, outputs)
    else:
        outputs.check()
        options = nsync.MeasureOptions(**given(parameters, nsync.MeasureOptions, cpus=parse_cpus(cpus)))
        tell = (lambda _message: None) if quiet else say  # -q: errors alone on stderr
        result = nsync.measure_lines(required(baseline, "A", "the command to time"), candidate, options, say=tell)
    gate = Gate("--fail-on-regression", fail_on_regression, nsync.gates.fail_on_slowdown, pass_inconclusive)
    finish(result, outputs, View(quiet=quiet), gate)
