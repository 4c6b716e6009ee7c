"""nsync: which line of my Python makes the GPU wait, and how much does it cost?

Library first: ``nsync.analyze(path) -> Analysis``; renderers turn an Analysis into text.
"""

from nsync.analysis import Analysis, analyze
from nsync.config import AnalysisConfig
from nsync.errors import EXIT_CODES, NsyncError, NsysError, TraceError, UsageError
from nsync.load import Trace, load_trace
from nsync.render.json import analysis_to_dict, render_json
from nsync.render.terminal import render_terminal, summary

__all__ = [
    "EXIT_CODES",
    "Analysis",
    "AnalysisConfig",
    "NsyncError",
    "NsysError",
    "Trace",
    "TraceError",
    "UsageError",
    "analysis_to_dict",
    "analyze",
    "load_trace",
    "render_json",
    "render_terminal",
    "summary",
]
__version__ = "0.1.0"
