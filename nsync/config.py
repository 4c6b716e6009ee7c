"""Analysis settings and their defaults (docs/how-it-works.md says why)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AnalysisConfig:
    """Knobs of the model. Defaults suit eager PyTorch training and inference loops.

    - ``step_range``: NVTX range name that marks one step (``None``: pick automatically).
    - ``step_kernel``: a kernel launched once per step: steps run from one launch to the next.
    - ``warmup_steps``: leading steps left out of per-step figures (``None``: 1 when there are at
      least 4 steps, else 0).
    - ``lead_fraction`` / ``lead_floor_ns``: a thread has rebuilt its lead once the lead is back above
      ``max(lead_floor_ns, lead_fraction * the thread's median lead)``.
    - ``host_scale``: what-if predictions scale the host's time by this to undo the profiler's slow-down
      when the run has no calibration (nsync profile fits it per run). 0.6 was fitted on w_print on an H200
      (torch 2.11, nsys 2025.3 with Python backtraces); fixtures/h200/README.md, "Undoing the profiler",
      gives its error on the other lab scenarios.
    - ``worth_fixing_share``: a sync is worth fixing when fixing it is predicted to save at least this share
      of the (unprofiled) step; below it the verdict says nothing is worth fixing for speed.
    - ``saving_ratio``: a predicted saving's likely range, as (low, high) multiples of it: the measured saving
      over the predicted one spanned 0.53-1.67 (a 90 % log-normal range) over the six lab scenarios with an
      effect beyond noise of fixtures/h200/cal, calibrated and not (tuned on those; fixtures/h200/README.md,
      "How sure is a saving?", scores it on the sets it was not tuned on). The verdict is "worth fixing" when
      the low end passes ``worth_fixing_share``, "nothing worth fixing" when the high end does not, and
      "measure" between.
    - ``window_s``: analyse only what starts in [start, end) seconds from the capture's start (end
      None: to the end).
    - ``max_memory_bytes``: the memory a load may plan for (default: what is available); a trace that
      needs more is analysed for the first part of its time that fits, with a warning.
    """

    step_range: str | None = None
    step_kernel: str | None = None
    warmup_steps: int | None = None
    lead_fraction: float = 0.5
    lead_floor_ns: int = 30_000
    host_scale: float = 0.6
    worth_fixing_share: float = 0.05
    saving_ratio: tuple[float, float] = (0.5, 1.7)
    window_s: tuple[float, float | None] | None = None
    max_memory_bytes: int | None = None
