"""Run a fixtures/fresh program (NAME.py MODE STEPS) with its StepTimer asking ``nsync.fixed()`` which version
a step runs, for ``nsync measure`` with one command (scripts/h200/switched.sh). MODE ``switch``: the fix where
nsync.fixed() is true; ``same``: it asks, and runs the program as it is throughout (the same code twice)."""

import runpy
import sys
from pathlib import Path

import nsync

FRESH = Path(__file__).resolve().parents[2] / "fixtures" / "fresh"
program, mode, steps = sys.argv[1:4]
sys.path.insert(0, str(FRESH))
import steptimer  # noqa: E402 (from the fresh programs' folder)


def degraded(self: steptimer.StepTimer) -> bool:
    fixed = nsync.fixed()
    return True if mode == "same" else not fixed


steptimer.StepTimer.degraded = degraded  # type: ignore[method-assign]
sys.argv = [program, "degraded", steps]
runpy.run_path(str(FRESH / program), run_name="__main__")
