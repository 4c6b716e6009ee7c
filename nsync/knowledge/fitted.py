"""Every number nsync fitted to measurements, in one place, each with what it was fitted on and the script or data
that gives it again. A constant is changed here only with a new fit; ``tests/test_fitted.py`` holds each one
whose data is kept to what that data gives, so that a change of the code that moves a fit fails until it is refit.

The ground truth is split (tests/ground_truth.py): the *tuning* part fitted what is below, the *held-out* part
scores it (docs/accuracy.md). ``SOURCES`` names, for each constant, the file that fits or measured it."""

from __future__ import annotations

# The likely range: the 10th and 90th percentiles of ln(measured / predicted) over the tuning part's fixes that paid
# beyond noise, by what the capture rests on (scripts/fit_ranges.py; refit by tests/test_intervals.py)
LOG_RATIO_QUANTILES = {"calibrated": (-0.461, 0.367), "uncalibrated": (-0.496, 0.336)}

# The verdict's cut-offs on the chance that a fix saves the threshold: the fewest wrong verdicts on the tuning part,
# the more cautious pair on a tie (scripts/fit_ranges.py; refit by tests/test_intervals.py)
WORTH_FIXING_CHANCE = 0.5
NOTHING_CHANCE = 0.2

# Separate unprofiled runs of one program: the standard deviation of their median steps' logarithms, a median
# 11.7 % (fixtures/h200/measure: the 14 six-run sides of its measures; their JSON gives 0.116 with the population's
# deviation and 0.127 with the sample's, and tests/test_fitted.py holds the constant between the two)
RUN_STEP_SPREAD = 0.117
# The ends of a calibrated saving's range: another run's step this factor shorter and longer
# (fixtures/h200/README.md, "How sure is a saving?": the calibrated lab scenarios' steps run to run)
CALIBRATION_SPREAD = 1.25
# Calibrated: another run's host this much faster or slower, nsync diff's noise (fixtures/h200/measure/README.md)
HOST_SPEED_SPREAD = 0.15

# Without a calibration, host time is scaled by this to undo nsys's slow-down, and the other scales replayed span
# this range (fixtures/h200/README.md, "Undoing the profiler": an H200 lab scenario; real programs 0.4-0.85)
UNCALIBRATED_HOST_SCALE = 0.6
UNCALIBRATED_HOST_SCALE_RANGE = (0.4, 0.85)

# What nsys adds to each op queued behind another on the H200's GPU: 1.70-1.72 µs a queued one-element kernel
# unprofiled, 1.87-2.08 under nsync profile's flags; the median over three kernels and two runs
# (fixtures/h200/profiler-cost/README.md, "The GPU between queued kernels"; scripts/h200/dispatch-gap.py)
PROFILER_GAP_NS = 190

# How far a loop's point lies from its reads released (0) to the whole loop gone (1), with the point a mean over the
# host scales: chosen on the measured fixes of the sessions before fixtures/fresh8 (16 of them do a loop at once),
# scored on fresh8 and fresh9 (0.5 before; fixtures/h200/README.md, "A loop done at once")
LOOP_GONE_SHARE = 0.6

# A finer loop inside the period that repeats best is the step where the sequence repeats by it this well: a
# generate() capture's tokens repeat 0.989 (its prefills break them), a step's layers where an odd kernel (the
# embedding) breaks them each step 0.96 (tests/test_phases.py, both traces)
NESTED_REPEAT = 0.98

SOURCES = {
    "LOG_RATIO_QUANTILES": "scripts/fit_ranges.py",
    "WORTH_FIXING_CHANCE": "scripts/fit_ranges.py",
    "NOTHING_CHANCE": "scripts/fit_ranges.py",
    "RUN_STEP_SPREAD": "fixtures/h200/measure/README.md",
    "CALIBRATION_SPREAD": "fixtures/h200/README.md",
    "HOST_SPEED_SPREAD": "fixtures/h200/measure/README.md",
    "UNCALIBRATED_HOST_SCALE": "fixtures/h200/README.md",
    "UNCALIBRATED_HOST_SCALE_RANGE": "fixtures/h200/README.md",
    "PROFILER_GAP_NS": "fixtures/h200/profiler-cost/README.md",
    "LOOP_GONE_SHARE": "fixtures/h200/README.md",
    "NESTED_REPEAT": "tests/test_phases.py",
}
