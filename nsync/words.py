"""Counts in words: "1 sync", "2 syncs" (every output and message says a count so)."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun``, plural unless the count is one: counted(1, "step") == "1 step"."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
