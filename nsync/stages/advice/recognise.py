"""What a line's text cannot tell and its function can: an index named by a literal or a mask made there,
a module's _apply(fn)."""

from __future__ import annotations

import ast
from collections.abc import Set as AbstractSet

from nsync.stages.advice.code import _Code, _names_in, index_parts
from nsync.stages.advice.copies import _host_factory
from nsync.stages.advice.flow import grown
from nsync.stages.advice.patterns import INDEX, Pattern, entry
from nsync.stages.advice.values import (
    _bindings,
    _cpu_tensor_into_slice,
    _gpu_value_as_size,
    _parameter_as_size,
    _python_number_into_tensor,
    _truth_taken,
)


def _literal_index(node: ast.AST) -> bool:
    return (
        isinstance(node, (ast.Tuple, ast.List))
        and bool(node.elts)
        and all(
            (isinstance(e, ast.Constant) and isinstance(e.value, int) and not isinstance(e.value, bool))
            or (isinstance(e, ast.UnaryOp) and isinstance(e.operand, ast.Constant))
            for e in node.elts
        )
    )


# what a function tells that a line's text cannot, where the text's entry would advise wrongly
GPU_SIZE = Pattern(
    "value read",
    "false",
    None,
    "a GPU value given as a size or a slice's bound is read to the host each time: use a bound the host knows "
    "(the largest it can be) and mask the rest on the GPU, or read it once for many steps",
    "use a bound the host knows",
)
CPU_INTO_SLICE = Pattern(
    "copy between host and device",
    "false",
    None,
    "a CPU tensor assigned into a GPU tensor is copied from pageable memory, and the host waits: move it to the "
    "GPU once, before the loop, or pin it and copy with non_blocking=True",
    "move it to the GPU first",
)


def _from_function(code: _Code) -> Pattern | None:
    """The pattern of a line whose text alone says nothing, read in its function: an index named by a tuple
    or list of integers (``x[:, COLS]``, a ``list[int]`` parameter), an index named by a boolean mask made there
    (``idx = ~torch.isnan(r)`` then ``r[idx]``), a module's ``_apply(fn)`` moving its state (``.to(device)`` calls
    it), a GPU scalar used as a size or a slice's bound, a CPU tensor assigned into a slice, or the truth of a
    value taken by ``and``/``or``/``not``."""
    checks = [
        (_named_literal_index, entry(INDEX)),
        (_mask_named_index, entry("dynamic shape (a mask or nonzero)")),
        (_applies_module_fn, entry("copy between host and device")),
        (_index_made_on_the_host, entry("host-to-device copy of a Python value")),
        (_scalar_tensor_index, entry("value read")),
        (_gpu_value_as_size, GPU_SIZE),
        (_parameter_as_size, GPU_SIZE),
        (_cpu_tensor_into_slice, CPU_INTO_SLICE),
        (_python_number_into_tensor, entry("host-to-device copy of a Python value")),
        (_truth_taken, entry("control flow on a GPU value")),
    ]
    return next((pattern for check, pattern in checks if check(code)), None)


def _index_parts(code: _Code) -> list[ast.expr]:
    """The indices of the line's subscripts, a tuple index's parts each."""
    return [part for node in code.on_line() if isinstance(node, ast.Subscript) for part in index_parts(node)]


def _index_made_on_the_host(code: _Code) -> bool:
    """Whether the line indexes with a factory's tensor made without a device (``x[:, torch.arange(n)]``): it is
    made on the host and copied to the GPU."""
    return any(_host_factory(part) for part in _index_parts(code))


def _mask_named_index(code: _Code) -> bool:
    """Whether the line indexes with a name its function binds to a boolean expression (or its negation,
    ``x[~keep]``), through names bound to mixes of such names (``cond = cond_a & cond_b``)."""
    masks = grown(_bindings(code), lambda _name, value, masks: _boolean(value, masks))
    return any(_boolean(part, masks) for part in _index_parts(code))


_BOOLEAN_CALLS = {
    "isnan",
    "isinf",
    "isfinite",
    "isin",
    "isclose",
    "isneginf",
    "isposinf",
    "signbit",
    "logical_and",
    "logical_or",
    "logical_not",
    "logical_xor",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "bool",
    "all",
    "any",
}  # fmt: skip  (a mask's all/any along a dimension: ``(Y > ref).all(dim=-1)``)


def _boolean(node: ast.AST, masks: AbstractSet[str] = frozenset()) -> bool:
    """Whether an expression makes a boolean tensor: a comparison, a negation or a bitwise mix of them, a
    call that returns one (``torch.isnan``, ``x.eq(y)``, ``.bool()``), a name in ``masks`` or a part of one."""
    if isinstance(node, ast.Compare):
        return True
    if isinstance(node, ast.Name):
        return node.id in masks
    if isinstance(node, ast.Subscript):  # a row of a mask (``Y[i, mask[i]]``)
        return _boolean(node.value, masks)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):  # ``x[~keep]``: a tensor's ~ is a mask's
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return _boolean(node.operand, masks)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
        return _boolean(node.left, masks) or _boolean(node.right, masks)
    return isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in _BOOLEAN_CALLS


# calls that give a tensor of one element: an index by it is read to the host (``x[best]``)
_ARG_CALLS = {"argmax", "argmin"}
# calls that give a tensor (not a Python value or a shape), so that ``name[0]`` of it is a 0-dim tensor
_SIZES = {"size", "tolist", "item", "numel", "dim", "keys", "items", "values", "split", "chunk", "unbind"}


def _scalar_tensor_index(code: _Code) -> bool:
    """Whether the line indexes with a 0-dim GPU tensor, which PyTorch reads to the host: a name bound to an
    ``argmax``/``argmin`` of a whole tensor (no ``dim``, or of a flattened one), or ``name[0]`` of a name bound
    to a tensor expression (``groups = counts.cumsum(0) - 1`` then ``x[groups[0]]``)."""
    bound = _bindings(code)
    extremes = _extreme_indices(code)
    for part in _index_parts(code):
        if isinstance(part, ast.Name) and (_whole_arg(bound.get(part.id)) or part.id in extremes):
            return True
        if (
            isinstance(part, ast.Subscript)
            and isinstance(part.value, ast.Name)
            and isinstance(part.slice, ast.Constant)
            and isinstance(part.slice.value, int)
            and _tensor_expression(bound.get(part.value.id))
        ):
            return True
    return False


def _extreme_indices(code: _Code) -> set[str]:
    """Names bound to the indices of a max or min along a dimension (``value, i = torch.max(x.sum(0), 0)``): an
    index by one on a line that syncs is a 0-dim tensor (a longer one would not sync there)."""
    return {
        node.targets[0].elts[1].id
        for node in ast.walk(code.function or code.tree)
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Tuple)
        and len(node.targets[0].elts) == 2
        and isinstance(node.targets[0].elts[1], ast.Name)
        and isinstance(node.value, ast.Call)
        and getattr(node.value.func, "attr", "") in ("max", "min")
    }


def _whole_arg(value: ast.expr | None) -> bool:
    """Whether ``value`` is ``torch.argmax(x)`` / ``x.argmax()`` with no dimension, or of a flattened ``x``."""
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _ARG_CALLS):
        return False
    by_torch = isinstance(value.func.value, ast.Name) and value.func.value.id == "torch"
    operand = (value.args[0] if value.args else None) if by_torch else value.func.value
    has_dim = any(k.arg == "dim" for k in value.keywords) or len(value.args) > int(by_torch)
    flattened = isinstance(operand, ast.Call) and getattr(operand.func, "attr", "") in ("view", "reshape", "flatten")
    return not has_dim or flattened


def _tensor_expression(value: ast.expr | None) -> bool:
    """Whether ``value`` is built by a tensor method or ``torch.`` call (and not a size, list or Python value)."""
    if value is None or isinstance(value, (ast.List, ast.Tuple, ast.Constant, ast.ListComp)):
        return False
    calls = [n for n in ast.walk(value) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
    return bool(calls) and not any(c.func.attr in _SIZES for c in calls)  # type: ignore[attr-defined]


def _applies_module_fn(code: _Code) -> bool:
    """Whether the line is a module's ``_apply(fn)`` (what ``.to()``, ``.cuda()``, ``.cpu()`` run) calling
    ``fn`` on its state, or handing it on."""
    function = code.function
    if function is None or function.name != "_apply":
        return False
    parameters = [a.arg for a in function.args.args if a.arg not in ("self", "cls")]
    if not parameters:
        return False
    fn = parameters[0]
    return any(
        isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Name) and node.func.id == fn)
            or (getattr(node.func, "attr", "") == "_apply" and any(_names_in(a) == {fn} for a in node.args))
        )
        for node in code.on_line()
    )


def _named_literal_index(code: _Code) -> bool:
    """Whether the line indexes with a name or ``self`` attribute bound to a tuple or list of integers."""
    names = _literal_names(code)
    return any(index_key(part) in names for part in _index_parts(code))


def index_key(node: ast.AST) -> str | None:
    """What names an index that may hold a literal: ``COLS``, or ``self.cols`` (set in the class)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return f"self.{node.attr}"
    return None


def _kind_of(part: ast.AST, names: dict[str, str]) -> str:
    key = index_key(part)
    if key is not None:
        return names.get(key, "list")
    return "tuple" if isinstance(part, ast.Tuple) else "list"


def _literal_kind(value: ast.AST, found: dict[str, str]) -> str | None:
    """tuple|list where ``value`` is a literal index, a name bound to one, or a conditional choosing between
    such (``COLS if healthy else (0, 2)``); None otherwise."""
    if _literal_index(value):
        return "tuple" if isinstance(value, ast.Tuple) else "list"
    key = index_key(value)
    if key is not None:
        return found.get(key)
    if isinstance(value, ast.IfExp):
        return _literal_kind(value.body, found) or _literal_kind(value.orelse, found)
    if isinstance(value, ast.ListComp) or (
        isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in ("list", "sorted")
    ):
        return "list"  # a list built at run time: indexing with it copies it to the GPU
    return None


def _annotated_kind(annotation: ast.expr | None) -> str | None:
    """tuple|list where a parameter is annotated a sequence of ints (``permutation: list[int]``)."""
    if not (isinstance(annotation, ast.Subscript) and "int" in _names_in(annotation.slice)):
        return None
    container = getattr(annotation.value, "attr", getattr(annotation.value, "id", ""))
    kinds = {"list": "list", "List": "list", "Sequence": "list", "tuple": "tuple", "Tuple": "tuple"}
    return kinds.get(container)


def _literal_names(code: _Code) -> dict[str, str]:
    """Names and ``self`` attributes bound to a tuple or list of integers (tuple|list), where the line can see
    them: at the top level, in its function (its parameters' defaults too), and anywhere in its class (its
    body's names and the ``self.X =`` of its methods), through conditional assignments and other such names."""
    found: dict[str, str] = {}
    function = code.function
    scopes: list[ast.AST] = [code.tree] + ([function] if function else [])
    for scope in scopes:
        for node in getattr(scope, "body", []):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                kind = _literal_kind(node.value, found)
                if kind:
                    found[node.targets[0].id] = kind
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):  # ``kept: List[int] = []``
                kind = _annotated_kind(node.annotation)
                if kind:
                    found[node.target.id] = kind
    if function is not None:
        arguments = function.args
        positional = arguments.posonlyargs + arguments.args
        pairs = list(zip(positional[len(positional) - len(arguments.defaults) :], arguments.defaults))
        pairs += [(a, d) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults) if d is not None]
        found.update({a.arg: kind for a, d in pairs if (kind := _literal_kind(d, found))})
        annotated = positional + arguments.kwonlyargs
        found.update({a.arg: kind for a in annotated if (kind := _annotated_kind(a.annotation))})
    owner = next((node for node in reversed(code.chain) if isinstance(node, ast.ClassDef)), None)
    if owner is not None:
        for node in ast.walk(owner):
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                in_body = isinstance(target, ast.Name) and node in owner.body
                key = f"self.{target.id}" if isinstance(target, ast.Name) and in_body else index_key(target)
                kind = _literal_kind(node.value, found)
                if key and key.startswith("self.") and kind:
                    found[key] = kind
    return found
