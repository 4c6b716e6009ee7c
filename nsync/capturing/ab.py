"""Which version of a program runs: as it is, or fixed. ``nsync measure`` given one command runs it once and
switches between the two in alternating blocks of optimizer steps; the program asks :func:`fixed` where they
differ, so that both versions run on the same process, the same data and the same warm host, and a change of a
few percent is told in one run (separate runs of one program differ by 6-22 % on the H200).

    >>> if nsync.fixed():
    ...     acc_sum += (pred == y).sum()              # stays on the GPU
    ... else:
    ...     acc_sum += (pred == y).sum().item()       # the line nsync found

A loop without an optimizer marks its steps with :func:`step`. This module imports nothing of nsync but its marks, nor
torch: a training script pays a dictionary look-up per call.
"""

from __future__ import annotations

import os
import sys

from nsync.marks import FIXED_ENV

ENV = FIXED_ENV  # outside nsync measure: 1 runs the fixed version throughout (default: as it is)
SWITCH = "_nsync_switch"  # where nsync's sitecustomize (nsync/capturing/inject) puts itself under nsync's commands


def fixed() -> bool:
    """Whether the step in progress runs the fixed version: under ``nsync measure SCRIPT`` as the measure
    alternates them; elsewhere ``NSYNC_FIXED=1`` (fixed throughout) or not (as it is). Ask it every step,
    where the two versions differ (not once before the loop)."""
    switch = sys.modules.get(SWITCH)
    answer = switch.fixed() if switch is not None else None
    if answer is not None:
        return bool(answer)
    return os.environ.get(ENV, "0").strip() not in ("", "0")


def step() -> None:
    """Mark the end of a step in a loop without an optimizer (inference, serving: ``for batch in loader: ...;
    nsync.step()``), once a step. Under nsync's commands it counts as an optimizer step does: ``nsync profile``
    finds the steps by it and captures a window of them, the calibration times them, and ``nsync measure
    SCRIPT`` switches versions by them. Elsewhere it does nothing. A loop with an optimizer needs none (its
    optimizer's steps are counted): calling both counts each step twice."""
    inject = sys.modules.get(SWITCH)
    if inject is not None:
        inject.step()
