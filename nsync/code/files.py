"""The traced program's own Python files, read where they are readable here: the path the trace names, else the
same file name in the folders searched (the trace's folder, the working directory, ``--source-dir``)."""

from __future__ import annotations

import functools
from pathlib import Path

MAX_SOURCE_BYTES = 5_000_000


def search_folders(trace_path: str | Path, source_dirs: list[Path] | None = None) -> list[Path]:
    """Where a traced file is looked for by name when its own path is not readable: the trace's folder, the
    working directory, then ``source_dirs`` (``--source-dir``)."""
    return [Path(str(trace_path)).resolve().parent, Path.cwd(), *(source_dirs or [])]


def source_lines(file: str, search: list[Path] | tuple[Path, ...] = ()) -> list[str] | None:
    """The lines of the Python file a trace names, or None when it is not readable here.

    Only ``.py`` files are read: a trace names the paths, and a report must not quote other local files.
    """
    text = source_text(file, search)
    return None if text is None else text.splitlines()


def source_text(file: str, search: list[Path] | tuple[Path, ...] = ()) -> str | None:
    """The text of the Python file a trace names (one string per version of the file: callers may cache on
    it), or None when it is not readable here."""
    found = find_source(file, search)
    return None if found is None else _read(str(found))


def find_source(file: str, search: list[Path] | tuple[Path, ...] = ()) -> Path | None:
    """The readable local file a trace's path names: that path, else its name in the folders searched."""
    if not file.endswith(".py"):
        return None
    name = Path(file).name
    for path in [Path(file), *(Path(folder) / name for folder in search)]:
        if _read(str(path)) is not None:
            return path
    return None


def _read(path: str) -> str | None:
    try:
        found = Path(path)
        if not found.is_file():
            return None
        stat = found.stat()
    except OSError:
        return None
    return _text(path, stat.st_mtime_ns, stat.st_size) if stat.st_size <= MAX_SOURCE_BYTES else None


@functools.lru_cache(maxsize=64)
def _text(path: str, mtime_ns: int, size: int) -> str | None:
    """A file's text, once per version of it (a report reads the same file for each of its call sites)."""
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
