"""What a value on the syncing line is, read from its function: a GPU scalar given as a size, a CPU tensor
assigned into a slice, a truth taken by ``and``/``or``/``not``, a comparison of tensors choosing a value."""

from __future__ import annotations

import ast
from collections.abc import Set as AbstractSet

from nsync.stages.advice.code import _Code, index_parts, takes_sizes
from nsync.stages.advice.copies import tensor_calls
from nsync.stages.advice.flow import bindings_in, grown, scalars_in


def _bindings(code: _Code) -> dict[str, ast.expr]:
    """The value each plain name is bound to in the line's function (the last in the source)."""
    return bindings_in(code.function or code.tree)


def _gpu_value_as_size(code: _Code) -> bool:
    """Whether the line gives a name bound to a GPU scalar as a size (``x.topk(k=k)``, ``torch.arange(n)``) or a
    slice's bound (``x[:, :length]``), which PyTorch reads to the host as a Python int. The name may be bound in
    another function of the module and passed on (``scalars_in``)."""
    scalars = scalars_in(code.function or code.tree, code.tree)
    if not scalars:
        return False
    for node in code.on_line():
        if isinstance(node, ast.Slice):
            sizes: list[ast.AST] = [b for b in (node.lower, node.upper, node.step) if b is not None]
        elif isinstance(node, ast.Call) and takes_sizes(node.func):
            sizes = [*node.args, *(k.value for k in node.keywords)]
        else:
            continue
        if any(isinstance(n, ast.Name) and n.id in scalars for size in sizes for n in ast.walk(size)):
            return True
    return False


# calls that never sync by themselves, beside the size-taking ones
_SHAPING = {"contiguous", "transpose", "permute", "clone", "unsqueeze", "squeeze", "flatten", "size", "dim"}


def _parameter_as_size(code: _Code) -> bool:
    """Whether the line, made only of calls that never sync by themselves, gives a parameter of its function as a
    size (``attn.narrow(-1, 0, max_num_global)``): a line that syncs so reads that size from the GPU, where the
    module does not show who passes it (a caller in another file; the corpora keep the function alone). Not a
    parameter annotated ``int``."""
    function = code.function
    if function is None:
        return False
    given = _annotations(function)
    parameters = {n for n, note in given.items() if n not in ("self", "cls") and getattr(note, "id", "") != "int"}
    parameters -= set(_bindings(code))
    calls = [n for n in code.on_line() if isinstance(n, ast.Call)]
    if not calls or not all(takes_sizes(c.func) or getattr(c.func, "attr", "") in _SHAPING for c in calls):
        return False
    return any(
        isinstance(n, ast.Name) and n.id in parameters
        for c in calls
        if takes_sizes(c.func)
        for size in [*c.args, *(k.value for k in c.keywords)]
        for n in ast.walk(size)
    )


def _annotations(function: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.expr | None]:
    """Each parameter's annotation (None where it has none)."""
    arguments = function.args
    return {a.arg: a.annotation for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs}


def _cpu_tensor_into_slice(code: _Code) -> bool:
    """Whether the line assigns a CPU tensor into a slice of a tensor (``image[..., i:j] = v``, ``v: torch.Tensor``
    a parameter, or a name bound to ``.cpu()``): the syncing line then copies it to the GPU."""
    statement = code.statement
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1):
        return False
    target, value = statement.targets[0], statement.value
    if not (isinstance(target, ast.Subscript) and isinstance(value, ast.Name)):
        return False
    if not all(
        isinstance(p, ast.Slice) or (isinstance(p, ast.Constant) and p.value is Ellipsis) for p in index_parts(target)
    ):
        return False
    function = code.function
    if function is not None:
        annotation = _annotations(function).get(value.id)
        if annotation is not None:
            return getattr(annotation, "attr", getattr(annotation, "id", "")) == "Tensor"
    made = _bindings(code).get(value.id)
    return isinstance(made, ast.Call) and getattr(made.func, "attr", "") in ("cpu", "from_numpy")


def _host_tensor_into_slice(code: _Code) -> bool:
    """Whether the line assigns a tensor it makes on the host from Python values into a tensor
    (``quantiles[i, :] = torch.tensor([...])``, no device named): it is copied to the GPU, and the host waits."""
    statement = code.statement
    if not (isinstance(statement, ast.Assign) and isinstance(statement.targets[0], ast.Subscript)):
        return False
    return any(
        not any(k.arg in ("device", None) for k in made.keywords) for made in tensor_calls(code, [statement.value])
    )


def _python_number_into_tensor(code: _Code) -> bool:
    """Whether the line assigns a name holding a Python number into a tensor (``cluster[source] = i``, with ``i = 0``
    and ``i += 1``, ``i += int(n)`` its bindings): the number is copied to the GPU, and the host waits."""
    statement = code.statement
    if not (
        isinstance(statement, ast.Assign)
        and isinstance(statement.targets[0], ast.Subscript)
        and isinstance(statement.value, ast.Name)
    ):
        return False
    values: dict[str, list[ast.expr]] = {}
    for node in ast.walk(code.function or code.tree):
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name):
                    values.setdefault(target.id, []).append(node.value)
    # a name is a number when all its values are numbers, itself (``i += 1``) or other such names
    numbers = grown(values, lambda name, made, numbers: all(_python_number(v, numbers | {name}) for v in made))
    return statement.value.id in numbers


def _python_number(node: ast.expr, numbers: AbstractSet[str]) -> bool:
    """Whether an expression is a Python number: a literal, ``int()``/``float()``/``len()`` of anything, a name in
    ``numbers``, or arithmetic of such."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float))
    if isinstance(node, ast.Name):
        return node.id in numbers
    if isinstance(node, ast.BinOp):
        return _python_number(node.left, numbers) and _python_number(node.right, numbers)
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("int", "float", "len")


# Python functions whose truth is never a tensor's (``not isinstance(...)``)
_PYTHON_TRUTHS = {"isinstance", "issubclass", "hasattr", "callable", "len", "getattr", "dict", "list", "tuple", "set",
                  "str", "any", "all"}  # fmt: skip


def _truth_taken(code: _Code) -> bool:
    """Whether the line takes a value's truth with ``and``/``or``/``not`` (``done = not self._unfinished(s)``,
    ``seen = seen or (m >= level)``): ``bool()`` of a GPU tensor reads it. Not an ``is``/``in`` test, a Python
    function's result, or an operand unpacked into a call's arguments (``**(kwargs or {})``)."""
    nodes = code.on_line()
    unpacked = {
        id(n)
        for node in nodes
        for arg in (
            [k.value for k in node.keywords if k.arg is None]
            + [a.value for a in node.args if isinstance(a, ast.Starred)]
            if isinstance(node, ast.Call)
            else []
        )
        for n in ast.walk(arg)
    }
    for node in nodes:
        if id(node) in unpacked:
            continue
        if isinstance(node, ast.BoolOp):
            tested = node.values[:-1]
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            tested = [node.operand]
        else:
            continue
        if any(_may_be_tensor(operand) for operand in tested):
            return True
    return False


def _may_be_tensor(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return False
    if isinstance(node, ast.Compare):
        return not all(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in node.ops)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id not in _PYTHON_TRUTHS
    return True


# calls and attributes whose values are Python numbers, not tensors (``x.numel() > 0``)
_PYTHON_SIZES = {"numel", "size", "dim", "len", "shape", "ndim", "item", "isinstance", "hasattr", "dtype", "device"}


def compared_on_the_gpu(code: _Code) -> bool:
    """Whether the line chooses between values by a comparison of tensors (``v if m.to(v.device) < v else m``):
    Python reads the comparison to the host, where a ``.to()`` beside it moves a value already there."""
    for node in code.on_line():
        if not (isinstance(node, ast.IfExp) and isinstance(node.test, ast.Compare)):
            continue
        test = node.test
        if all(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in test.ops):
            continue
        operands = [test.left, *test.comparators]
        tensors = any(isinstance(o, (ast.Call, ast.Subscript)) for o in operands)
        if tensors and not any(_outermost_name(o) in _PYTHON_SIZES for o in operands):
            return True
    return False


def _outermost_name(node: ast.expr) -> str:
    """What an operand is at its top: a call's function (``numel`` of ``x.numel()``), an attribute (``shape``), the
    subscripted value's (``shape`` of ``x.shape[0]``)."""
    if isinstance(node, ast.Subscript):
        return _outermost_name(node.value)
    if isinstance(node, ast.Call):
        node = node.func
    return getattr(node, "attr", getattr(node, "id", ""))
