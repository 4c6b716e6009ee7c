"""The installed nsync's version: one string, kept in pyproject.toml."""

from __future__ import annotations


def installed_version() -> str:
    """Read on first use (importlib.metadata costs 20 ms of every start-up)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("nsync")
    except PackageNotFoundError:  # imported from a source tree that was never installed
        return "0+unknown"
