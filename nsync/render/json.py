"""The JSON of any report: ``nsync.analysis/1``, ``nsync.diff/1`` or ``nsync.ranks/1`` (each report's schema)."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from nsync.report import as_any_report
from nsync.report.analysis import Report, report_to_dict
from nsync.report.diff import DiffReport, diff_report_to_dict
from nsync.report.ranks import RanksReport

if TYPE_CHECKING:
    from nsync.analysis import Analysis
    from nsync.comparison import Diff


def render_json(source: Report | Analysis | DiffReport | Diff | RanksReport) -> str:
    report = as_any_report(source)
    data: dict[str, Any]
    if isinstance(report, RanksReport):
        data = asdict(report)
    elif isinstance(report, DiffReport):
        data = diff_report_to_dict(report)
    else:
        data = report_to_dict(report)
    return json.dumps(data, indent=2, allow_nan=False) + "\n"
