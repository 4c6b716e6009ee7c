"""Write any result to a file, in the format its suffix (or ``format``) names: the one door to every renderer.

>>> analysis = nsync.analyze("report.sqlite")
>>> nsync.write(analysis, "result.json")            # nsync.analysis/2
>>> nsync.write(analysis, "report.html")
>>> nsync.write(nsync.diff(base, cand), "diff.md")  # a pull-request comment
>>> nsync.write(analysis, "syncs.db")               # every sync, for SQL
>>> nsync.write(analysis, "fixes.patch")            # the rewrites, as a diff to review (never applied)
>>> nsync.write(analysis, "syncs.sarif")            # SARIF 2.1.0, for code scanning on the pull request
"""

from __future__ import annotations

import importlib
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from nsync.errors import NsyncError, UsageError
from nsync.render.options import RenderOptions

if TYPE_CHECKING:
    from nsync.report import Result

FORMATS = {".json": "json", ".md": "markdown", ".markdown": "markdown", ".html": "html", ".htm": "html"}
FORMATS |= {".db": "db", ".sqlite": "db", ".sqlite3": "db", ".patch": "patch", ".diff": "patch", ".sarif": "sarif"}
# each text format's renderer, render_FORMAT(result, options) -> str in its module (loaded when used: the HTML
# renderer's templates and plotly stay out of a command that writes no page)
RENDERERS = {
    "json": ("nsync.render.json", "render_json"),
    "markdown": ("nsync.render.markdown", "render_markdown"),
    "html": ("nsync.render.html", "render_html"),
    "patch": ("nsync.render.patch", "render_patch"),
    "switch": ("nsync.render.patch", "render_switch"),
    "text": ("nsync.render.terminal", "render_terminal"),
    "sarif": ("nsync.render.sarif", "render_sarif"),
    "annotations": ("nsync.render.annotations", "render_annotations"),
}


def write(result: Result, path: str | Path, format: str | None = None, options: RenderOptions | None = None) -> Path:
    """Render ``result`` (any command's) into ``path`` and return the path.

    ``format``: json, markdown, html, db (every sync, for SQL), patch (the rewrites as a unified diff), switch
    (the same, each behind ``if nsync.fixed():`` for nsync measure), sarif (the findings, for code scanning),
    annotations (the same as GitHub workflow commands) or text (the terminal summary); by default the one
    ``path``'s suffix names (.json, .md, .html, .db, .patch, .sarif). ``options``: the call sites listed, where
    to look for the traced Python files (nsync.render.options). Raises UsageError for a format that cannot be
    told or does not fit ``result`` (one line: a diff has no database), NsyncError when the file cannot be
    written.
    """
    path = Path(path)
    chosen = format or FORMATS.get(path.suffix.lower())
    if chosen is None:
        raise UsageError(f"{path}: which format? name it with format= or a suffix: {', '.join(sorted(FORMATS))}")
    if chosen == "db":
        _write_database(result, path)
    else:
        write_text(path, renderer(chosen)(result, options or RenderOptions()))
    return path


def renderer(format: str) -> Callable[[Result, RenderOptions], str]:
    """The renderer of ``format`` (UsageError: no such format; the HTML's without its packages)."""
    if format not in RENDERERS:
        raise UsageError(f"format {format!r}: expected one of {', '.join([*RENDERERS, 'db'])}")
    module, name = RENDERERS[format]
    try:
        found: Callable[[Result, RenderOptions], str] = getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as error:  # an incomplete install: say what to add
        raise UsageError(
            f"the {format} output needs {error.name}, which is not installed: pip install {error.name}"
        ) from None
    return found


def check_writable(files: list[tuple[str, Path]], reading: Path | None = None) -> None:
    """Refuse now, rather than after minutes of analysis, an output that cannot be written, that two outputs
    share (the second would overwrite the first), or that is the file being read. ``files``: (what names it,
    e.g. a flag, and its path)."""
    for k, (label, path) in enumerate(files):
        other = next((f for f, p in files[:k] if _same_file(p, path)), None)
        if other:
            raise UsageError(f"{other} and {label} both name {path}: give each output its own file")
    for label, path in files:
        if path.is_dir():
            raise UsageError(f"{label} {path}: is a folder")
        folder = path.parent
        if not folder.is_dir():
            raise UsageError(f"{label} {path}: cannot write there, no such folder {folder}")
        if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
            raise UsageError(f"{label} {path}: cannot write there, permission denied")
        if reading is not None and _same_file(path, reading):
            raise UsageError(f"{label} {path}: that is the trace being analysed; nsync never writes into a trace")
        _same_file(path, path)  # (a loop of symbolic links is said as one, before it is tried)
        _try_writing(label, path)


def _try_writing(label: str, path: Path) -> None:
    """Open ``path`` for writing as the output will, changing nothing: a file system that refuses it (/proc, a
    read-only mount, root's rights that os.access trusts) is said now. A file made for the try is removed."""
    if path.exists() and not path.is_file():
        return  # (a device or a pipe: opening it may wait, and writing it is the user's choice)
    made = not path.exists()
    try:
        with path.open("ab"):
            pass
    except OSError as error:
        raise UsageError(f"{label} {path}: cannot write there, {(error.strerror or str(error)).lower()}") from None
    if made:
        path.unlink(missing_ok=True)


def _same_file(path: Path, other: Path) -> bool:
    """Whether two paths name one file; a path that cannot be resolved (a loop of symbolic links) is an error."""
    try:
        return path.resolve() == other.resolve()
    except (OSError, RuntimeError) as error:  # RuntimeError: Python < 3.13's "Symlink loop"
        raise UsageError(f"{path}: cannot be resolved ({error})") from None


def write_text(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as error:
        raise NsyncError(f"cannot write {path}: {error.strerror}") from error


def _write_database(result: Result, path: Path) -> None:
    from nsync.render.database import write_database

    try:
        write_database(result, path)
    except (OSError, sqlite3.Error) as error:
        raise NsyncError(f"cannot write {path}: {error}") from error
