"""The host scale: how much faster than under the profiler the program's host runs, fitted to its unprofiled
steps where a calibration gives them, and the other scales a run may have had (each saving is replayed at all of
them: its point is their weighted mean, its range their span)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from nsync.knowledge import CALIBRATION_SPREAD, RUN_STEP_SPREAD

FIT_REPLAYS = 14  # replays of the host-scale fit: both ends of SCALE_RANGE, then 12 bisection steps
SCALE_RANGE = (0.05, 1.25)
FIT_TOLERANCE = 0.005  # a replayed step within 0.5 % of the target fits
# nsys slows the host's own work by 1.1 to 2.2 times: a fit beyond 1 / 1.1 says the calibration run was slow
PROFILED_HOST_SCALE_MAX = 1 / 1.1


class HostScaleFit(NamedTuple):
    """A host scale, how it was found, and whether a calibration bounds it (``held``): not where there is none,
    nor where its run was slower than the profiler can explain (or its GPU was): the what-if sets it aside."""

    scale: float
    note: str
    held: bool = True


# where the host waits for its DataLoader, a run slower than the capture explains waited longer for its data
WAITED_FOR_DATA = "that run waited longer for its DataLoader than this capture did, not on a slower host or GPU"


def fit_host_scale(
    predict: Callable[[float], float], target_ns: float, uncalibrated: float, waits_for_data: bool = False
) -> HostScaleFit:
    """The host scale whose replay (``predict``, non-decreasing in the scale) runs at ``target_ns``, the
    program's unprofiled step, and a note on how it was found (``waits_for_data``: the loop is bound by its
    DataLoader, which the replay does not model, and a run slower than it explains waited for its data).

    Where the replay cannot run that fast (the GPU bounds it), the calibration only says the host is at
    least as fast as the edge of that bound: the scale is the edge, or the uncalibrated one if lower."""
    low, high = SCALE_RANGE
    fastest, slowest = predict(low), predict(high)
    if slowest < target_ns:  # even a host slower than under nsys leaves the replay faster: the GPU was slower
        return HostScaleFit(
            uncalibrated,
            f"the unprofiled run ({target_ns / 1e6:.3f} ms a step) was slower than the capture replayed at any "
            f"host speed ({slowest / 1e6:.3f} ms): "
            + (WAITED_FOR_DATA if waits_for_data else "its GPU ran slower than this capture's"),
            held=False,
        )
    goal = max(target_ns, fastest) * (1 + FIT_TOLERANCE)
    for _ in range(FIT_REPLAYS - 2):  # the largest scale whose replay stays within the goal
        middle = (low + high) / 2
        low, high = (middle, high) if predict(middle) <= goal else (low, middle)
    if fastest <= target_ns * (1 + FIT_TOLERANCE):
        if low > PROFILED_HOST_SCALE_MAX:
            return HostScaleFit(
                PROFILED_HOST_SCALE_MAX,
                f"the unprofiled run ({target_ns / 1e6:.3f} ms a step) fits a host slower than the profiler ever "
                f"leaves one (host scale {low:.3g}): "
                + (WAITED_FOR_DATA if waits_for_data else "that run's host was slower than this capture's"),
                held=False,
            )
        return HostScaleFit(low, f"the replay matches its unprofiled step ({target_ns / 1e6:.3f} ms)")
    scale = min(low, uncalibrated)
    return HostScaleFit(
        scale,
        f"the GPU bounds the replay at {fastest / 1e6:.3f} ms a step, above the unprofiled "
        f"{target_ns / 1e6:.3f} ms: the host scale is at most {low:.3g}, {scale:.3g} used",
    )


# how much separate runs' steps differ, and the ends of a calibrated saving's range (nsync.knowledge.fitted)
RANGE_END_STEP = CALIBRATION_SPREAD
# the point saving's weight at the fitted host scale (the other scales share the rest): 0.725
FITTED_SCALE_WEIGHT = 1 - (RUN_STEP_SPREAD / np.log(RANGE_END_STEP)) ** 2


def scale_weights(count: int) -> np.ndarray:
    """The weights of a saving's replays at ``count`` host scales (the fitted first) in its point: the mean
    saving over the host speeds another run may have, not the saving at the fitted one alone. A saving is far
    from linear in the host's speed (it peaks where host and GPU balance and falls off on either side), and a
    measured saving is a mean over steps and runs whose host speed varies. With one scale each side: three-point
    Gauss-Hermite for a run's step spread log-normally by RUN_STEP_SPREAD, the nodes at the range's ends
    (each end's weight RUN_STEP_SPREAD² / (2 ln² RANGE_END_STEP)); uncalibrated, the ends of the range of scales
    fitted on real and lab programs take their place. fixtures/h200/README.md, "The point"."""
    if count == 1:
        return np.ones(1)
    return np.array([FITTED_SCALE_WEIGHT] + [(1 - FITTED_SCALE_WEIGHT) / (count - 1)] * (count - 1))


def other_scales(
    predict: Callable[[float], float],
    fit: HostScaleFit,
    target_ns: float | None,
    spread: float,
    scale_range: tuple[float, ...],
) -> tuple[float, ...]:
    """The other host scales the run may have had beside ``fit``'s: fitted to another run's unprofiled step,
    ``spread`` times faster or slower than the calibration run's (``target_ns``; a run slower than any host
    scale can replay: the slowest host the profiler leaves, 1 / 1.1), and, where no calibration holds, the
    ends of the range of scales fitted on real and lab programs."""
    fitted = () if target_ns is None else (
        fit_host_scale(predict, target_ns / spread, fit.scale).scale,
        fit_host_scale(predict, target_ns * spread, PROFILED_HOST_SCALE_MAX).scale,
    )  # fmt: skip
    unbounded = () if fit.held else scale_range
    return tuple(s for s in dict.fromkeys((*fitted, *unbounded)) if s != fit.scale)
