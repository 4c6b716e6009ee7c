"""The one contract of every renderer: ``render_FORMAT(result, options) -> str`` for any command's result
(nsync.report), one function per format dispatched on the result's type, a result it cannot hold refused in
one line."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from nsync.errors import UsageError


@dataclass(frozen=True)
class RenderOptions:
    """How to render a result; each format takes what applies to it.

    ``top``: the call sites (stragglers, changed sites) listed, each format's own default when None (terminal
    and Markdown 10, HTML 50). ``width``: text columns. ``source_dirs``: where else to look for the traced
    Python files, to quote their lines and write their fixes. ``verbose``: each call site's whole stack too
    (terminal). ``warnings``: end with the result's warnings (terminal; the command line prints them on stderr
    instead)."""

    top: int | None = None
    width: int = 120
    source_dirs: tuple[Path, ...] = ()
    verbose: bool = False
    warnings: bool = True

    def top_or(self, default: int) -> int:
        return default if self.top is None else self.top


def refuse(result: object, format: str, instead: str) -> NoReturn:
    """The one-line refusal of a format that cannot hold ``result``; ``instead`` names what can."""
    raise UsageError(f"{_article(type(result).__name__)} result has no {format}: {instead}")


def _article(name: str) -> str:
    return f"an {name.lower()}" if name[:1] in "AEIOU" else f"a {name.lower()}"
