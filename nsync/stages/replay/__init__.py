"""What-if replay: re-time the trace with some syncs made non-blocking, and predict the step time.

The model (docs/how-it-works.md, §6):

- a host thread keeps its measured gaps: between two of its syncs every call and every launch moves by
  the same shift, the one its last sync left it with (a thread with no sync of its own, such as
  autograd's backward thread, moves with the last sync of any thread of its process);
- each stream runs its ops in launch order with their measured durations, none before its launch
  (plus the launch latency measured on this device when the stream was idle), an op queued behind another
  starting the GPU's dispatch gap after it (measured in the trace: about 1 µs on the H200, less the
  PROFILER_GAP_NS nsys adds to it, except in the replay of the trace as captured);
- a blocking sync ends at max(its new start + its own cost, the replayed end of what it waited for);
  a released sync ends at its new start + its own cost (the copies it implies stay on the stream),
  except a value read (``.item()``): keeping the value on the GPU removes the read, so the host goes on
  from where its copy call began (the copy call and the sync take no host time) and its copy leaves the stream;
- host time is scaled by the host scale (the profiler's slow-down undone), which a calibration fits to the
  program's unprofiled step, never above 1 / 1.1: nsys slows a host by 1.1 to 2.2 times;
- a loop of reads done at once (``vectorised``, _loops) takes its host time and GPU work between its first
  read and its last away, like one call of a line.

Each stream's schedule is the max-plus recurrence ``end_i = max(ready_i, end_{i-1} + gap) + duration_i``,
solved by slices with a cumulative maximum: ``end_i = S_i + max_{j<=i}(ready_j - gap - S_{j-1})`` where S is
the running sum of durations plus gaps (an op the fix removes adds nothing and waits for nothing). Syncs are
taken in time order (a loop over syncs, never over ops).
"""

from nsync.knowledge import PROFILER_GAP_NS
from nsync.stages.replay.budget import ReplaySkipped
from nsync.stages.replay.fit import PROFILED_HOST_SCALE_MAX, HostScaleFit, fit_host_scale, other_scales
from nsync.stages.replay.likely import COVERAGE, chance_above, likely_range
from nsync.stages.replay.model import LOOP_BODY_OPS, ReplayModel, prepare
from nsync.stages.replay.settings import ReplaySettings
from nsync.stages.replay.simulate import replay, step_times_ns
from nsync.stages.replay.whatif import LoopSaving, WhatIf, priced_callsites, what_if

__all__ = [
    "COVERAGE",
    "LOOP_BODY_OPS",
    "PROFILED_HOST_SCALE_MAX",
    "PROFILER_GAP_NS",
    "HostScaleFit",
    "LoopSaving",
    "ReplayModel",
    "ReplaySettings",
    "ReplaySkipped",
    "WhatIf",
    "chance_above",
    "fit_host_scale",
    "likely_range",
    "other_scales",
    "prepare",
    "priced_callsites",
    "replay",
    "step_times_ns",
    "what_if",
]
