"""The results of nsync's commands as their renderers print them: one typed, versioned report per command
(``analyze``: :class:`Report`, ``diff``: :class:`DiffReport`, ``ranks``: :class:`RanksReport`), built once."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nsync.report.analysis import Report, build_report
from nsync.report.diff import DiffReport, build_diff_report
from nsync.report.ranks import RanksReport

if TYPE_CHECKING:
    from nsync.analysis import Analysis
    from nsync.comparison import Diff

__all__ = ["AnyReport", "DiffReport", "RanksReport", "Report", "as_any_report"]

AnyReport = Report | DiffReport | RanksReport


def as_any_report(source: Report | DiffReport | RanksReport | Analysis | Diff) -> AnyReport:
    """What a renderer prints: a report as it is, or the report of the analysis or diff it was given."""
    if isinstance(source, (Report, DiffReport, RanksReport)):
        return source
    from nsync.comparison import Diff  # loaded already where there is one: the caller made it

    return build_diff_report(source) if isinstance(source, Diff) else build_report(source)
