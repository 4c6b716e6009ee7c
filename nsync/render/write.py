"""Write any report to a file, in the format its suffix (or ``format``) names: the one door to every renderer.

>>> analysis = nsync.analyze("report.sqlite")
>>> nsync.write(analysis, "result.json")            # nsync.analysis/1
>>> nsync.write(analysis, "report.html")
>>> nsync.write(nsync.diff(base, cand), "diff.md")  # a pull-request comment
>>> nsync.write(analysis, "syncs.db")               # every sync, for SQL (an analysis, not its report)
>>> nsync.write(analysis, "fixes.patch")            # the rewrites, as a diff to review (never applied)
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from nsync.errors import NsyncError, UsageError

if TYPE_CHECKING:
    from nsync.analysis import Analysis
    from nsync.comparison import Diff
    from nsync.report import AnyReport

FORMATS = {".json": "json", ".md": "markdown", ".markdown": "markdown", ".html": "html", ".htm": "html"}
FORMATS |= {".db": "db", ".sqlite": "db", ".sqlite3": "db", ".patch": "patch", ".diff": "patch"}


def write(
    source: AnyReport | Analysis | Diff,
    path: str | Path,
    format: str | None = None,
    top: int | None = None,
    source_dirs: list[Path] | None = None,
) -> Path:
    """Render ``source`` (an analysis, a diff, or any report) into ``path`` and return the path.

    ``format``: json, markdown, html, db, patch (the rewrites as a unified diff) or switch (the same, each
    behind ``if nsync.fixed():`` for nsync measure); by default the one
    ``path``'s suffix names (.json, .md, .html, .db, .patch). ``top``: the call sites listed (Markdown 10, HTML
    50). ``source_dirs``: where the HTML and the patch look for the traced Python files. Raises UsageError for
    a format that cannot be told or does not fit ``source`` (the database needs the analysis itself),
    NsyncError when the file cannot be written.
    """
    path = Path(path)
    chosen = format or FORMATS.get(path.suffix.lower())
    if chosen is None:
        raise UsageError(f"{path}: which format? name it with format= or a suffix: {', '.join(sorted(FORMATS))}")
    if chosen == "db":
        _write_database(source, path)
    elif chosen == "json":
        from nsync.render.json import render_json

        write_text(path, render_json(source))
    elif chosen == "markdown":
        from nsync.render.markdown import render_markdown

        write_text(path, render_markdown(source, 10 if top is None else top))
    elif chosen == "html":
        write_text(path, _html(source, top, source_dirs))
    elif chosen in ("patch", "switch"):
        from nsync.render.patch import render_patch

        write_text(path, render_patch(source, source_dirs, switched=chosen == "switch"))
    else:
        raise UsageError(f"format {chosen!r}: expected one of json, markdown, html, db, patch, switch")
    return path


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


def _html(source: AnyReport | Analysis | Diff, top: int | None, source_dirs: list[Path] | None) -> str:
    try:
        from nsync.render.html import render_html
    except ModuleNotFoundError as error:  # an incomplete install: say what to add
        raise UsageError(
            f"the HTML report needs {error.name}, which is not installed: pip install {error.name}"
        ) from None
    return render_html(source, 50 if top is None else top, source_dirs)


def _write_database(source: AnyReport | Analysis | Diff, path: Path) -> None:
    from nsync.analysis import Analysis
    from nsync.render.database import write_database

    if not isinstance(source, Analysis):
        raise UsageError(f"{path}: the database holds every sync: write it from an analysis (nsync.analyze's result)")
    try:
        write_database(source, path)
    except (OSError, sqlite3.Error) as error:
        raise NsyncError(f"cannot write {path}: {error}") from error
