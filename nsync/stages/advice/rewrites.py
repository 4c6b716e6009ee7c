"""One rewriter per pattern: each reads the statement and writes what it can in the code's own names (an empty
_Edit: none)."""

from __future__ import annotations

import ast

from nsync.stages.advice.code import (
    _bound_in,
    _calls_named,
    _Code,
    _header_nodes,
    _is_read,
    _names_in,
    _target,
)
from nsync.stages.advice.edit import _Edit
from nsync.stages.advice.patterns import PRINT
from nsync.stages.advice.reads import _print, _value_read
from nsync.stages.advice.recognise import _kind_of, _literal_index, _literal_names, index_key


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


def _torch_call(node: ast.AST, *names: str) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in names
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "torch"
    )


def _copies_to_device(code: _Code, nodes: list[ast.AST]) -> list[ast.Call]:
    """The ``torch.tensor(..., device=)`` calls among ``nodes`` (``tensor(...)`` too, where the file imports it
    from torch)."""
    bare = {
        alias.asname or alias.name
        for node in code.tree.body
        if isinstance(node, ast.ImportFrom) and node.module == "torch"
        for alias in node.names
        if alias.name == "tensor"
    }
    calls = [
        n
        for n in nodes
        if isinstance(n, ast.Call)
        and (_torch_call(n, "tensor", "as_tensor") or (isinstance(n.func, ast.Name) and n.func.id in bare))
    ]
    return [call for call in calls if any(k.arg == "device" for k in call.keywords)]


def _host_to_device(code: _Code) -> _Edit:
    """A tensor built on the host and copied: made once before the loop where its names allow, else copied from
    pinned memory. A statement with several such copies has each copied from pinned memory, in one rewrite that
    each of its syncing lines gets alike (seen on the H100: one of two copies in a torch.where was fixed, the
    other's rewrite was set aside as touching the same lines, and the statement still synced each step)."""
    on_line = _copies_to_device(code, code.on_line())
    if not on_line:
        return _made_on_the_device(code)
    call = on_line[0]
    text = code.text(call)
    why = (
        f"`{text}` builds the tensor from Python values on the host and copies it to the GPU from pageable "
        "memory: the host waits for the copy"
    )
    every = _copies_to_device(code, [n for root in _header_nodes(code.statement) for n in ast.walk(root)])
    place = code.setup_place(_names_in(call) - {"torch"}) if len(every) == 1 else None
    if place is not None:
        data = call.args[0] if call.args else None
        target = _target(code)
        base = data.id if isinstance(data, ast.Name) else (target or "values")
        name = code.fresh(f"{base}_GPU" if base.isupper() else f"{base}_gpu")
        line, indent = place
        return _Edit(
            rewrite=code.rewritten([(call, name)]),
            setup=f"{indent}{name} = {text}",
            setup_line=line,
            why=why,
            caveat=f"`{name}` is made once: if the values change between steps, copy them instead from pinned "
            "memory with non_blocking=True",
        )
    return _Edit(
        rewrite=code.rewritten([(copy, _pinned(code, copy)) for copy in every]),
        why=why,
        caveat=f"the values {'change' if len(every) == 1 else 'may change'} each step, so they are still copied "
        "each step, but from pinned memory: the copy is queued and the host does not wait",
    )


_FACTORIES = ("zeros", "ones", "full", "eye", "empty", "arange")


def _made_on_the_device(code: _Code) -> _Edit:
    """``torch.zeros(1).to(d)`` (a factory's tensor made on the host, then copied) made on the device at once:
    ``torch.zeros(1, device=d)``; ``.type_as(x)`` takes x's dtype and device."""
    changes = []
    for node in code.on_line():
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        made, move = node.func.value, node.func.attr
        if not (_torch_call(made, *_FACTORIES) and not any(k.arg == "device" for k in made.keywords)):  # type: ignore[attr-defined]
            continue
        one = node.args[0] if len(node.args) == 1 and not node.keywords else None
        if move == "type_as" and one is not None:
            where = f"dtype={code.text(one)}.dtype, device={code.text(one)}.device"
        elif move == "to" and one is not None and not _a_dtype(one):
            where = f"device={code.text(one)}"
        elif move == "cuda" and not node.args and not node.keywords:
            where = 'device="cuda"'
        else:
            continue
        inside = code.text(made)[:-1].rstrip()
        changes.append((node, f"{inside}{'' if inside.endswith('(') else ', '}{where})"))
    if not changes:
        return _Edit()
    return _Edit(
        rewrite=code.rewritten(changes),
        why="the tensor is made on the host and then copied to the GPU from pageable memory: the host waits",
        caveat="the tensor is made on the GPU at once, with the same values: nothing is copied",
        short="make it on the GPU",
    )


def _a_dtype(node: ast.expr) -> bool:
    """Whether a ``.to()`` argument names a dtype (``torch.float16``, ``x.dtype``): a cast, not a copy."""
    return isinstance(node, ast.Attribute) and (
        node.attr == "dtype" or (isinstance(node.value, ast.Name) and node.value.id == "torch")
    )


def _pinned(code: _Code, call: ast.Call) -> str:
    """``torch.tensor(values, ..., device=d)`` as a copy from pinned memory (torch.as_tensor has no pin_memory:
    torch.tensor copies the Python values the same way; a bare ``tensor`` imported from torch stays bare)."""
    device = next(k for k in call.keywords if k.arg == "device")
    kept = [code.text(a) for a in call.args] + [
        f"{k.arg}={code.text(k.value)}" for k in call.keywords if k.arg not in ("device", "pin_memory")
    ]
    built = code.text(call.func) if isinstance(call.func, ast.Name) else "torch.tensor"  # ``tensor`` from torch
    return f"{built}({', '.join([*kept, 'pin_memory=True'])}).to({code.text(device.value)}, non_blocking=True)"


def _pageable(code: _Code) -> _Edit:
    for node in code.on_line():
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("to", "cuda")
            and any(k.arg == "non_blocking" for k in node.keywords)
        ):
            continue
        held = node.func.value
        source = code.text(held)
        why = (
            f"`{source}` is in pageable memory, so .{node.func.attr}(..., non_blocking=True) cannot be "
            "asynchronous: the host waits for the copy"
        )
        if isinstance(held, ast.Name):
            made = [
                s
                for s in code.tree.body
                if isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == held.id for t in s.targets)
            ]
            if len(made) == 1 and held.id not in _bound_in(code.function):
                after = (made[0].end_lineno or made[0].lineno) + 1
                return _Edit(
                    setup=f"{held.id} = {held.id}.pin_memory()",
                    short=f"pin {held.id} once",
                    setup_line=after,
                    why=why,
                    caveat=f"`{held.id}` is pinned once, where it is made (line {made[0].lineno}); this line stays "
                    "as it is",
                )
            loaders = _calls_named(code.tree, "DataLoader")
            if loaders:
                return _Edit(
                    why=why,
                    short="DataLoader(pin_memory=True)",
                    caveat=f"pin it where it is made: the DataLoader at line {loaders[0].lineno} with pin_memory=True",
                )
        return _Edit(
            rewrite=code.rewritten([(held, f"{source}.pin_memory()")]),
            why=why,
            caveat="pinning each step costs a copy on the host: pin where the tensor is made (DataLoader(..., "
            "pin_memory=True)) where you can",
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
    take each tensor's truth, and ``.item()``-like reads in it stay."""
    return any(isinstance(n, ast.BoolOp) or (isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not))
               or _is_read(n) is not None for n in ast.walk(test))  # fmt: skip


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
