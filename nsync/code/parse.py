"""The user's Python parsed: each version of a file's text once (``parsed``, shared by the loader, the advice and
the patch), and what its statements are: the fewest statements holding some lines, where an import may go, which
lines continue a string."""

from __future__ import annotations

import ast
import functools
import io
import textwrap
import tokenize


@functools.lru_cache(maxsize=64)
def parsed(text: str) -> tuple[list[str], ast.Module | None]:
    """A file's lines (as Python numbers them: split at newlines alone) and its syntax tree (None: it does not
    parse), once per version of its text."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    try:
        tree: ast.Module | None = ast.parse(text)
    except (SyntaxError, ValueError):
        tree = None
    return lines, tree


def snippet(text: str) -> ast.Module | None:
    """A few lines of code (a rewrite, a statement cut out of its file) parsed at their own indentation; None
    where they do not parse alone."""
    try:
        return ast.parse(textwrap.dedent(text))
    except (SyntaxError, ValueError):
        return None


def statement_span(text: str, first: int, last: int) -> tuple[int, int, int] | None:
    """The lines (first, last, 1-based) of the fewest neighbouring statements of one block that hold lines
    ``first``-``last``, and their indentation; None when the file does not parse or no statement holds them.
    A range inside one compound statement's body (on lines of its own) is looked for in that body; an ``elif``
    clause is no statement of its own."""
    lines, tree = parsed(text)
    if tree is None:
        return None
    body: list[ast.stmt] = tree.body
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
    tree = parsed(text)[1]
    if tree is None:
        return 1
    body = tree.body
    for statement in body:
        docstring = isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
        future = isinstance(statement, ast.ImportFrom) and statement.module == "__future__"
        if not (docstring and statement is body[0]) and not future:
            return _start(statement)
    return _end(body) + 1 if body else 1
