"""nsync: which line of my Python makes the GPU wait, and how much does it cost?

Library first: ``nsync.analyze(path) -> Analysis``; ``nsync.build_report(analysis) -> Report`` holds every
figure the renderers print (and what ``--json`` writes; ``nsync.read_report`` reads it back); each renderer
takes a Report (or an Analysis, whose Report it builds). Modules load on first use, so ``nsync --help``
stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nsync.analysis import Analysis, analyze
    from nsync.config import AnalysisConfig
    from nsync.errors import EXIT_CODES, NsyncError, NsysError, TraceError, UsageError
    from nsync.load import Trace, load_trace
    from nsync.render.html import render_html
    from nsync.render.markdown import render_markdown
    from nsync.render.terminal import render_terminal, summary
    from nsync.report.analysis import Report, build_report, read_report, render_json, report_to_dict

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
    "render_json": "nsync.report.analysis",
    "render_markdown": "nsync.render.markdown",
    "render_html": "nsync.render.html",
    "render_terminal": "nsync.render.terminal",
    "summary": "nsync.render.terminal",
}

__all__ = [
    "EXIT_CODES",
    "Analysis",
    "AnalysisConfig",
    "NsyncError",
    "NsysError",
    "Report",
    "Trace",
    "TraceError",
    "UsageError",
    "__version__",
    "analyze",
    "build_report",
    "load_trace",
    "read_report",
    "render_html",
    "render_json",
    "render_markdown",
    "render_terminal",
    "report_to_dict",
    "summary",
]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from nsync.version import installed_version

        return installed_version()
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'nsync' has no attribute {name!r}")
