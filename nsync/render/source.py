"""The Python lines a report quotes: a call site's line and its neighbours (nsync.code reads the file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nsync.code import source_lines

SOURCE_RADIUS = 2


def source_context(file: str, line: int, search: list[Path], radius: int = SOURCE_RADIUS) -> list[dict[str, Any]]:
    """Lines around ``file:line`` (``number``, ``text``, ``hit``) when that Python file is readable (else empty)."""
    lines = source_lines(file, search) if line > 0 else None
    if lines is None:
        return []
    first = max(1, line - radius)
    return [
        {"number": n, "text": lines[n - 1], "hit": n == line} for n in range(first, min(len(lines), line + radius) + 1)
    ]


def source_line(file: str, line: int, search: list[Path]) -> str:
    """The call site's own line, stripped ('' when it cannot be read)."""
    hit = [entry["text"] for entry in source_context(file, line, search, radius=0) if entry["hit"]]
    return hit[0].strip() if hit else ""
