"""Analysis settings and their defaults (docs/how-it-works.md says how each is used; docs/accuracy.md how the
fitted ones were fitted)."""

from __future__ import annotations

from dataclasses import dataclass

from nsync.knowledge import (
    CALIBRATION_SPREAD,
    HOST_SPEED_SPREAD,
    UNCALIBRATED_HOST_SCALE,
    UNCALIBRATED_HOST_SCALE_RANGE,
)


@dataclass(frozen=True)
class AnalysisConfig:
    """Knobs of the model. Defaults suit eager PyTorch training and inference loops."""

    step_range: str | None = None  # the NVTX range that marks one step (None: found automatically)
    step_kernel: str | None = None  # a kernel launched once per step: steps run from one launch to the next
    warmup_steps: int | None = None  # leading steps left out of per-step figures (None: 1 of at least 4, else 0)
    # a thread has rebuilt its lead once it is back above max(lead_floor_ns, lead_fraction x its median lead)
    lead_fraction: float = 0.5
    lead_floor_ns: int = 30_000
    # without a calibration, host time is scaled by this to undo nsys's slow-down (nsync.knowledge.fitted)
    host_scale: float = UNCALIBRATED_HOST_SCALE
    worth_fixing_share: float = 0.05  # a fix is worth it from this share of the unprofiled step
    # calibrated: another run's step may be this factor shorter or longer than the calibration run's
    calibration_spread: float = CALIBRATION_SPREAD
    host_scale_range: tuple[float, float] = UNCALIBRATED_HOST_SCALE_RANGE  # uncalibrated: the other scales replayed
    host_speed_spread: float = (
        HOST_SPEED_SPREAD  # calibrated: another run's host this much faster or slower (diff's noise)
    )
    window_s: tuple[float, float | None] | None = None  # analyse what starts in [start, end) s of the capture
    max_memory_bytes: int | None = None  # what a load may plan for (None: what is available)
