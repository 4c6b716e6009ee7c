"""How the what-if replays a trace: the host scales and the calibration it is fitted to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class ReplaySettings:
    """How to replay: the uncalibrated host scale and the other scales replayed beside it (``scale_range``), and,
    calibrated, the program's unprofiled steps the host scale is fitted to, their runs, how much faster or slower
    another run's step may be (``spread``) and its host (``host_speed_spread``)."""

    host_scale: float
    scale_range: tuple[float, ...] = ()
    calibrated_steps_ns: np.ndarray | None = None
    calibration_runs: int = 1
    spread: float = 1.0
    host_speed_spread: float = 0.0
    waits_for_data: bool = False  # the host waits for its DataLoader much of a step (a slow run waited for data)
    profiler: str = "nsys"  # what made the trace: the uncalibrated host scale is nsys's slow-down

    @property
    def calibrated(self) -> bool:
        return self.calibrated_steps_ns is not None
