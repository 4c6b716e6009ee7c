"""The syncing line in its file: the statement that holds it, parsed (ast), with what the rewriters ask of it."""

from __future__ import annotations

import ast
import functools
import re
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from nsync.code import parsed, snippet, source_text
from nsync.stages.advice.patterns import UNKNOWN, classify


@dataclass(frozen=True)
class _Code:
    """A parsed file and the statement holding the syncing line."""

    lines: list[str]
    tree: ast.Module
    chain: list[ast.AST]  # module .. innermost statement holding the line
    line: int
    source: str  # the file's text, as read (the key of the per-file caches)

    @property
    def statement(self) -> ast.stmt:
        return self.chain[-1]  # type: ignore[return-value]

    @property
    def _bytes(self) -> tuple[bytes, list[int]]:
        return _encoded(self.source)

    def _span(self, node: ast.AST) -> tuple[int, int]:
        starts = self._bytes[1]
        return (
            starts[node.lineno - 1] + node.col_offset,  # type: ignore[attr-defined]
            starts[node.end_lineno - 1] + node.end_col_offset,  # type: ignore[attr-defined]
        )

    def text(self, node: ast.AST, changes: Sequence[tuple[ast.AST, str]] = ()) -> str:
        """The source text of a node, with the sub-nodes in ``changes`` replaced by their texts."""
        start, end = self._span(node)
        return self._replaced(start, end, changes)

    def rewritten(self, changes: Sequence[tuple[ast.AST, str]], node: ast.AST | None = None) -> str:
        """The statement's (or ``node``'s) whole lines with the nodes in ``changes`` replaced (a comment after
        the statement's end is dropped: it spoke of the code replaced)."""
        node = node or self.statement
        starts = self._bytes[1]
        text = self._replaced(starts[node.lineno - 1], self._span(node)[1], changes)  # type: ignore[attr-defined]
        return _same_branches_merged(text) if changes else text

    def _replaced(self, start: int, end: int, changes: Sequence[tuple[ast.AST, str]]) -> str:
        whole = self._bytes[0]
        out, at = [], start
        for (first, last), new in sorted((self._span(n), new) for n, new in changes):
            out += [whole[at:first], new.encode()]
            at = last
        out.append(whole[at:end])
        return b"".join(out).decode()

    def header(self, from_line: bool = False) -> str:
        """The statement's own text as one line: a compound statement's header alone (``if x.any():``), less
        comments; from the syncing line on where ``from_line``."""
        first, last = self.lines_of(self.statement)
        first = max(first, self.line) if from_line else first
        return " ".join(" ".join(_strip_comment(text) for text in self.lines[first - 1 : last]).split())

    def lines_of(self, node: ast.stmt) -> tuple[int, int]:
        """A statement's lines: a compound statement's header alone."""
        body = getattr(node, "body", None)
        if body and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return node.lineno, max(node.lineno, body[0].lineno - 1)
        return node.lineno, node.end_lineno or node.lineno

    @property
    def indent(self) -> str:
        text = self.lines[self.statement.lineno - 1]
        return text[: len(text) - len(text.lstrip())]

    def on_line(self) -> list[ast.AST]:
        """The statement's expression nodes that touch the syncing line (the whole header for one line)."""
        roots = _header_nodes(self.statement)
        nodes = [n for root in roots for n in ast.walk(root) if hasattr(n, "lineno")]
        touching = [n for n in nodes if n.lineno <= self.line <= (n.end_lineno or n.lineno)]  # type: ignore[attr-defined]
        return touching or nodes

    @property
    def function(self) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        found = [n for n in self.chain if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        return found[-1] if found else None

    def loops(self) -> list[ast.For | ast.While]:
        """The loops holding the statement inside its function (outermost first)."""
        function = self.function
        inside = self.chain[self.chain.index(function) + 1 :] if function else self.chain
        return [n for n in inside[:-1] if isinstance(n, (ast.For, ast.While))]

    def names(self) -> set[str]:
        return {n.id for n in ast.walk(self.tree) if isinstance(n, ast.Name)} | {
            n.name for n in ast.walk(self.tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))
        }

    def fresh(self, base: str) -> str:
        """A name the file does not use yet."""
        taken, name, k = self.names(), base, 2
        while name in taken:
            name, k = f"{base}_{k}", k + 1
        return name

    def module_names(self) -> set[str]:
        """Names bound at the module's top level (assignments, imports, definitions)."""
        bound: set[str] = set()
        for node in self.tree.body:
            bound |= _bound(node)
        return bound

    def setup_place(self, needs: set[str]) -> tuple[int, str] | None:
        """Where a one-time set-up using ``needs`` can go: before the outermost loop of the statement's function
        when everything it needs is bound before that loop; else at the top level before the function's
        definition when everything is a top-level name. (line, indent), or None."""
        loops = self.loops()
        function = self.function
        if loops:
            loop = loops[0]
            before: set[str] = set(self.module_names())
            if function is not None:
                before |= {a.arg for a in ast.walk(function.args) if isinstance(a, ast.arg)}
                for node in ast.walk(function):
                    if isinstance(node, ast.stmt) and node.lineno < loop.lineno and node is not function:
                        before |= _bound(node)
            assigned_in_loop = set().union(*(_bound(n) for n in ast.walk(loop) if isinstance(n, ast.stmt)))
            if needs <= (before | _BUILTINS) - assigned_in_loop:
                text = self.lines[loop.lineno - 1]
                return loop.lineno, text[: len(text) - len(text.lstrip())]
            return None
        top = self.chain[1] if len(self.chain) > 2 else None
        if top is None or not isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return None
        if needs <= self.module_names() | _BUILTINS:
            first = min([top.lineno, *(d.lineno for d in top.decorator_list)])
            return first, ""
        return None

    @functools.cached_property
    def parents(self) -> dict[ast.AST, ast.AST]:
        """Each node's parent, in the statement's function (or module): built once, asked of many nodes."""
        scope = self.function or self.tree
        return {child: parent for parent in ast.walk(scope) for child in ast.iter_child_nodes(parent)}

    @functools.cached_property
    def host_used(self) -> set[ast.AST]:
        """The nodes whose value the host itself uses, in the statement's function (or module): in a test (if,
        while, a conditional expression, an assert), iterated over by a loop, in the arguments of range(), print()
        and the builtins that take Python sequences (zip, len...), as a size (``torch.empty(n)``, ``x.view(n, -1)``), in
        a slice's bounds, in an f-string."""
        roots: list[ast.AST] = []
        for node in ast.walk(self.function or self.tree):
            if isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert)):
                roots.append(node.test)
            elif isinstance(node, (ast.For, ast.comprehension)):
                roots.append(node.iter)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _HOST_BUILTINS:
                roots += node.args
            elif isinstance(node, ast.Call) and takes_sizes(node.func):  # torch.empty(b, n), x.view(n, -1)
                roots += [*node.args, *(k.value for k in node.keywords)]
            elif isinstance(node, ast.Slice):
                roots += [bound for bound in (node.lower, node.upper, node.step) if bound is not None]
            elif isinstance(node, ast.FormattedValue):
                roots.append(node.value)
        return {found for root in roots for found in ast.walk(root)}

    def later_uses(self, name: str) -> list[ast.Name]:
        """Loads of ``name`` after the statement, in its function (or module)."""
        scope = self.function or self.tree
        end = self.statement.end_lineno or self.statement.lineno
        return [
            n
            for n in ast.walk(scope)
            if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) and n.lineno > end
        ]


def index_parts(node: ast.Subscript) -> list[ast.expr]:
    """A subscript's indices, a tuple index's parts each (``x[:, i]``: the slice and ``i``)."""
    return node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]


# calls whose arguments are sizes: a GPU value given as one is read to the host as a Python int
_SIZED_METHODS = {"topk", "kthvalue", "narrow", "repeat", "expand", "view", "reshape", "new_zeros", "new_ones",
                  "new_empty", "new_full"}  # fmt: skip
_SIZED_TORCH = {"arange", "zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm", "linspace", "Size"}


def takes_sizes(func: ast.expr) -> bool:
    """Whether a call's arguments are sizes: ``range``, ``torch.zeros`` and the like, ``x.view`` and the like."""
    if isinstance(func, ast.Name):
        return func.id == "range"
    if not isinstance(func, ast.Attribute):
        return False
    by_torch = isinstance(func.value, ast.Name) and func.value.id == "torch"
    return func.attr in (_SIZED_TORCH if by_torch else _SIZED_METHODS)


_BUILTINS = {"torch", "True", "False", "None"}
# builtins whose arguments the host reads (a tensor passed to them is read element by element, or refused)
_HOST_BUILTINS = {"range", "print", "zip", "enumerate", "len", "list", "tuple", "sorted", "min", "max"}


def _bound(node: ast.AST) -> set[str]:
    """Names a statement binds itself (not inside nested definitions)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    targets: list[ast.AST] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
        targets = [node.target]
    elif isinstance(node, (ast.With, ast.AsyncWith)):
        targets = [item.optional_vars for item in node.items if item.optional_vars is not None]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _header_nodes(node: ast.stmt) -> list[ast.AST]:
    if isinstance(node, (ast.If, ast.While)):
        return [node.test]
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return [node.target, node.iter]
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return [item.context_expr for item in node.items]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return []
    return [node]


def _strip_comment(text: str) -> str:
    return re.split(r"\s#", text, maxsplit=1)[0].rstrip()


def read_code(file: str, line: int, search: Iterable[Path] = ()) -> _Code | None:
    text = source_text(file, tuple(search)) if line > 0 else None
    if text is None:
        return None
    lines, tree = parsed(text)
    if tree is None or line > len(lines):
        return None
    chain: list[ast.AST] = [tree]
    body: list[ast.stmt] = tree.body
    while True:
        holding = [s for s in body if s.lineno <= line <= (s.end_lineno or s.lineno)]
        if not holding:
            break
        node = _syncing(holding, lines)
        chain.append(node)
        inner: list[ast.stmt] = []
        for field in ("body", "orelse", "finalbody", "handlers"):
            for child in getattr(node, field, []):
                inner.extend(child.body if isinstance(child, ast.ExceptHandler) else [child])
        if not any(s.lineno <= line <= (s.end_lineno or s.lineno) for s in inner):
            break
        body = inner
    if len(chain) < 2:
        return None
    return _Code(lines, tree, chain, line, text)


def _syncing(statements: list[ast.stmt], lines: list[str]) -> ast.stmt:
    """Of several statements on one line (``step(); torch.cuda.synchronize()``), the one that syncs: the last
    whose own text has a pattern (the first when none has)."""
    if len(statements) == 1:
        return statements[0]
    text = "\n".join(lines)  # (rare: several statements on one line)
    known = [s for s in statements if classify(ast.get_source_segment(text, s) or "")[0] != UNKNOWN]
    return known[-1] if known else statements[0]


@functools.lru_cache(maxsize=64)
def _encoded(text: str) -> tuple[bytes, list[int]]:
    """A file as UTF-8 and where each of its lines starts in it (ast's column offsets count bytes), once per
    version of its text."""
    encoded = [line.encode() for line in parsed(text)[0]]
    starts = [0]
    for raw in encoded:
        starts.append(starts[-1] + len(raw) + 1)
    return b"\n".join(encoded), starts


def _is_copy_read(node: ast.AST) -> ast.expr | None:
    """``x.cpu()`` / ``x.numpy()``: the ``x`` copied to the host, else None (said, not rewritten: the host
    tensor may be what the code needs)."""
    if (
        isinstance(node, ast.Call)
        and not node.args
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("cpu", "numpy")
    ):
        return node.func.value
    return None


def _is_read(node: ast.AST) -> ast.expr | None:
    """``x.item()`` / ``x.tolist()`` / ``float(x)`` / ``int(x)``: the ``x`` read, else None."""
    if (
        isinstance(node, ast.Call)
        and not node.args
        and not node.keywords
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("item", "tolist")
    ):
        return node.func.value
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("float", "int")
        and len(node.args) == 1
        and not node.keywords
    ):
        inner = _is_read(node.args[0])  # int(x.item()): x is what is read
        return node.args[0] if inner is None else inner
    return None


def _holds(tree: ast.AST, node: ast.AST) -> bool:
    return any(n is node for n in ast.walk(tree))


def _target(code: _Code) -> str | None:
    statement = code.statement
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
        return statement.targets[0].id
    return None


def _names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _bound_in(function: ast.AST | None) -> set[str]:
    if function is None:
        return set()
    return set().union(*(_bound(n) for n in ast.walk(function) if isinstance(n, ast.stmt) and n is not function))


def _calls_named(tree: ast.AST, name: str) -> list[ast.Call]:
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and (getattr(n.func, "id", None) == name or getattr(n.func, "attr", None) == name)
    ]


def _parses(text: str) -> bool:
    return snippet(text) is not None


def _same_branches_merged(text: str) -> str:
    """A rewrite that made both branches of a one-line conditional alike (``x.item() if a else x.detach()``,
    the read rewritten) with the condition gone: ``x.detach()``."""
    dedented = textwrap.dedent(text)
    tree = snippet(dedented)
    if tree is None:  # (a compound statement's header alone)
        return text
    alike = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.IfExp)
        and node.lineno == node.end_lineno
        and ast.dump(node.body) == ast.dump(node.orelse)
    ]
    if not alike:
        return text
    outer = [n for n in alike if not any(o is not n and _inside(n, o) for o in alike)]
    lines = [line.encode() for line in dedented.split("\n")]
    for node in sorted(outer, key=lambda n: (n.lineno, n.col_offset), reverse=True):
        line = lines[node.lineno - 1]
        body = line[node.body.col_offset : node.body.end_col_offset]
        lines[node.lineno - 1] = line[: node.col_offset] + body + line[node.end_col_offset :]
    first, first_dedented = next((a, b) for a, b in zip(text.split("\n"), dedented.split("\n")) if a.strip())
    margin = first[: len(first) - len(first_dedented)]
    return "\n".join(margin + line.decode() if line else "" for line in lines)


def _inside(node: ast.expr, other: ast.expr) -> bool:
    """Whether one-line ``node`` lies within one-line ``other``."""
    within = other.col_offset <= node.col_offset and (node.end_col_offset or 0) <= (other.end_col_offset or 0)
    return node.lineno == other.lineno and within
