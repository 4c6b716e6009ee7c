"""``nsync measure`` as the command line has it: one or two quoted command lines and the run settings, checked
once here, then timed by measure (two programs) or measure_switched (one that asks ``nsync.fixed()``)."""

from __future__ import annotations

from dataclasses import dataclass

from nsync.capturing.run import command_of_line
from nsync.capturing.window import window_of
from nsync.errors import UsageError
from nsync.measuring.runs import BLOCK_STEPS, RUNS, SWITCHED_STEPS, Say, measure, measure_switched
from nsync.report.measurement import Measurement
from nsync.settings import setting


@dataclass(frozen=True)
class MeasureOptions:
    """What ``nsync measure`` takes besides the commands, by its flags' names; None: the command's default.

    ``runs`` of each command (5); ``steps`` optimizer steps timed a run (40; one command: 200) after
    ``warmup_steps`` (10); one command: its versions alternate in blocks of ``block_steps`` (10). A program
    without optimizer steps has its NVTX ranges timed for ``duration`` seconds (20) once it has used CUDA
    ``wait_for_steps`` seconds (60). ``cpus``: pin every run to these CPUs; ``python``: the interpreter."""

    runs: int | None = None
    steps: int | None = None
    block_steps: int | None = None
    warmup_steps: int | None = None
    wait_for_steps: float | None = None
    duration: float | None = None
    cpus: frozenset[int] | None = None
    python: str | None = None


def measure_lines(
    baseline: str, candidate: str | None = None, options: MeasureOptions | None = None, say: Say | None = None
) -> Measurement:
    """Time ``baseline`` and ``candidate`` (each one command line: ``SCRIPT ARGS``, ``-m MODULE ARGS`` or any
    command, split as a shell would split it; no shell runs it) alternately without the profiler; or, with no
    ``candidate``, the two versions of ``baseline``'s program, which asks ``nsync.fixed()``, in alternating blocks
    of steps. Raises UsageError for settings that do not fit (a block size for two commands, one run of two)."""
    options = options or MeasureOptions()
    if candidate is not None and options.block_steps is not None:
        raise UsageError(
            f"{setting('MeasureOptions.block_steps')} is for one command, whose program asks nsync.fixed(); two "
            "were given"
        )
    if candidate is not None and options.runs == 1:
        raise UsageError(
            f"{setting('MeasureOptions.runs')} 1 cannot tell two commands' noise: give 2 or more (or one command)"
        )
    commands = [
        command_of_line(label, text, options.python)
        for label, text in (("A", baseline), ("B", candidate))
        if text is not None
    ]
    steps = SWITCHED_STEPS if candidate is None and options.steps is None else options.steps
    window = window_of(steps, options.warmup_steps, False, options.wait_for_steps, options.duration)
    if candidate is None:
        return measure_switched(
            commands[0], options.runs or RUNS, options.block_steps or BLOCK_STEPS, window, say, options.cpus
        )
    return measure(commands[0], commands[1], options.runs or RUNS, window, say, options.cpus)
