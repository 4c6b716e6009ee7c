"""``nsync measure``: two versions of a program timed without the profiler (runs), the change between them with
its interval (change), and the command line's way in (options)."""

from nsync.measuring.options import MeasureOptions, measure_lines
from nsync.measuring.runs import BLOCK_STEPS, RUNS, SWITCHED_STEPS, measure, measure_switched, run_order, split_blocks

__all__ = [
    "BLOCK_STEPS",
    "RUNS",
    "SWITCHED_STEPS",
    "MeasureOptions",
    "measure",
    "measure_lines",
    "measure_switched",
    "run_order",
    "split_blocks",
]
