"""GitHub Actions' workflow commands for a result's findings (nsync.render.findings): printed to stdout by
``--annotations``, each shows on its file and line of the pull request, and in the job's summary."""

from __future__ import annotations

import functools

from nsync.render.findings import findings
from nsync.render.options import RenderOptions, refuse
from nsync.render.sarif import uri
from nsync.report import Analysis, Diff, Measurement, Ranks, Result

COMMANDS = {"warning": "warning", "note": "notice"}


@functools.singledispatch
def render_annotations(result: Result, options: RenderOptions = RenderOptions()) -> str:
    """One ``::warning file=F,line=L,title=T::message`` line per finding of ``result``."""
    raise TypeError(f"not an nsync result: {type(result).__name__}")


@render_annotations.register
def _analysis_annotations(result: Analysis, options: RenderOptions = RenderOptions()) -> str:
    return _commands(result, options)


@render_annotations.register
def _diff_annotations(result: Diff, options: RenderOptions = RenderOptions()) -> str:
    return _commands(result, options)


@render_annotations.register
def _ranks_annotations(result: Ranks, options: RenderOptions = RenderOptions()) -> str:
    refuse(result, "annotations", "its JSON or Markdown")


@render_annotations.register
def _measurement_annotations(result: Measurement, options: RenderOptions = RenderOptions()) -> str:
    refuse(result, "annotations", "its JSON or Markdown")


def _commands(result: Analysis | Diff, options: RenderOptions) -> str:
    lines = []
    for found in findings(result, options):
        file = uri(found.file, options.source_dirs)  # (not found here: the annotation is the job's, on no line)
        on = "" if file.startswith("file:") else f"file={_property(file)},line={found.line},"
        where = f"{on}title={_property(found.title)}"
        lines.append(f"::{COMMANDS[found.level]} {where}::{_data(found.message)}\n")
    return "".join(lines)


def _data(text: str) -> str:
    """A command's message, escaped as the runner reads it back (a newline would end the command)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")
