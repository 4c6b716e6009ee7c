"""The line a torch.profiler frame was at. Kineto names each Python frame by the line it was entered at
(``train.py(12): step``, the function's first line), never by the line it was on when it called further in, which
is the line nsys's backtraces give and the line a fix is written at. Here that line is found in the frame's
function, in the source: the one line whose call names the frame's callee (the C function inside it, such as
``.item()``, or the next Python frame in, through wrappers), or one statement's first such line (a log line of
five ``.item()`` reads over three lines, as nsys's statement sites have it). Where neither holds, the frame keeps
its function's first line."""

from __future__ import annotations

import ast
import re
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

from nsync.code import find_source, parsed, source_text
from nsync.load.model import Frame

C_FUNCTION = re.compile(r"^<built-in (?:method|function) (?P<name>[\w.]+)")
INWARD_FRAMES = 4  # how far in a frame's callee is looked for (wrappers, decorators)
LIBRARY_PREFIXES = ("site-packages/", "<stdlib>/")
_OWN_FRAME = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.GeneratorExp)
_SCOPE_OF = {"<lambda>": ast.Lambda, "<genexpr>": ast.GeneratorExp, "<listcomp>": ast.ListComp}
# what the innermost frame does when no C function is seen: an index list or mask, a number read by float()
_READS = ("float", "int", "bool")

Calls = dict[str, list[int]]  # callee name -> the scope's lines that call it (sorted, distinct)
Spans = list[tuple[int, int]]  # the first and last lines of each of the scope's own statements
Scope = tuple[Calls, list[int], Spans, Spans]  # calls, reads, statements, loops


def c_function(name: str) -> str | None:
    """The function a Kineto C-function event names (``<built-in method item of Tensor object at 0x..>``)."""
    found = C_FUNCTION.match(name)
    return found["name"].rsplit(".", 1)[-1] if found else None


class FrameLines:
    """Places frames on their lines, reading each file once; counts the program's own frames it could not read."""

    def __init__(self, search: list[Path]) -> None:
        self._search = search
        self._scopes: dict[tuple[str, str, int], Scope | None] = {}
        self.unread: set[str] = set()  # the program's own files named by frames and not readable here
        self.read: set[str] = set()

    def placed(self, chain: list[Frame], via: list[str | None], known: list[int] | None = None) -> tuple[Frame, ...]:
        """``chain`` (innermost first) with each frame's line found where one line calls what is inside it;
        ``via``: per frame, the C function it was in when it called inward (``.item()``, ``print``), if the
        trace shows one; ``known``: per frame, its line where the order of its calls gave it (-1: not)."""
        out = []
        for depth, frame in enumerate(chain):
            if known is not None and known[depth] >= 0:
                out.append(frame._replace(line=known[depth]))
                continue
            callees = [via[depth]]
            for inner in range(depth - 1, max(-1, depth - 1 - INWARD_FRAMES), -1):
                callees += [chain[inner].function, via[inner]]
            line = self._line(frame, [c for c in callees if c], innermost=depth == 0)
            out.append(frame if line is None else frame._replace(line=line))
        return tuple(out)

    def statement_lines(self, frame: Frame, callee: str) -> list[int]:
        """The first line of each of the frame's statements that call ``callee`` (sorted; none where its source
        is not read): several where a loop reads on two lines, each of its calls then on one of them."""
        scope = self._scope(frame)
        if scope is None or callee not in scope[0]:
            return []
        return _statement_firsts(scope[0][callee], scope[2])

    def _line(self, frame: Frame, callees: list[str], innermost: bool) -> int | None:
        scope = self._scope(frame)
        if scope is None:
            return None
        calls, reads, spans, loops = scope
        for name in callees:
            lines = calls.get(name)
            if lines:
                return lines[0] if _one_statement(lines, spans) else None
        if not (innermost and reads):
            return None
        if not _one_statement(reads, spans):  # the reads of the loop the frame was in when the profiler started
            reads = _in_loop_at(frame.line, reads, loops)  # (a ``<module>`` frame's line: a step's ``float(loss)``)
        return reads[0] if reads and _one_statement(reads, spans) else None

    def _scope(self, frame: Frame) -> Scope | None:
        key = (frame.file, frame.function, frame.line)
        if key not in self._scopes:
            self._scopes[key] = self._read_scope(frame)
        return self._scopes[key]

    def _read_scope(self, frame: Frame) -> Scope | None:
        text = self._text(frame.file)
        if text is None:
            return None
        tree = parsed(text)[1]
        if tree is None:
            return None
        node = _scope_node(tree, frame.function, frame.line)
        return None if node is None else _calls_in(node)

    def _text(self, file: str) -> str | None:
        if file.startswith(LIBRARY_PREFIXES):
            found = _installed(file)
            return None if found is None else source_text(str(found))
        if file.startswith("<"):
            return None
        text = source_text(file, self._search) if find_source(file, self._search) else None
        (self.read if text is not None else self.unread).add(file)
        return text


def _installed(file: str) -> Path | None:
    """A library's file as installed here (``site-packages/torch/...`` on sys.path, ``<stdlib>/...``)."""
    prefix, rest = file.split("/", 1)
    folders = [sysconfig.get_paths()["stdlib"]] if prefix == "<stdlib>" else sys.path
    return next((Path(f) / rest for f in folders if f and (Path(f) / rest).is_file()), None)


def _scope_node(tree: ast.Module, function: str, line: int) -> ast.AST | None:
    """The function (or lambda, generator expression, module) a frame ran: named so, and holding ``line``
    (its first line, or the line it was at when the profiler started)."""
    if function == "<module>":
        return tree
    kind = _SCOPE_OF.get(function)
    found = [
        node
        for node in ast.walk(tree)
        if (isinstance(node, kind) if kind else _is_def(node, function)) and _start(node) <= line <= _end(node)
    ]
    return max(found, key=_start, default=None)


def _is_def(node: ast.AST, function: str) -> bool:
    return isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == function


def _start(node: ast.AST) -> int:
    decorators = getattr(node, "decorator_list", None) or []
    return min([getattr(node, "lineno", 0), *(d.lineno for d in decorators)])


def _end(node: ast.AST) -> int:
    end: int | None = getattr(node, "end_lineno", None)
    return end if end is not None else _start(node)


def _innermost(spans: Spans, line: int) -> tuple[int, int] | None:
    """The shortest of ``spans`` holding ``line``."""
    return min((s for s in spans if s[0] <= line <= s[1]), key=lambda s: s[1] - s[0], default=None)


def _statement_firsts(lines: list[int], spans: Spans) -> list[int]:
    """The first of the (sorted) ``lines`` in each statement holding some: the innermost of the scope's
    statements holding each line (a line no statement holds is one of its own)."""
    first: dict[tuple[int, int], int] = {}
    for line in lines:
        first.setdefault(_innermost(spans, line) or (line, line), line)
    return sorted(set(first.values()))


def _one_statement(lines: list[int], spans: Spans) -> bool:
    """Whether the lines all lie in one statement."""
    return len(_statement_firsts(lines, spans)) == 1


def _in_loop_at(line: int, reads: list[int], loops: Spans) -> list[int]:
    """The ``reads`` inside the innermost loop holding ``line`` (none where no loop holds it)."""
    loop = _innermost(loops, line)
    return [] if loop is None else [r for r in reads if loop[0] <= r <= loop[1]]


def _calls_in(scope: ast.AST) -> Scope:
    """The lines of the scope's own code (not of the functions or generator expressions it defines) that call
    each name, those that read a tensor without a C call (an index list or mask, float()/int()/bool()), and
    the spans of its statements and of its loops."""
    calls: dict[str, set[int]] = {}
    reads: set[int] = set()
    spans: Spans = []
    loops: Spans = []
    for node in _own_nodes(scope):
        if isinstance(node, ast.stmt):
            spans.append((node.lineno, _end(node)))
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            loops.append((node.lineno, _end(node)))
        if isinstance(node, ast.Call):
            name = _callee(node.func)
            if name:
                calls.setdefault(name, set()).add(node.lineno)
            if name in _READS:
                reads.add(node.lineno)
        elif isinstance(node, ast.Subscript) and _host_index(node.slice):
            reads.add(node.lineno)
        elif isinstance(node, (*_OWN_FRAME, ast.ListComp)):
            name = next((n for n, kind in _SCOPE_OF.items() if isinstance(node, kind)), None)
            if name:  # a comprehension's own frame (Python < 3.12) or a generator expression's
                calls.setdefault(name, set()).add(node.lineno)
    return {name: sorted(lines) for name, lines in calls.items()}, sorted(reads), spans, loops


def _own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The scope's nodes, with the nested function, class, lambda and generator-expression nodes but not their
    insides (list comprehensions are entered: inlined since Python 3.12)."""
    pending = list(ast.iter_child_nodes(scope))
    while pending:
        node = pending.pop()
        yield node
        if not isinstance(node, _OWN_FRAME):
            pending.extend(ast.iter_child_nodes(node))


def _callee(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _host_index(index: ast.expr) -> bool:
    """An index that syncs: a list or tuple PyTorch copies from the host (``t[:, (0, 2)]``), or a mask whose
    count the host must read (``t[t > 0]``)."""
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    mask = (ast.Compare, ast.BoolOp)
    return isinstance(index, ast.List) or any(isinstance(p, (ast.Tuple, ast.List, *mask)) for p in parts)
