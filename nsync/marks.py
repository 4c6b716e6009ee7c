"""The names nsync's injected code writes into a trace, shared by the capture that writes them (nsync.nsys)
and the analysis that reads them (nsync.stages.steps): neither depends on the other."""

STEP_MARK = "nsync: optimizer step"  # an NVTX range around each optimizer step (nsync.nsys.inject)
OPTIMIZER_MARK = "nsync: optimizer {}"  # inside each STEP_MARK: which optimizer (1, 2... as first stepped)
DATA_MARK = "nsync: data loader"  # an NVTX range around each batch a DataLoader hands the program
WINDOW_RANGE = "nsync-window"  # the NVTX start/end range around the captured steps (nsync.nsys.window)
