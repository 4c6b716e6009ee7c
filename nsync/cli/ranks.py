"""``nsync ranks``: the ranks of a data-parallel run lined up on their collectives."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

import nsync
from nsync.cli.app import Command, app, examples, reported
from nsync.cli.options import (
    JsonOption,
    MarkdownOption,
    MaxMemoryOption,
    PassInconclusiveOption,
    QuietOption,
    RanksFailAboveOption,
    SavedOption,
    StepRangeOption,
    TopOption,
    parse_size,
)
from nsync.cli.output import Gate, Outputs, View, finish, loaded, refuse_with_from, required, spinning


@app.command(
    "ranks",
    cls=Command,
    short_help="Line up the ranks of a data-parallel run.",
    epilog=examples(
        "nsync ranks run/            # a folder of per-rank exports",
        "nsync ranks rank0.sqlite rank1.sqlite --json ranks.json",
        "nsync ranks run/ --scheduler tcp://10.0.0.5:8786",
        "nsync ranks --from ranks.json --markdown ranks.md",
        "nsync ranks run/ --fail-above 5  # CI: exit 3 past 5 % of a step",
    ),
)
@reported
def ranks_command(
    exports: Annotated[list[Path] | None, typer.Argument(show_default=False, metavar="EXPORT...")] = None,
    saved: SavedOption = None,
    json_path: JsonOption = None,
    markdown_path: MarkdownOption = None,
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
    fail_above: RanksFailAboveOption = None,
    pass_inconclusive: PassInconclusiveOption = False,
    quiet: QuietOption = False,
) -> None:
    """Line the ranks of a data-parallel run up on their collectives: the rank that reaches them last, and the
    sync that makes it late, by the delay it adds to every rank.

    EXPORT... are the ranks' SQLite exports (.sqlite or .sqlite.xz) or torch.profiler traces (.json,
    .json.gz), or folders of them: one export per rank
    (nsys profile -o run/rank%q{RANK})."""
    outputs = Outputs(json=json_path, markdown=markdown_path)
    if saved is not None:
        refuse_with_from(**{"EXPORT...": exports or None, "--step-range": step_range, "--max-memory": max_memory})
        result = loaded(saved, nsync.Ranks, outputs)
    else:
        exports = required(exports, "EXPORT...", "the ranks' exports, or folders of them")
        outputs.check()
        config = nsync.AnalysisConfig(step_range=step_range, max_memory_bytes=parse_size(max_memory))
        with spinning("starting Dask") as progress:
            result = nsync.analyze_ranks(exports, config, scheduler, workers, progress=progress())
    gate = Gate("--fail-above", fail_above, nsync.gates.fail_on_straggler, pass_inconclusive)
    finish(result, outputs, View(top, quiet), gate)
