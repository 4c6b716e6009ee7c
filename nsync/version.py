"""The installed nsync's version: one string, kept in pyproject.toml; and the name it is installed by."""

from __future__ import annotations

# The distribution's name on PyPI ("nsync" there is an unrelated project); the command and the import stay nsync.
DISTRIBUTION = "nsync-profiler"


def installed_version() -> str:
    """Read on first use (importlib.metadata costs 20 ms of every start-up)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # imported from a source tree that was never installed
        return "0+unknown"
