"""What a line's text cannot tell and its function can: an index named by a literal or a mask made there,
a module's _apply(fn)."""

from __future__ import annotations

import ast
from collections.abc import Set as AbstractSet

from nsync.stages.advice.code import _HOST_BUILTINS, _Code, _names_in, index_parts
from nsync.stages.advice.copies import _host_factory, tensor_calls
from nsync.stages.advice.flow import grown
from nsync.stages.advice.indices import (
    _annotated_tensor,
    _index_parts,
    _list_of_lists_index,
    _matched_index,
    _named_literal_index,
)
from nsync.stages.advice.patterns import INDEX, Pattern, entry
from nsync.stages.advice.values import (
    _annotations,
    _bindings,
    _cpu_tensor_into_slice,
    _gpu_value_as_size,
    _host_tensor_into_slice,
    _parameter_as_size,
    _python_number_into_tensor,
    _truth_taken,
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
MATCHED_ON_THE_HOST = Pattern(
    "copy between host and device",
    "false",
    None,
    "a matcher's indices made on the host (linear_sum_assignment) are copied to the GPU each time they index, and "
    "the host waits: move them to the GPU once, where the matcher returns them, and index the whole batch at once",
    "move the indices to the GPU once",
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
        (_list_of_lists_index, entry(INDEX)),
        (_mask_named_index, entry("dynamic shape (a mask or nonzero)")),
        (_applies_module_fn, entry("copy between host and device")),
        (_index_made_on_the_host, entry("host-to-device copy of a Python value")),
        (_scalar_tensor_index, entry("value read")),
        (_matched_index, MATCHED_ON_THE_HOST),
        (_gpu_value_as_size, GPU_SIZE),
        (_parameter_as_size, GPU_SIZE),
        (_cpu_tensor_into_slice, CPU_INTO_SLICE),
        (_python_number_into_tensor, entry("host-to-device copy of a Python value")),
        (_host_tensor_into_slice, entry("host-to-device copy of a Python value")),
        (_truth_taken, entry("control flow on a GPU value")),
    ]
    return next((pattern for check, pattern in checks if check(code)), None)


def _index_made_on_the_host(code: _Code) -> bool:
    """Whether the line indexes with a factory's tensor made without a device (``x[:, torch.arange(n)]``): it is
    made on the host and copied to the GPU."""
    return any(_host_factory(part) for part in _index_parts(code))


def tensor_assigned_through_a_mask(code: _Code) -> bool:
    """Whether the line's statement assigns a tensor it makes into a tensor through a boolean mask
    (``temp[mask1] = torch.tensor(c, device=d)``): the mask syncs (its nonzero), and pinning the value leaves it
    (torchaudio's overdrive on the H100). Not a Python number (``x[mask] = 0.0``): PyTorch fills through the mask
    there, and the number's copy is the sync."""
    statement = code.statement
    if not (isinstance(statement, ast.Assign) and isinstance(statement.targets[0], ast.Subscript)):
        return False
    if not tensor_calls(code, [statement.value]):
        return False
    masks = _masks(code)
    return any(_boolean(part, masks) for part in index_parts(statement.targets[0]))


def _masks(code: _Code) -> frozenset[str]:
    """The names the line's function binds to boolean expressions, or to mixes of such names
    (``cond = cond_a & cond_b``)."""
    return grown(_bindings(code), lambda _name, value, masks: _boolean(value, masks))


def _mask_named_index(code: _Code) -> bool:
    """Whether the line indexes with a name its function binds to a boolean expression (or its negation,
    ``x[~keep]``), through names bound to mixes of such names (``cond = cond_a & cond_b``)."""
    masks = _masks(code)
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
    call that returns one (``torch.isnan``, ``x.eq(y)``, ``.bool()``, ``torch.tensor(m, dtype=torch.bool)``), a name
    in ``masks`` or a part of one."""
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
    if not isinstance(node, ast.Call):
        return False
    boolean_dtype = any(k.arg == "dtype" and getattr(k.value, "attr", "") == "bool" for k in node.keywords)
    return boolean_dtype or getattr(node.func, "attr", getattr(node.func, "id", "")) in _BOOLEAN_CALLS


# calls that give a tensor of one element: an index by it is read to the host (``x[best]``)
_ARG_CALLS = {"argmax", "argmin"}
# calls that give a tensor (not a Python value or a shape), so that ``name[0]`` of it is a 0-dim tensor
_SIZES = {"size", "tolist", "item", "numel", "dim", "keys", "items", "values", "split", "chunk", "unbind"}


def _scalar_tensor_index(code: _Code) -> bool:
    """Whether the line indexes with a 0-dim GPU tensor, which PyTorch reads to the host: a name bound to an
    ``argmax``/``argmin`` of a whole tensor (no ``dim``, or of a flattened one) or to one element of what a
    function gives for tensors (``idx = _lexargmax(rows)[0]``), or ``name[0]`` of a name bound to a tensor
    expression (``groups = counts.cumsum(0) - 1`` then ``x[groups[0]]``)."""
    bound = _bindings(code)
    extremes = _extreme_indices(code)
    for part in _index_parts(code):
        if isinstance(part, ast.Name) and (
            _whole_arg(bound.get(part.id)) or part.id in extremes or _element_of_result(bound.get(part.id), code)
        ):
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


def _element_of_result(value: ast.expr | None, code: _Code) -> bool:
    """Whether ``value`` is one element (``[0]``) of what a function of the program gives for a tensor
    (``_lexargmax(rows)[0]``, ``rows`` a tensor in the function): not a builtin's (``sorted(xs)[0]``)."""
    if not (isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Constant)):
        return False
    call = value.value
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)) or call.func.id in _HOST_BUILTINS:
        return False
    tensors = _tensor_names(code)
    return isinstance(value.slice.value, int) and any(_names_in(arg) & tensors for arg in call.args)


def _tensor_names(code: _Code) -> frozenset[str]:
    """The names the line's function binds to tensors: parameters annotated ``Tensor``, names bound to a tensor
    expression (``torch.vstack(...).T``), or to a part of such a name (``rows = table[table[:, 1] > 0]``)."""
    bound = _bindings(code)
    notes = {} if code.function is None else _annotations(code.function)
    annotated = {name for name, note in notes.items() if _annotated_tensor(note)}
    return grown(
        bound,
        lambda _name, value, found: (
            _tensor_expression(value)
            or (isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name) and value.value.id in found)
        ),
        annotated,
    )


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
