"""``nsync measure``: is a fix worth it? Two commands (the program as it is, and fixed) run alternately without
the profiler, each run's steps timed as the calibration run times them (CUDA events at each optimizer step or
NVTX range, over a window of steps), and the change from the first to the second told from the runs' noise
(nsync.measuring.change). The answer ``nsync analyze`` points to when a predicted saving straddles the
worth-fixing threshold: a profiled capture cannot tell a 5 % change on a host whose runs differ by more.

With one command (:func:`measure_switched`), the program holds both versions and asks ``nsync.fixed()``
(nsync/capturing/ab.py) which one a step runs; one process then runs them in alternating blocks of optimizer steps."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nsync.capturing.calibrate import CalibrationRun, pinned, timed_run
from nsync.capturing.window import CaptureWindow
from nsync.errors import CannotJudge, UsageError
from nsync.load.calibration import Calibration
from nsync.measuring.change import change_between, measured_command, switched_change
from nsync.report.measurement import SCHEMA, THRESHOLD_PCT, Measurement
from nsync.words import counted

Say = Callable[[str], None]
LABELS = ("A", "B")
RUNS = 5  # runs of each command (one command: of it), by default
BLOCK_STEPS = 10  # one command: optimizer steps in a block of one version, by default
SWITCHED_STEPS = 200  # one command's default timed steps: ten pairs of blocks of 10
STDERR = 2  # the programs' output goes to stderr: stdout carries the result (--json -) alone


def run_order(runs: int) -> list[str]:
    """A B, B A, A B...: each command runs first as often as second, so that a host that warms up or slows
    down over the runs moves both alike."""
    order: list[str] = []
    for k in range(runs):
        order += list(LABELS) if k % 2 == 0 else list(reversed(LABELS))
    return order


@dataclass
class _Runs:
    """The runs made so far: what they noted, whether a Ctrl-C ended them, and how long the rest should take."""

    total: int
    began: float = field(default_factory=time.monotonic)
    notes: list[str] = field(default_factory=list)
    interrupted: bool = False

    def made(
        self, command: Sequence[str], window: CaptureWindow, k: int, label: str, enough: bool, **how: Any
    ) -> CalibrationRun | None:
        """Run ``k`` of ``command`` (None: a Ctrl-C ended the runs, once ``enough`` were made; before, it is
        raised)."""
        try:
            run = timed_run(command, window, stdout=STDERR, **how)  # nsync's stdout is the result's
        except OSError as err:
            who = f"{label}could not start: {command[0]}" if label else f"{command[0]} could not start"
            raise UsageError(f"{who}: {err.strerror}") from None
        except KeyboardInterrupt:  # Ctrl-C: what the runs before this one tell, if they can tell anything
            if not enough:
                raise
            self.notes.append(f"interrupted in run {k} of {self.total}: the figures are of the {k - 1} runs before it")
            self.interrupted = True
            return None
        if run.failed:
            self.notes.append(f"run {k} {f'({label.strip()}) ' if label else ''}exited with code {run.exit_code}")
        return run

    def left(self, k: int) -> str:
        return _time_left(time.monotonic() - self.began, k, self.total)


def measure(
    baseline: Sequence[str],
    candidate: Sequence[str],
    runs: int = RUNS,
    window: CaptureWindow | None = None,
    say: Say | None = None,
    cpus: frozenset[int] | None = None,
    threshold_pct: float = THRESHOLD_PCT,
) -> Measurement:
    """Run ``baseline`` and ``candidate`` ``runs`` times each, alternately, without the profiler, and compare
    their steps. ``window``: the steps each run times (default: 40 after 10 of warm-up; the program is then
    ended); ``cpus``: the CPUs every run is pinned to. Raises UsageError when a command cannot start,
    CannotJudge when a command timed its steps in fewer than two runs. A Ctrl-C once each command has two runs
    ends the runs there: the result says so (``interrupted``); before that, it is raised.

        >>> m = nsync.measure(["python3", "train.py"], ["python3", "train_fixed.py"], runs=5, say=print)
        >>> m.verdict, m.change.pct, (m.change.low_pct, m.change.high_pct)
    """
    if runs < 2:
        raise UsageError("nsync measure needs at least 2 runs of each command to know their noise")
    tell = say or (lambda _m: None)
    window = window or CaptureWindow()
    commands = dict(zip(LABELS, (list(baseline), list(candidate))))
    timed: dict[str, list[Calibration]] = {label: [] for label in LABELS}
    order = run_order(runs)
    made = _Runs(len(order))
    with pinned(cpus):
        for k, label in enumerate(order, 1):
            enough = all(len(timed[other]) >= 2 for other in LABELS)
            run = made.made(commands[label], window, k, f"{label} ", enough)
            if run is None:
                break
            if run.calibration is None:
                if order.index(label) == k - 1:  # its first run: the others would fare alike
                    raise CannotJudge("nsync measure cannot compare the commands", _timed_nothing(label, run.exit_code))
                tell(f"run {k} of {len(order)}: {label} timed no steps{made.left(k)}")
                continue
            timings = run.calibration.of_window()
            timed[label].append(timings)
            tell(f"run {k} of {len(order)}: {label} {_median_text(timings)} in {run.wall_s:.0f} s{made.left(k)}")
    source = _step_source(timed, runs)
    steps = {label: [run.intervals_ns[source] / 1e6 for run in timed[label]] for label in LABELS}
    measured = [measured_command(label, commands[label], steps[label]) for label in LABELS]
    change, verdict = change_between(measured[0].run_median_step_ms, measured[1].run_median_step_ms, threshold_pct)
    return Measurement(
        SCHEMA, verdict, source, order, measured[0], measured[1], change, threshold_pct,
        notes=made.notes or None, interrupted=made.interrupted,
    )  # fmt: skip


def measure_switched(
    command: Sequence[str],
    runs: int = RUNS,
    block_steps: int = BLOCK_STEPS,
    window: CaptureWindow | None = None,
    say: Say | None = None,
    cpus: frozenset[int] | None = None,
    threshold_pct: float = THRESHOLD_PCT,
) -> Measurement:
    """Run ``command`` (a program that asks ``nsync.fixed()``) ``runs`` times without the profiler, its two
    versions alternating in blocks of ``block_steps`` optimizer steps (A B B A...) over ``window``'s steps
    (default: 200 after 10 of warm-up, during which they alternate step by step), each run's change told from
    its pairs of blocks and the change from the runs' (nsync.measuring.change.switched_change). Raises
    UsageError when it cannot start, CannotJudge when its first run timed no optimizer steps, never asked
    ``nsync.fixed()`` or timed fewer than two pairs of blocks (later runs that do are left out, and said). A
    Ctrl-C after the first run ends the runs there (``interrupted``).

        >>> m = nsync.measure_switched(["python3", "train.py"], say=print)   # train.py asks nsync.fixed()
        >>> m.verdict, m.change.pct, (m.change.low_pct, m.change.high_pct)
    """
    if runs < 1 or block_steps < 2:
        raise UsageError("nsync measure needs a run, and blocks of at least 2 steps (a block's first is left out)")
    tell = say or (lambda _m: None)
    window = window or CaptureWindow(steps=SWITCHED_STEPS)
    timed: list[tuple[list[np.ndarray], list[np.ndarray]]] = []  # per run: A's blocks, B's blocks
    made = _Runs(runs)
    with pinned(cpus):
        for k in range(1, runs + 1):
            run = made.made(command, window, k, "", bool(timed), switch_block=block_steps)
            if run is None:
                break
            blocks = _blocks_of(run, k, runs, window, block_steps, tell, made.left(k))
            if blocks is not None:
                timed.append(blocks)
    if len(timed) == 1:
        made.notes.append(
            "one run: its interval is this process's alone; another's change can differ by more (on the H200 "
            "one run's missed the mean of four others 9 times in 25): --runs 5"
        )
    return _switched(command, timed, block_steps, threshold_pct, made)


def _blocks_of(
    run: CalibrationRun, k: int, runs: int, window: CaptureWindow, block_steps: int, tell: Say, left: str
) -> tuple[list[np.ndarray], list[np.ndarray]] | None:
    """Run ``k``'s blocks of each version (None: it timed none, or too few; CannotJudge where it is the first)."""
    steps = run.calibration.of_window().intervals_ns.get("marks") if run.calibration else None
    asked_late = run.fixed_last_asked is not None and run.fixed_last_asked >= window.warmup_steps
    if not asked_late or steps is None:
        if k == 1:
            reason = _not_switched(run, steps is None, window.warmup_steps)
            raise CannotJudge("nsync measure cannot compare the versions", reason)
        tell(f"run {k} of {runs}: no blocks timed")
        return None
    a_blocks, b_blocks = split_blocks(steps / 1e6, block_steps)
    if len(a_blocks) < 2:
        too_few = f"{_pairs(len(a_blocks), block_steps)}; it takes two or more"
        if k == 1:
            raise CannotJudge(
                "nsync measure cannot compare the versions",
                f"its first run timed {too_few} (did the program end early? --steps, --block-steps)",
            )
        tell(f"run {k} of {runs}: {too_few}{left}")
        return None
    ratio = np.exp(np.mean(np.log([np.median(b) for b in b_blocks]) - np.log([np.median(a) for a in a_blocks])))
    pairs = _pairs(len(a_blocks), block_steps)
    tell(f"run {k} of {runs}: {pairs}, B {100 * (ratio - 1):+.1f} % in {run.wall_s:.0f} s{left}")
    return a_blocks, b_blocks


def _switched(
    command: Sequence[str],
    timed: list[tuple[list[np.ndarray], list[np.ndarray]]],
    block_steps: int,
    threshold_pct: float,
    made: _Runs,
) -> Measurement:
    """The measurement of one command's versions from each run's blocks."""
    medians = [
        ([float(np.median(a)) for a in a_blocks], [float(np.median(b)) for b in b_blocks])
        for a_blocks, b_blocks in timed
    ]
    measured = [
        measured_command(
            label,
            list(command),
            [np.concatenate(run[side]) for run in timed],
            [block for run in timed for block in run[side]],
        )
        for side, label in enumerate(LABELS)
    ]
    change, verdict = switched_change(medians, block_steps, threshold_pct)
    return Measurement(
        SCHEMA, verdict, "marks", [], measured[0], measured[1], change, threshold_pct,  # ([]: each run ran both)
        notes=made.notes or None, interrupted=made.interrupted, block_steps=block_steps,
    )  # fmt: skip


def split_blocks(steps_ms: np.ndarray, block_steps: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The window's steps as the sitecustomize's switch ran them (nsync/capturing/inject, ``_Switch``): block j of
    ``block_steps`` is B (fixed) where j % 4 is 1 or 2, A otherwise, so that blocks 2p and 2p + 1 are one pair.
    Complete pairs only, each block without its first step (which the version before it may spill into):
    (A's blocks, B's blocks), pair by pair."""
    pairs = len(steps_ms) // (2 * block_steps)
    blocks = [steps_ms[j * block_steps + 1 : (j + 1) * block_steps] for j in range(2 * pairs)]
    fixed = [j % 4 in (1, 2) for j in range(2 * pairs)]
    return [b for b, f in zip(blocks, fixed) if not f], [b for b, f in zip(blocks, fixed) if f]


def _pairs(count: int, block_steps: int) -> str:
    return f"{count} pair{'s' if count != 1 else ''} of blocks of {block_steps} optimizer steps"


def _not_switched(run: CalibrationRun, timed_nothing: bool, warmup_steps: int) -> str:
    ended = f" (it exited with code {run.exit_code})" if run.failed else ""
    if timed_nothing:
        return (
            f"its first run timed no optimizer steps{ended}: with one command, nsync measure alternates the "
            "program's two versions in blocks of optimizer steps (a loop without an optimizer: call "
            "nsync.step() at the end of each of its steps)"
        )
    if run.fixed_last_asked is None:
        asked = "never asked nsync.fixed()"
    elif run.fixed_last_asked == 0:
        asked = "asked nsync.fixed() only before its first optimizer step"
    else:
        asked = (
            f"asked nsync.fixed() last after optimizer step {run.fixed_last_asked}, before the timed steps "
            f"(the first {warmup_steps} warm up)"
        )
    return (
        f"its first run {asked}{ended}: with one command, the program holds both versions and asks "
        "`if nsync.fixed():` at each step where they differ (or give two commands: A B)"
    )


def _time_left(elapsed_s: float, done: int, runs: int) -> str:
    if done == runs:
        return ""
    left_s = elapsed_s / done * (runs - done)
    return f"; about {left_s / 60:.0f} min left" if left_s >= 90 else f"; about {left_s:.0f} s left"


def _timed_nothing(label: str, exit_code: int) -> str:
    ended = f" (it exited with code {exit_code})" if exit_code else ""
    return (
        f"{label}'s first run timed no steps{ended}: nsync measure times optimizer steps, or NVTX ranges on a "
        "CUDA stream"
    )


def _median_text(timings: Calibration) -> str:
    source = _preferred(list(timings.intervals_ns))
    steps = timings.intervals_ns[source]
    return f"{float(np.median(steps)) / 1e6:.3f} ms per step ({counted(len(steps), 'step')})"


def _preferred(sources: list[str]) -> str:
    """Optimizer steps where there are some, else the first NVTX range by name (a stable choice)."""
    return "marks" if "marks" in sources else sorted(sources)[0]


def _step_source(timed: dict[str, list[Calibration]], runs: int) -> str:
    """The steps both commands timed in every run of theirs: optimizer steps first, else an NVTX range."""
    for label in LABELS:
        if len(timed[label]) < 2:
            raise CannotJudge(
                "nsync measure cannot compare the commands",
                f"{label} timed its steps in {len(timed[label])} of its {runs} runs; it needs two or more",
            )
    common = set.intersection(*(set(run.intervals_ns) for label in LABELS for run in timed[label]))
    if not common:
        raise CannotJudge(
            "nsync measure cannot compare the commands",
            "they time different steps (one has optimizer steps, the other NVTX ranges only)",
        )
    return _preferred(sorted(common))
