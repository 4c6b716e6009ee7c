"""nsync: which line of my Python makes the GPU wait, and how much does it cost?

Library first; each command is a function that returns one typed, versioned result (nsync.report):

    >>> analysis = nsync.analyze("run.sqlite")                      # nsync analyze: an Analysis
    >>> nsync.write(analysis, "run.html")                           # --html (also .json, .md, .db, .patch)
    >>> change = nsync.diff(nsync.analyze("a.sqlite"), nsync.analyze("b.sqlite"))  # nsync diff: a Diff
    >>> ranks = nsync.analyze_ranks([Path("run/")])                 # nsync ranks: Ranks
    >>> result = nsync.profile(["train.py"], nsync.ProfileOptions(steps=100))     # nsync profile
    >>> m = nsync.measure_lines("train.py", "fixed.py")             # nsync measure: a Measurement
    >>> saved = nsync.load_result(Path("result.json"))              # what --json wrote, back (--from)
    >>> if nsync.fixed(): ...         # in a program: which version `nsync measure train.py` runs now
    >>> nsync.step()                  # in a loop without an optimizer: the end of one of its steps
    >>> with nsync.capture(steps=40) as run: train()     # torch.profiler around a block; `run` shows the report

Every result renders through ``nsync.write`` (by suffix) or one function per format, each
``render_FORMAT(result, nsync.RenderOptions(...)) -> str``. Modules load on first use, so ``nsync --help``
stays fast.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nsync.analysis import analyze, calibration_of
    from nsync.capturing.ab import fixed, step
    from nsync.capturing.notebook import CapturedRun, capture
    from nsync.capturing.nsys import CaptureOptions
    from nsync.capturing.options import ProfileOptions, ProfileResult
    from nsync.capturing.profile import profile, to_settle
    from nsync.capturing.window import CaptureWindow
    from nsync.comparison import diff
    from nsync.config import AnalysisConfig
    from nsync.errors import EXIT_CODES, NsyncError, NsysError, TraceError, UsageError
    from nsync.load import Trace, load_trace
    from nsync.measuring import MeasureOptions, measure, measure_lines, measure_switched
    from nsync.notices import Notice
    from nsync.ranks import analyze_ranks
    from nsync.render.html import render_html
    from nsync.render.json import render_json
    from nsync.render.markdown import render_markdown
    from nsync.render.options import RenderOptions
    from nsync.render.sarif import render_sarif
    from nsync.render.terminal import render_terminal, summary
    from nsync.render.write import write
    from nsync.report import Analysis, Diff, Measurement, Ranks, Result, load_result

# Every name loads on first use: `import nsync` runs almost nothing, so that the command's own Ctrl-C
# handling (nsync/__main__.py) is in place before any real work starts.
_LAZY = {
    "AnalysisConfig": "nsync.config",
    "EXIT_CODES": "nsync.errors",
    "NsyncError": "nsync.errors",
    "NsysError": "nsync.errors",
    "TraceError": "nsync.errors",
    "UsageError": "nsync.errors",
    "Notice": "nsync.notices",
    "analyze": "nsync.analysis",
    "calibration_of": "nsync.analysis",
    "Trace": "nsync.load",
    "load_trace": "nsync.load",
    "Analysis": "nsync.report",
    "Diff": "nsync.report",
    "Ranks": "nsync.report",
    "Measurement": "nsync.report",
    "Result": "nsync.report",
    "load_result": "nsync.report",
    "RenderOptions": "nsync.render.options",
    "render_json": "nsync.render.json",
    "render_markdown": "nsync.render.markdown",
    "render_sarif": "nsync.render.sarif",
    "render_html": "nsync.render.html",
    "render_terminal": "nsync.render.terminal",
    "summary": "nsync.render.terminal",
    "write": "nsync.render.write",
    "diff": "nsync.comparison",
    "analyze_ranks": "nsync.ranks",
    "profile": "nsync.capturing.profile",
    "ProfileOptions": "nsync.capturing.options",
    "ProfileResult": "nsync.capturing.options",
    "to_settle": "nsync.capturing.profile",
    "measure": "nsync.measuring",
    "measure_lines": "nsync.measuring",
    "measure_switched": "nsync.measuring",
    "MeasureOptions": "nsync.measuring",
    "fixed": "nsync.capturing.ab",
    "step": "nsync.capturing.ab",
    "CaptureOptions": "nsync.capturing.nsys",
    "CaptureWindow": "nsync.capturing.window",
    "capture": "nsync.capturing.notebook",
    "CapturedRun": "nsync.capturing.notebook",
}

__all__ = [
    "EXIT_CODES",
    "Analysis",
    "AnalysisConfig",
    "CaptureOptions",
    "CaptureWindow",
    "CapturedRun",
    "Diff",
    "MeasureOptions",
    "Measurement",
    "Notice",
    "NsyncError",
    "NsysError",
    "ProfileOptions",
    "ProfileResult",
    "Ranks",
    "RenderOptions",
    "Result",
    "Trace",
    "TraceError",
    "UsageError",
    "__version__",
    "analyze",
    "analyze_ranks",
    "calibration_of",
    "capture",
    "diff",
    "fixed",
    "load_result",
    "load_trace",
    "measure",
    "measure_lines",
    "measure_switched",
    "profile",
    "render_html",
    "render_json",
    "render_markdown",
    "render_sarif",
    "render_terminal",
    "step",
    "summary",
    "to_settle",
    "write",
]


def _shown_in_notebooks() -> None:
    """In IPython (Jupyter's kernel), each result shows as its report: IPython is told of the result types by
    name, so that nothing of them loads before one is shown."""
    ipython = sys.modules.get("IPython")
    shell = getattr(ipython, "get_ipython", lambda: None)() if ipython is not None else None
    if shell is None:
        return
    html = shell.display_formatter.formatters["text/html"]
    for name in ("Analysis", "Diff", "Ranks", "Measurement"):
        html.for_type_by_name(f"nsync.report.{name.lower()}", name, _notebook_html)


def _notebook_html(result: Any) -> str:
    from nsync.render.notebook import notebook_html

    return notebook_html(result)


_shown_in_notebooks()


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
