"""The traced program's own Python files, read where they are readable here: the path the trace names, else the
same file name in the folders searched (the trace's folder, the working directory, ``--source-dir``)."""

from __future__ import annotations

import ast
import functools
import io
import tokenize
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


def statement_span(text: str, first: int, last: int) -> tuple[int, int, int] | None:
    """The lines (first, last, 1-based) of the fewest neighbouring statements of one block that hold lines
    ``first``-``last``, and their indentation; None when the file does not parse or no statement holds them.
    A range inside one compound statement's body (on lines of its own) is looked for in that body; an ``elif``
    clause is no statement of its own."""
    try:
        body: list[ast.stmt] = ast.parse(text).body
    except (SyntaxError, ValueError):
        return None
    lines = text.splitlines()
    while True:
        touched = [s for s in body if _start(s) <= last and first <= (s.end_lineno or s.lineno)]
        if not touched:
            return None
        if len(touched) == 1:
            header = touched[0].lineno
            inner = next(
                (b for b in _bodies(touched[0]) if _start(b[0]) > header and _start(b[0]) <= first and last <= _end(b)),
                None,
            )
            if inner is not None:
                body = inner
                continue
        begin = _start(touched[0])
        if lines[begin - 1].lstrip().startswith("elif"):
            return None
        return begin, _end(touched), touched[0].col_offset


def _start(statement: ast.stmt) -> int:
    decorators = getattr(statement, "decorator_list", None) or []
    return min([statement.lineno, *(d.lineno for d in decorators)])


def _end(body: list[ast.stmt]) -> int:
    return body[-1].end_lineno or body[-1].lineno


def _bodies(statement: ast.stmt) -> list[list[ast.stmt]]:
    """The statement lists inside a compound statement (if/for/while/with/try/def/class/match)."""
    bodies = [getattr(statement, name, None) for name in ("body", "orelse", "finalbody")]
    bodies += [handler.body for handler in getattr(statement, "handlers", [])]
    bodies += [case.body for case in getattr(statement, "cases", [])]
    return [b for b in bodies if isinstance(b, list) and b and isinstance(b[0], ast.stmt)]


def string_rows(text: str) -> set[int]:
    """The 1-based lines that continue a string begun on an earlier line (their indentation is the string's)."""
    rows: set[int] = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.STRING or token.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
                rows.update(range(token.start[0] + 1, token.end[0] + 1))
    except (tokenize.TokenError, SyntaxError):
        return set(range(1, text.count("\n") + 2))  # unreadable: every line
    return rows


def first_statement_line(text: str) -> int:
    """Where a module-level import may go: the first statement after the docstring and ``__future__`` imports
    (1 in an empty file)."""
    try:
        body = ast.parse(text).body
    except (SyntaxError, ValueError):
        return 1
    for statement in body:
        docstring = isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
        future = isinstance(statement, ast.ImportFrom) and statement.module == "__future__"
        if not (docstring and statement is body[0]) and not future:
            return _start(statement)
    return _end(body) + 1 if body else 1
