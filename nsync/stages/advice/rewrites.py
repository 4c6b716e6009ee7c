"""One rewriter per pattern: each reads the statement and writes what it can in the code's own names (an empty
_Edit: none)."""

from __future__ import annotations

import ast

from nsync.stages.advice.code import (
    _Code,
    _is_read,
    _names_in,
    _target,
)
from nsync.stages.advice.copies import _host_to_device, _pageable
from nsync.stages.advice.edit import _Edit
from nsync.stages.advice.indices import _kind_of, _literal_index, _literal_names, index_key
from nsync.stages.advice.patterns import PRINT
from nsync.stages.advice.reads import _print, _value_read


def _index(code: _Code) -> _Edit:
    literal_names = _literal_names(code)
    for node in code.on_line():
        if not isinstance(node, ast.Subscript):
            continue
        parts = (
            node.slice.elts if isinstance(node.slice, ast.Tuple) and not _literal_index(node.slice) else [node.slice]
        )
        for part in parts:
            key = index_key(part)
            named = key in literal_names
            if not (_literal_index(part) or named):
                continue
            source = code.text(part)
            if named and key and key.startswith("self."):  # made where it is set, not in the step: no line here
                return _Edit(
                    why=f"the index `{source}` is a Python {_kind_of(part, literal_names)}: PyTorch copies it to the "
                    "GPU each time, from pageable memory, and waits for the copy",
                    caveat=f"make `{source}` a CUDA tensor where it is set (torch.tensor(..., device=...), in "
                    "__init__): the values it picks are the same, and no step copies it",
                )
            bare = key if named and key else ""
            base = (
                (f"{bare}_T" if bare.isupper() else f"{bare}_index") if bare else f"{_target(code) or 'picked'}_index"
            )
            name = code.fresh(base)
            needs = {part.id} if isinstance(part, ast.Name) else set()
            simple = isinstance(node.value, (ast.Name, ast.Attribute))
            place = code.setup_place(needs | _names_in(node.value)) if simple else None
            device = f"{code.text(node.value)}.device" if place is not None else '"cuda"'
            place = place or code.setup_place(needs)
            if place is None:
                return _Edit(why=f"the index `{source}` is a Python {_kind_of(part, literal_names)}")
            line, indent = place
            data = source if named else f"[{source.strip('()[]').rstrip(', ')}]"
            on = " on the current CUDA device" if device == '"cuda"' else ""
            return _Edit(
                rewrite=code.rewritten([(part, name)]),
                setup=f"{indent}{name} = torch.tensor({data}, device={device})",
                setup_line=line,
                why=f"the index `{source}` is a Python {_kind_of(part, literal_names)}: PyTorch copies it to the GPU "
                "each time, from pageable memory, and waits for the copy",
                caveat=f"the index tensor is made once{on}"
                + (" (name the tensor's device if it lives elsewhere)" if on else "")
                + "; the values it picks are the same",
            )
    return _Edit()


def _is_mask(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Invert, ast.Not)):
        return _is_mask(node.operand)
    return isinstance(node, ast.Compare) or (isinstance(node, ast.Name) and "mask" in node.id.lower())


def _dynamic_shape(code: _Code) -> _Edit:
    parents = code.parents
    for node in code.on_line():
        if not (isinstance(node, ast.Subscript) and _is_mask(node.slice) and isinstance(node.ctx, ast.Load)):
            continue
        mask, values = code.text(node.slice), code.text(node.value)
        kept = f"torch.where({mask}, {values}, 0)"
        why = (
            f"`{code.text(node)}` keeps only the entries where the mask is true: its size depends on GPU values, "
            "so the host waits to learn it"
        )
        parent = parents.get(node)
        call = parents.get(parent) if parent is not None else None
        if isinstance(parent, ast.Attribute) and isinstance(call, ast.Call) and not call.args:
            if parent.attr == "sum":
                return _Edit(
                    rewrite=code.rewritten([(node, kept)]),
                    why=why,
                    caveat="the same sum, with zeros where the mask is false",
                    dependency="false",
                    short="torch.where, not a mask",
                )
            if parent.attr == "mean":
                return _Edit(
                    rewrite=code.rewritten([(call, f"({kept}.sum() / ({mask}).sum())")]),
                    why=why,
                    caveat="the same mean; an empty mask gives NaN, as before",
                    dependency="false",
                    short="torch.where, not a mask",
                )
        target = _target(code)
        if target is not None:
            uses = code.later_uses(target)
            summed = [u for u in uses if getattr(parents.get(u), "attr", None) == "sum"]
            if uses and len(summed) == len(uses):
                return _Edit(
                    rewrite=code.rewritten([(node, kept)]),
                    why=why,
                    caveat=f"`{target}` keeps the full shape, with zeros where the mask is false: right for its sum "
                    f"(line {uses[0].lineno}), which is all this function does with it",
                    dependency="false",
                    short="torch.where, not a mask",
                )
        return _Edit(
            why=why,
            caveat=f"if only a sum or a count of the kept entries is needed, use {kept}; code that needs the kept "
            "entries themselves is a true dependency: move it out of the step, or pad to a fixed size",
            dependency="true",
        )
    return _Edit()


def _control_flow(code: _Code) -> _Edit:
    statement = code.statement
    test_reads = isinstance(statement, (ast.Assert, ast.If, ast.While)) and _reads_on_host(statement.test)
    if isinstance(statement, ast.Assert) and not test_reads:
        test = code.text(statement.test)
        literal = isinstance(statement.msg, ast.Constant) and isinstance(statement.msg.value, str)
        message = f", {code.text(statement.msg)}" if literal else ""  # type: ignore[arg-type]
        return _Edit(
            rewrite=f"{code.indent}torch._assert_async({test}{message})",
            short="check on the GPU (_assert_async)",
            why=f"`assert {test}` reads a GPU value on the host to decide whether to raise",
            caveat="the check then runs on the GPU and a failure is raised at a later sync, not at this line; "
            "torch._assert_async is PyTorch's, though not a public API"
            + (
                "; the message is left out: formatting it would read the values"
                if statement.msg and not literal
                else ""
            ),
        )
    if (
        not test_reads
        and isinstance(statement, ast.If)
        and len(statement.body) == 1
        and len(statement.orelse) == 1
        and all(isinstance(s, ast.Assign) and len(s.targets) == 1 for s in (*statement.body, *statement.orelse))
    ):
        then, other = statement.body[0], statement.orelse[0]
        if code.text(then.targets[0]) == code.text(other.targets[0]) and not any(  # type: ignore[attr-defined]
            isinstance(v, ast.JoinedStr) or (isinstance(v, ast.Constant) and isinstance(v.value, str))
            for v in (then.value, other.value)  # type: ignore[attr-defined]
        ):  # torch.where selects tensors (or numbers), never strings
            target = code.text(then.targets[0])  # type: ignore[attr-defined]
            selected = (
                f"{code.indent}{target} = torch.where({code.text(statement.test)}, {code.text(then.value)}, "  # type: ignore[attr-defined]
                f"{code.text(other.value)})"  # type: ignore[attr-defined]
            )
            return _Edit(
                rewrite=selected,
                why=f"`if {code.text(statement.test)}:` reads a GPU value on the host to choose a branch",
                caveat="both values are computed; the GPU picks one, element by element",
                whole=True,
            )
    if isinstance(statement, (ast.If, ast.While)):
        return _Edit(
            why=f"`{code.text(statement.test)}` is a GPU value the host reads to choose what to run",
            caveat="a true dependency: compute both outcomes and select with torch.where, or make the check every "
            "N steps, or after the loop",
        )
    return _Edit()


def _reads_on_host(test: ast.expr) -> bool:
    """Whether a condition reads its values on the host whatever the statement: Python's ``and``/``or``/``not``
    take each tensor's truth, ``.item()``-like reads in it stay, and a comparison of Python sequences or an ``in``
    test takes each element's (``list(x.size()) == [b, n]`` with ``n`` a GPU value: seen on the H100, Longformer's
    assert rewritten to ``torch._assert_async`` still synced)."""
    return any(isinstance(n, ast.BoolOp) or (isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not))
               or _is_read(n) is not None or _compares_on_host(n) for n in ast.walk(test))  # fmt: skip


def _compares_on_host(node: ast.AST) -> bool:
    if not isinstance(node, ast.Compare):
        return False
    sequences = any(
        isinstance(o, (ast.List, ast.Tuple, ast.ListComp))
        or (isinstance(o, ast.Call) and isinstance(o.func, ast.Name) and o.func.id in ("list", "tuple"))
        for o in (node.left, *node.comparators)
    )
    return sequences or any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)


def _builtin(code: _Code) -> _Edit:
    for node in code.on_line():
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("max", "min")):
            continue
        if len(node.args) != 2 or node.keywords:
            continue
        a, b = node.args
        bound = "min" if node.func.id == "max" else "max"
        tensor, other = (b, a) if isinstance(a, ast.Constant) else (a, b)
        new = f"torch.clamp({code.text(tensor)}, {bound}={code.text(other)})"  # the bound a number or a tensor
        return _Edit(
            rewrite=code.rewritten([(node, new)]),
            short="torch.clamp",
            why=f"Python's `{node.func.id}` compares the tensors on the host, which reads them",
            caveat="the result is a tensor on the GPU"
            + ("" if isinstance(other, ast.Constant) else f"; `{code.text(tensor)}` must be the tensor"),
        )
    return _Edit()


def _synchronize(code: _Code) -> _Edit:
    statement = code.statement
    if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)):
        return _Edit()
    called = code.text(statement.value.func)
    if not called.endswith("cuda.synchronize"):
        return _Edit(why=f"`{code.text(statement.value)}` waits for the GPU")
    timing = any(
        getattr(n.func, "attr", "") in ("perf_counter", "time", "monotonic")
        for n in ast.walk(code.function or code.tree)
        if isinstance(n, ast.Call)
    )
    why = f"`{code.text(statement.value)}` makes the host wait until the GPU has finished everything queued"
    if timing:  # deleting it would change what the clock measures: no rewrite, the way to time instead
        return _Edit(
            why=why,
            caveat="it closes a host clock's timing here: time the GPU work with CUDA events instead "
            "(torch.cuda.Event(enable_timing=True), read once after the loop), then delete it",
        )
    return _Edit(
        rewrite="",
        why=why,
        caveat="if the host must know that some work is done, wait on an event recorded after that work",
    )


_REWRITERS = {
    "value read": _value_read,
    PRINT: _print,
    "index from a Python tuple or list": _index,
    "host-to-device copy of a Python value": _host_to_device,
    "copy from pageable memory": _pageable,
    "dynamic shape (a mask or nonzero)": _dynamic_shape,
    "control flow on a GPU value": _control_flow,
    "Python builtin on tensors": _builtin,
    "explicit synchronize": _synchronize,
}
