"""What the harvest programs share (scripts/h200/harvest-syncs.py and the held-out sets' own files)."""

DEVICE = "cuda"

# what each failed call said, in order: scripts/h200/check-rewrites.py compares a program's before and after, so
# that a call a rewrite broke is not taken for one that ran clean (held-out-7's first check took one so)
FAILED: list[str] = []


def _each(*calls) -> None:
    """Each call in turn; one that fails (an API this version lacks) is said and the others still run."""
    for k, call in enumerate(calls):
        try:
            call()
        except Exception as error:  # noqa: PERF203 -- a harvest keeps what the other calls give
            said = f"call {k} of {getattr(call, '__qualname__', call)}: {type(error).__name__}: {error}"[:300]
            FAILED.append(said)
            print(f"  skipped: {said}", flush=True)


def _updated(metric, *inputs) -> None:
    """A torchmetrics metric moved to the GPU, updated twice and computed."""
    metric = metric.to(DEVICE)
    for _ in range(2):
        metric.update(*inputs)
    metric.compute()
