"""Which names hold a one-element GPU tensor (a whole reduction, ``counts.max()``) in a function: bound there, or
brought in from the module's other functions, unpacked from what one returns or passed as an argument (Longformer
computes its count of global tokens in one method and gives it as a size in three others)."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from functools import lru_cache
from typing import TypeVar

# reductions to one value when given no dimension (``counts.max()``, ``mask.sum()``)
_REDUCTIONS = {"max", "min", "sum", "amax", "amin", "argmax", "argmin", "count_nonzero", "prod"}
_NOT_TENSORS = {"math", "np", "numpy", "statistics", "builtins"}
_Function = ast.FunctionDef | ast.AsyncFunctionDef
V = TypeVar("V")


def bindings_in(scope: ast.AST) -> dict[str, ast.expr]:
    """The value each plain name is bound to in ``scope`` (the last in the source where there are several:
    ``m = torch.ones(...)`` in an ``if``, then ``m = m & keep``)."""
    assigns = sorted(
        (node for node in ast.walk(scope) if isinstance(node, ast.Assign)),
        key=lambda node: (node.lineno, node.col_offset),
    )
    return {target.id: node.value for node in assigns for target in node.targets if isinstance(target, ast.Name)}


# calls whose result is indexed to one element by this many constant subscripts (``torch.where(m)[0][-1]``: a
# tuple of 1-D tensors; ``counts.cumsum(0)[-1]``)
_INDEXED_TO_ONE = {"where": 2, "nonzero": 2, "argwhere": 2, "sort": 2, "topk": 2, "cumsum": 1, "argsort": 1,
                   "searchsorted": 1}  # fmt: skip


def gpu_scalar(value: ast.AST, scalars: AbstractSet[str]) -> bool:
    """Whether ``value`` is a one-element GPU tensor: a whole reduction (``x.sum(dim=1).max()``,
    ``torch.max(x)``), one element of an index tensor (``torch.where(m)[0][-1]``), arithmetic on one, or a name in
    ``scalars``."""
    if isinstance(value, ast.Name):
        return value.id in scalars
    if isinstance(value, ast.BinOp):
        return gpu_scalar(value.left, scalars) or gpu_scalar(value.right, scalars)
    if isinstance(value, ast.Subscript):
        return _element_of_index(value)
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _REDUCTIONS):
        return False
    receiver = value.func.value
    if isinstance(receiver, ast.Name) and receiver.id in _NOT_TENSORS:
        return False
    by_torch = isinstance(receiver, ast.Name) and receiver.id == "torch"
    has_dim = any(k.arg in ("dim", "axis") for k in value.keywords) or len(value.args) > int(by_torch)
    return not has_dim


def _element_of_index(value: ast.Subscript) -> bool:
    """Whether ``value`` takes one element of an index tensor by constant subscripts (``torch.where(m)[0][-1]``)."""
    depth: int = 0
    node: ast.expr = value
    while isinstance(node, ast.Subscript) and _constant_int(node.slice):
        depth, node = depth + 1, node.value
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    receiver = node.func.value
    if isinstance(receiver, ast.Name) and receiver.id in _NOT_TENSORS:  # ``np.where(m)[0][-1]``: the host's
        return False
    return depth == _INDEXED_TO_ONE.get(node.func.attr)


def _constant_int(node: ast.expr) -> bool:
    """``0``, ``-1``: an integer constant, negated or not."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool)


@lru_cache(maxsize=4096)  # (scope and tree hash by identity: one parse of a file serves all its call sites)
def scalars_in(scope: ast.AST, tree: ast.Module, depth: int = 2) -> frozenset[str]:
    """The names ``scope`` (a function, or the module) binds to GPU scalars, through the module's other functions
    ``depth`` calls away at most: unpacked from a module function's result, or given to a parameter by a caller."""
    seeds = _brought_in(scope, tree, depth) if depth > 0 and isinstance(scope, _Function) else set()
    return grown(bindings_in(scope), lambda _name, value, scalars: gpu_scalar(value, scalars), seeds)


def grown(
    values: Mapping[str, V], holds: Callable[[str, V, frozenset[str]], bool], seeds: Iterable[str] = ()
) -> frozenset[str]:
    """The names whose values hold, given the names found so far (a fixed point: ``c = a & b`` is a mask once
    ``a`` and ``b`` are)."""
    found = frozenset(seeds)
    while True:
        more = {name for name, value in values.items() if name not in found and holds(name, value, found)}
        if not more:
            return found
        found |= more


@lru_cache(maxsize=16)
def _functions(tree: ast.Module) -> dict[str, list[_Function]]:
    """The module's functions and methods by name."""
    by_name: dict[str, list[_Function]] = {}
    for node in ast.walk(tree):
        if isinstance(node, _Function):
            by_name.setdefault(node.name, []).append(node)
    return by_name


@lru_cache(maxsize=16)
def _calls(tree: ast.Module) -> dict[str, list[tuple[_Function, ast.Call]]]:
    """Each call in the module's functions, by the name called, with the function it is in."""
    by_name: dict[str, list[tuple[_Function, ast.Call]]] = {}
    for functions in _functions(tree).values():
        for caller in functions:
            for node in ast.walk(caller):
                if isinstance(node, ast.Call):
                    by_name.setdefault(_called_name(node), []).append((caller, node))
    return by_name


def _brought_in(function: _Function, tree: ast.Module, depth: int) -> set[str]:
    """The names ``function`` gets holding GPU scalars from the module's other functions."""
    by_name = _functions(tree)
    found: set[str] = set()
    for node in ast.walk(function):  # ``(n, idx) = self._count(x)``, where _count returns ``(x.max(), ...)``
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            called = by_name.get(_called_name(node.value), [])
            places = {p for callee in called for p in _scalar_returns(callee, tree, depth - 1)}
            for target in node.targets:
                if isinstance(target, ast.Name) and -1 in places:
                    found.add(target.id)
                elif isinstance(target, ast.Tuple):
                    found |= {e.id for k, e in enumerate(target.elts) if k in places and isinstance(e, ast.Name)}
    return found | _passed_scalars(function, tree, depth)


def _called_name(call: ast.Call) -> str:
    return getattr(call.func, "attr", getattr(call.func, "id", ""))


def _scalar_returns(function: _Function, tree: ast.Module, depth: int) -> set[int]:
    """Where ``function``'s results hold a GPU scalar: -1 for a whole result, else the place in a tuple."""
    scalars = scalars_in(function, tree, depth)
    places: set[int] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Return) and node.value is not None:
            if gpu_scalar(node.value, scalars):
                places.add(-1)
            elif isinstance(node.value, ast.Tuple):
                places |= {k for k, e in enumerate(node.value.elts) if gpu_scalar(e, scalars)}
    return places


def _passed_scalars(function: _Function, tree: ast.Module, depth: int) -> set[str]:
    """``function``'s parameters that a caller in the module gives a GPU scalar (by keyword or by place)."""
    positional = [a.arg for a in function.args.posonlyargs + function.args.args]
    method = bool(positional) and positional[0] in ("self", "cls")
    found: set[str] = set()
    for caller, call in _calls(tree).get(function.name, []):
        if caller is not function:
            scalars = scalars_in(caller, tree, depth - 1)
            skip = int(method and isinstance(call.func, ast.Attribute))  # ``self.f(a)``: a is the second parameter
            given = {k.arg: k.value for k in call.keywords if k.arg} | {
                positional[k + skip]: a for k, a in enumerate(call.args) if k + skip < len(positional)
            }
            found |= {name for name, value in given.items() if gpu_scalar(value, scalars)}
    return found
