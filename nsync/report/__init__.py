"""The results of nsync's commands as their renderers print them: one typed, versioned report per command
(``analyze``: :class:`Report`, ``diff``: :class:`DiffReport`, ``ranks``: :class:`RanksReport`), built once."""

from nsync.report.analysis import Report
from nsync.report.diff import DiffReport
from nsync.report.ranks import RanksReport

__all__ = ["DiffReport", "RanksReport", "Report"]
