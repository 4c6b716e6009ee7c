"""The rewriters of value reads and prints: the value kept on the GPU, the reads stacked or printed after the
loop, in the code's own names."""

from __future__ import annotations

import ast

from nsync.stages.advice.code import _Code, _holds, _is_copy_read, _is_read
from nsync.stages.advice.edit import _detached, _Edit


def _value_read(code: _Code) -> _Edit:
    """A value read (``.item()``, ``float(t)``...): kept on the GPU where the statement only sums, keeps or
    names it; in a comprehension, the reads stacked."""
    in_comprehension = _comprehension_read(code)
    if in_comprehension is not None:
        return in_comprehension
    reads = [(n, inner) for n in code.on_line() if (inner := _is_read(n)) is not None]
    if not reads:
        copies = [n for n in code.on_line() if _is_copy_read(n) is not None]
        return (
            _Edit(why=f"`{code.text(copies[0])}` copies the tensor to the host and waits for the GPU")
            if copies
            else _Edit()
        )
    return _read_in_statement(code, *reads[0])


def _comprehension_read(code: _Code) -> _Edit | None:
    """A read of each item of a list or dict comprehension: the values kept as one tensor, or as tensors."""
    for node in code.on_line():
        if isinstance(node, ast.ListComp) and (inner := _is_read(node.elt)) is not None:
            elt = code.text(node.elt)
            stacked = f"torch.stack({code.text(node, [(node.elt, code.text(inner))])})"
            caveat = (
                "this keeps the values as one tensor on the GPU, with no sync; where the numbers are needed, read "
                "them all at once with .tolist() (one sync), every N steps or after the loop"
            )
            normed = _norm_of(inner)
            if normed is not None:  # a norm each: one kernel for all of them, as clip_grad_norm_ computes them
                tensors = code.text(node, [(node.elt, code.text(normed))])
                stacked = f"torch.stack(torch._foreach_norm({tensors}))"
                caveat += "; torch._foreach_norm computes every norm in one kernel (PyTorch's, as clip_grad_norm_ does)"
            return _Edit(
                short="torch.stack the reads",
                rewrite=code.rewritten([(node, stacked)]),
                why=f"`{elt}` in the comprehension reads one value per item: one sync each",
                caveat=caveat,
            )
        if isinstance(node, ast.DictComp) and (inner := _is_read(node.value)) is not None:
            return _Edit(
                rewrite=code.rewritten([(node.value, code.text(inner))]),
                short="keep the values on the GPU",
                why=f"`{code.text(node.value)}` in the comprehension reads one value per item: one sync each",
                caveat="the dictionary then holds tensors on the GPU, with no sync; where the numbers are needed, "
                "read them all with one copy: dict(zip(d, torch.stack(list(d.values())).tolist()))",
            )
    return None


def _read_in_statement(code: _Code, read: ast.AST, inner: ast.AST) -> _Edit:
    """The read ``read`` (of ``inner``), by what its statement does with the value."""
    statement = code.statement
    kept = _detached(code.text(inner), inner)
    what = code.text(read)
    if (
        isinstance(statement, ast.AugAssign)
        and _holds(statement.value, read)
        and isinstance(statement.target, ast.Name)
    ):
        total = statement.target.id
        return _Edit(
            rewrite=code.rewritten([(read, kept)]),
            why=f"`{what}` copies the value to the host and waits for the GPU, to add it up on the host",
            caveat=f"`{total}` becomes a tensor on the GPU: read it once, {total}.item(), where the number is "
            "needed (after the loop, or every N steps)",
        )
    if (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Call)
        and isinstance(statement.value.func, ast.Attribute)
        and statement.value.func.attr == "append"
        and len(statement.value.args) == 1
        and _holds(statement.value.args[0], read)
    ):
        kept_in = code.text(statement.value.func.value)
        return _Edit(
            rewrite=code.rewritten([(read, kept)]),
            why=f"`{what}` copies the value to the host and waits for the GPU, only to keep it in a list",
            caveat=f"`{kept_in}` then holds tensors on the GPU: read them once, torch.stack({kept_in}).tolist(), "
            "where the numbers are needed (after the loop, or every N steps)",
        )
    if (
        isinstance(statement, ast.Assign)
        and statement.value is read
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name)
    ):
        name = statement.targets[0].id
        later = code.later_uses(name)
        # a .tolist() is read to be used as Python numbers: any later use of them is the host's
        host_uses = later if _read_as_numbers(read) else [use for use in later if use in code.host_used]
        if host_uses:
            first = host_uses[0]
            return _Edit(
                why=f"`{what}` reads the value on the host, and the host uses it: line {first.lineno}",
                caveat=f"a true dependency: the host uses `{name}` at line {first.lineno} (`"
                f"{code.lines[first.lineno - 1].strip()}`); keep what it does there on the GPU (torch.where), or do "
                "it every N steps; several such reads: read them together, with one copy",
                dependency="true",
            )
        return _Edit(
            rewrite=code.rewritten([(read, kept)]),
            why=f"`{what}` copies the value to the host and waits for the GPU",
            caveat=f"`{name}` becomes a tensor on the GPU: where the host needs the number, read it every N steps "
            "or after the loop (once a step still syncs once a step)",
        )
    return _Edit(why=f"`{what}` copies the value to the host and waits for the GPU")


def _read_as_numbers(node: ast.AST) -> bool:
    """``x.tolist()`` or ``int(...)``: read to be used as Python numbers (a list; a size, a length, an index)."""
    return isinstance(node, ast.Call) and (
        getattr(node.func, "id", None) == "int" or getattr(node.func, "attr", None) == "tolist"
    )


def _norm_of(node: ast.expr) -> ast.expr | None:
    """``x`` of ``x.norm()`` (the default 2-norm, no arguments), else None."""
    if (
        isinstance(node, ast.Call)
        and not node.args
        and not node.keywords
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "norm"
    ):
        return node.func.value
    return None


def _print(code: _Code) -> _Edit:
    statement = code.statement
    if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)):
        return _Edit()
    call = statement.value
    values = [a for a in call.args if not isinstance(a, ast.Constant)]
    formatted = [
        v.value
        for a in call.args
        if isinstance(a, ast.JoinedStr)
        for v in a.values
        if isinstance(v, ast.FormattedValue)
    ]
    shown = formatted if len(values) == 1 and isinstance(values[0], ast.JoinedStr) else values
    counter = _loop_counter(code)
    what = code.text(call) if call.lineno == call.end_lineno else f"{code.text(call.func)}(...)"
    why = f"`{what}` formats a CUDA tensor, which copies it to the host and waits for the GPU"
    if counter is not None:
        body = "\n".join("    " + text for text in code.rewritten([]).splitlines())
        return _Edit(
            rewrite=f"{code.indent}if {counter} % 100 == 0:\n{body}",
            short="print every 100 steps",
            why=why,
            caveat="it still syncs, once every 100 steps (choose the interval); the other steps are not printed",
        )
    if len(shown) != 1:
        return _Edit(why=why)
    value = shown[0]
    inner = _is_read(value)
    kept_node = inner if inner is not None else value
    kept = code.text(kept_node)
    name = code.fresh("printed")
    place = code.setup_place(set())
    if place is None:
        return _Edit(why=why)
    line, indent = place
    return _Edit(
        rewrite=f"{code.indent}{name}.append({_detached(kept, kept_node)})",
        setup=f"{indent}{name} = []  # print them once, after the loop: print(torch.stack({name}).tolist())",
        setup_line=line,
        why=why,
        caveat=f"the values are printed after the loop instead of as it runs; in a long run print and clear "
        f"`{name}` every N steps",
    )


def _loop_counter(code: _Code) -> str | None:
    """The step counter of the innermost loop holding the statement: ``for step in range(...)`` or
    ``for i, batch in enumerate(...)``."""
    for loop in reversed(code.loops()):
        if not isinstance(loop, ast.For) or not isinstance(loop.iter, ast.Call):
            continue
        called = loop.iter.func
        if isinstance(called, ast.Name) and called.id == "range" and isinstance(loop.target, ast.Name):
            return loop.target.id
        if (
            isinstance(called, ast.Name)
            and called.id == "enumerate"
            and isinstance(loop.target, ast.Tuple)
            and isinstance(loop.target.elts[0], ast.Name)
        ):
            return loop.target.elts[0].id
    return None
