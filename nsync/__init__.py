"""nsync: which line of my Python makes the GPU wait, and how much does it cost?

Library first: ``nsync.analyze(path) -> Analysis``; renderers turn an Analysis into text. Modules load on
first use, so ``nsync --help`` stays fast.
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
    from nsync.render.json import analysis_to_dict, render_json
    from nsync.render.markdown import render_markdown
    from nsync.render.terminal import render_terminal, summary

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
    "analysis_to_dict": "nsync.render.json",
    "render_json": "nsync.render.json",
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
    "Trace",
    "TraceError",
    "UsageError",
    "__version__",
    "analysis_to_dict",
    "analyze",
    "load_trace",
    "render_html",
    "render_json",
    "render_markdown",
    "render_terminal",
    "summary",
]


def _version() -> str:
    """The installed distribution's version: one string, kept in pyproject.toml."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("nsync")
    except PackageNotFoundError:  # imported from a source tree that was never installed
        return "0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":  # read on first use: importlib.metadata costs 20 ms of every start-up
        return _version()
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'nsync' has no attribute {name!r}")
