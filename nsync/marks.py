"""The names nsync's injected code writes into a trace, shared by the capture that writes them (nsync.nsys)
and the analysis that reads them (nsync.stages.steps): neither depends on the other."""

STEP_MARK = "nsync: optimizer step"  # an NVTX range around each optimizer step (nsync.nsys.inject)
WINDOW_RANGE = "nsync-window"  # the NVTX start/end range around the captured steps (nsync.nsys.window)
