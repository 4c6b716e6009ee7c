"""The names that both sides of nsync must agree on, so that neither depends on the other: what nsync's injected
code writes into a trace, shared by the capture that writes them (nsync.capturing) and the analysis that reads
them (nsync.stages.steps); and the one variable a user sets, which the switched patch (nsync.render.patch) tells of
and ``nsync.fixed()`` (nsync.capturing.ab) reads."""

STEP_MARK = "nsync: optimizer step"  # an NVTX range around each optimizer step (nsync.capturing.inject)
OPTIMIZER_MARK = "nsync: optimizer {}"  # inside each STEP_MARK: which optimizer (1, 2... as first stepped)
DATA_MARK = "nsync: data loader"  # an NVTX range around each batch a DataLoader hands the program
WINDOW_RANGE = "nsync-window"  # the NVTX start/end range around the captured steps (nsync.capturing.window)
FIXED_ENV = "NSYNC_FIXED"  # outside nsync measure: 1 runs a program's fixed version throughout (nsync.fixed())
