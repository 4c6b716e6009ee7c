"""What the harvest programs share (scripts/h200/harvest-syncs.py and the held-out sets' own files)."""

DEVICE = "cuda"


def _each(*calls) -> None:
    """Each call in turn; one that fails (an API this version lacks) is said and the others still run."""
    for call in calls:
        try:
            call()
        except Exception as error:  # noqa: PERF203 -- a harvest keeps what the other calls give
            print(f"  skipped: {type(error).__name__}: {error}"[:300], flush=True)
