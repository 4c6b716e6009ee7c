"""nsync: which line of my Python makes the GPU wait, and how much does it cost?

Library first; each command is a function:

    >>> analysis = nsync.analyze("run.sqlite")                      # nsync analyze
    >>> nsync.write(analysis, "run.html")                           # --html (also .json, .md, .db)
    >>> change = nsync.diff(nsync.analyze("a.sqlite"), nsync.analyze("b.sqlite"))  # nsync diff
    >>> ranks = nsync.analyze_ranks([Path("run/")])                 # nsync ranks
    >>> result = nsync.profile(["python3", "train.py"], nsync.CaptureOptions(out_dir=Path("out"), name="train"))
    >>> m = nsync.measure(["python3", "train.py"], ["python3", "fixed.py"], runs=5)  # nsync measure
    >>> if nsync.fixed(): ...         # in a program: which version `nsync measure train.py` runs now
    >>> nsync.step()                  # in a loop without an optimizer: the end of one of its steps

``nsync.build_report(analysis) -> Report`` holds every figure the renderers print (and what ``--json``
writes; ``nsync.read_report`` reads it back); every renderer takes any report (an analysis's, a diff's, the
ranks'), or the analysis or diff whose report it builds. Modules load on first use, so ``nsync --help`` stays
fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nsync.ab import fixed, step
    from nsync.analysis import Analysis, analyze
    from nsync.comparison import Diff, diff
    from nsync.config import AnalysisConfig
    from nsync.errors import EXIT_CODES, NsyncError, NsysError, TraceError, UsageError
    from nsync.load import Trace, load_trace
    from nsync.measuring import measure, measure_switched
    from nsync.nsys import CaptureOptions
    from nsync.nsys.window import CaptureWindow
    from nsync.profiling import ProfileResult, profile
    from nsync.ranks import analyze_ranks
    from nsync.render.html import render_html
    from nsync.render.json import render_json
    from nsync.render.markdown import render_markdown
    from nsync.render.terminal import render_terminal, summary
    from nsync.render.write import write
    from nsync.report import AnyReport, DiffReport, RanksReport
    from nsync.report.analysis import Report, build_report, read_report, report_to_dict
    from nsync.report.diff import build_diff_report, read_diff_report
    from nsync.report.measurement import Measurement
    from nsync.report.ranks import read_ranks_report

# Every name loads on first use: `import nsync` runs almost nothing, so that the command's own Ctrl-C
# handling (nsync/__main__.py) is in place before any real work starts.
_LAZY = {
    "AnalysisConfig": "nsync.config",
    "EXIT_CODES": "nsync.errors",
    "NsyncError": "nsync.errors",
    "NsysError": "nsync.errors",
    "TraceError": "nsync.errors",
    "UsageError": "nsync.errors",
    "Analysis": "nsync.analysis",
    "analyze": "nsync.analysis",
    "Trace": "nsync.load",
    "load_trace": "nsync.load",
    "Report": "nsync.report.analysis",
    "build_report": "nsync.report.analysis",
    "read_report": "nsync.report.analysis",
    "report_to_dict": "nsync.report.analysis",
    "render_json": "nsync.render.json",
    "render_markdown": "nsync.render.markdown",
    "render_html": "nsync.render.html",
    "render_terminal": "nsync.render.terminal",
    "summary": "nsync.render.terminal",
    "write": "nsync.render.write",
    "Diff": "nsync.comparison",
    "diff": "nsync.comparison",
    "DiffReport": "nsync.report",
    "RanksReport": "nsync.report",
    "AnyReport": "nsync.report",
    "build_diff_report": "nsync.report.diff",
    "read_diff_report": "nsync.report.diff",
    "read_ranks_report": "nsync.report.ranks",
    "analyze_ranks": "nsync.ranks",
    "profile": "nsync.profiling",
    "measure": "nsync.measuring",
    "measure_switched": "nsync.measuring",
    "fixed": "nsync.ab",
    "step": "nsync.ab",
    "Measurement": "nsync.report.measurement",
    "ProfileResult": "nsync.profiling",
    "CaptureOptions": "nsync.nsys",
    "CaptureWindow": "nsync.nsys.window",
}

__all__ = [
    "EXIT_CODES",
    "Analysis",
    "AnalysisConfig",
    "AnyReport",
    "CaptureOptions",
    "CaptureWindow",
    "Diff",
    "DiffReport",
    "Measurement",
    "NsyncError",
    "NsysError",
    "ProfileResult",
    "RanksReport",
    "Report",
    "Trace",
    "TraceError",
    "UsageError",
    "__version__",
    "analyze",
    "analyze_ranks",
    "build_diff_report",
    "build_report",
    "diff",
    "fixed",
    "load_trace",
    "measure",
    "measure_switched",
    "profile",
    "read_diff_report",
    "read_ranks_report",
    "read_report",
    "render_html",
    "render_json",
    "render_markdown",
    "render_terminal",
    "report_to_dict",
    "step",
    "summary",
    "write",
]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from nsync.version import installed_version

        return installed_version()
    if name == "gates":  # a module of functions: nsync.gates.fail_above(...)
        return importlib.import_module("nsync.gates")
    if name in _LAZY:
        value = globals()[name] = getattr(importlib.import_module(_LAZY[name]), name)  # (found directly next time)
        return value
    raise AttributeError(f"module 'nsync' has no attribute {name!r}")
