"""What the advice stage adds to the analysis: each call site's Advice (nsync.report.fixes), and groups of reads
one copy would do."""

from __future__ import annotations

from dataclasses import dataclass

from nsync.report.fixes import Advice, LineEdit, Reads

__all__ = ["ADVICE_COLUMNS", "Advice", "LineEdit", "ReadGroup", "Reads"]

ADVICE_COLUMNS = ("advice",)  # what advise_callsites adds to the call sites: an Advice, or None


@dataclass(frozen=True)
class ReadGroup(Reads):
    """Reads and their call sites: ``site_ids`` in line order; ``released``, those whose sync the combined read
    removes (all but the last: one sync remains, where the values are read)."""

    site_ids: list[int]
    released: list[int]
