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
    - ``saving_ratio``: a predicted saving's likely range runs from ``saving_ratio[0]`` times the least it is at
      the host scales the run may have had (``calibration_spread``, ``host_scale_range``) to ``saving_ratio[1]``
      times the largest: the replay's own error. Over the six lab scenarios with an effect beyond noise of
      fixtures/h200/cal, calibrated and not, the measured saving lay within 1.07-1.20 times that span (tuned
      on those, widened by a tenth and rounded out to a tenth; fixtures/h200/README.md, "How sure is a saving?", scores
      it on the sets it was not tuned on). The verdict is "worth fixing" when the low end passes ``worth_fixing_share``,
      "nothing worth fixing" when the high end does not, and "measure" between.
    - ``calibration_spread``: another run of a calibrated program may take up to this factor more or less time
      a step than its calibration run (on the H200, a calibration run's step over the same session's timing
      run was 0.81-1.19, and five separate runs of a program spread 0.86-1.16 times their median:
      fixtures/fresh/README.md); the saving is also replayed at the host scales fitted to those (a slower step
      than the replay reaches at any scale: the slowest host nsys leaves, 1 / 1.1).
    - ``host_scale_range``: uncalibrated, the saving is also replayed at these host scales: the range fitted
      on calibrated lab and real programs (fixtures/h200/README.md, 0.38-0.86); calibrated too where the
      calibration run was slower than the profiler can explain (its host scale capped), or its GPU was.
    - ``host_speed_spread``: another unprofiled run of the program on the same machine may have a host this
      much faster or slower (five separate runs of host-bound programs spread 0.86-1.16 times their median:
      fixtures/fresh/README.md); a calibrated what-if replays the program's step at both (``host_speed_steps_ns``),
      and ``nsync diff`` counts a change beyond what they span (fixtures/h200/README.md, "One machine").
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
    saving_ratio: tuple[float, float] = (0.9, 1.4)
    calibration_spread: float = 1.25
    host_scale_range: tuple[float, float] = (0.4, 0.85)
    host_speed_spread: float = 0.15
    window_s: tuple[float, float | None] | None = None
    max_memory_bytes: int | None = None
