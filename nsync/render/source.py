"""The Python lines a report quotes: a call site's line and its neighbours, read from the traced file where
it is readable here (the path the trace names, else the same file name in the folders searched)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

SOURCE_RADIUS = 2
MAX_SOURCE_BYTES = 5_000_000


def source_context(file: str, line: int, search: list[Path], radius: int = SOURCE_RADIUS) -> list[dict[str, Any]]:
    """Lines around ``file:line`` (``number``, ``text``, ``hit``) when that Python file is readable (else empty).

    Only ``.py`` files are read: a trace names the paths, and a report must not quote other local files.
    """
    if line <= 0 or not file.endswith(".py"):
        return []
    name = Path(file).name
    for path in [Path(file), *(folder / name for folder in search)]:
        try:
            if path.is_file() and path.stat().st_size <= MAX_SOURCE_BYTES:
                lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
                break
        except OSError:
            continue
    else:
        return []
    first = max(1, line - radius)
    return [
        {"number": n, "text": lines[n - 1], "hit": n == line} for n in range(first, min(len(lines), line + radius) + 1)
    ]


def source_line(file: str, line: int, search: list[Path]) -> str:
    """The call site's own line, stripped ('' when it cannot be read)."""
    hit = [entry["text"] for entry in source_context(file, line, search, radius=0) if entry["hit"]]
    return hit[0].strip() if hit else ""
