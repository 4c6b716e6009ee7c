"""What a rewriter writes of one statement (_Edit), and the checks every rewrite passes."""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace

from nsync.stages.advice.code import _parses


@dataclass(frozen=True)
class _Edit:
    """What a rewriter found: the statement rewritten (None: none), the set-up and its line, the words."""

    rewrite: str | None = None
    setup: str = ""
    setup_line: int = 0
    why: str = ""
    caveat: str = ""
    dependency: str = ""
    short: str = ""
    whole: bool = False  # the rewrite replaces the whole compound statement (an if/else), not its header


def _checked(edit: _Edit) -> _Edit:
    """A rewrite that does not parse is never shown: the advice keeps its words and drops the code."""
    for text in (edit.rewrite or "", edit.setup):
        if not _parses(text):
            return replace(edit, rewrite=None, setup="", setup_line=0)
    return edit


def _detached(text: str, node: ast.AST) -> str:
    """``text`` (the code of ``node``) cut from autograd: as it is where it already calls ``.detach()``."""
    detached = any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "detach"
        for n in ast.walk(node)
    )
    return text if detached else f"{text}.detach()"
