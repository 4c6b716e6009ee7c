"""The terminal summary of any result: a rich renderable (``summary``, coloured on a terminal) and its plain
text at a width (``render_terminal``), for a terminal, a pipe or a CI log."""

from __future__ import annotations

import functools
import io

from rich.console import Console, RenderableType
from rich.text import Text

from nsync.render.measurement import MEASUREMENT_WIDTH, measurement_text
from nsync.render.options import RenderOptions
from nsync.render.terminal.analysis import analysis_summary
from nsync.render.terminal.diff import diff_summary
from nsync.render.terminal.ranks import ranks_summary
from nsync.report import Analysis, Diff, Measurement, Ranks, Result

__all__ = ["render_terminal", "summary"]


@functools.singledispatch
def summary(result: Result, options: RenderOptions = RenderOptions()) -> RenderableType:
    """``result`` as a renderable for a console ``options.width`` columns wide."""
    raise TypeError(f"not an nsync result: {type(result).__name__}")


summary.register(Analysis, analysis_summary)
summary.register(Diff, diff_summary)
summary.register(Ranks, ranks_summary)


@summary.register
def _(result: Measurement, options: RenderOptions = RenderOptions()) -> RenderableType:
    return Text(measurement_text(result, min(options.width, MEASUREMENT_WIDTH)).rstrip("\n"))


def render_terminal(result: Result, options: RenderOptions = RenderOptions()) -> str:
    """``result``'s summary as plain text, ``options.width`` columns wide."""
    # (in a notebook rich would also display what it records: a string must have no side effect)
    console = Console(record=True, width=options.width, file=io.StringIO(), color_system=None, force_jupyter=False)
    console.print(summary(result, options))
    return console.export_text()
