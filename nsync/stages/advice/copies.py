"""The rewriters of copies between host and device: a tensor built from Python values (made once, or copied from
pinned memory), a factory's tensor moved (made on the device), a copy from pageable memory (pinned once)."""

from __future__ import annotations

import ast

from nsync.stages.advice.code import (
    _bound_in,
    _calls_named,
    _Code,
    _header_nodes,
    _names_in,
    _target,
    index_parts,
)
from nsync.stages.advice.edit import _Edit
from nsync.stages.advice.patterns import FACTORIES


def _torch_call(node: ast.AST, *names: str) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in names
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "torch"
    )


def tensor_calls(code: _Code, nodes: list[ast.AST]) -> list[ast.Call]:
    """The ``torch.tensor(...)`` / ``torch.as_tensor(...)`` calls among ``nodes`` (``tensor(...)`` too, where the
    file imports it from torch)."""
    bare = {
        alias.asname or alias.name
        for node in code.tree.body
        if isinstance(node, ast.ImportFrom) and node.module == "torch"
        for alias in node.names
        if alias.name == "tensor"
    }
    return [
        n
        for n in nodes
        if isinstance(n, ast.Call)
        and (_torch_call(n, "tensor", "as_tensor") or (isinstance(n.func, ast.Name) and n.func.id in bare))
    ]


def _copies_to_device(code: _Code, nodes: list[ast.AST]) -> list[ast.Call]:
    """The ``torch.tensor(..., device=)`` calls among ``nodes``."""
    return [call for call in tensor_calls(code, nodes) if any(k.arg == "device" for k in call.keywords)]


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


def _host_factory(node: ast.AST) -> bool:
    """Whether ``node`` is a factory call (``torch.arange(n)``) that names no device, so makes its tensor on the
    host (unpacked keywords may name one: not counted)."""
    return _torch_call(node, *FACTORIES) and not any(k.arg in ("device", None) for k in node.keywords)  # type: ignore[attr-defined]


def _made_on_the_device(code: _Code) -> _Edit:
    """``torch.zeros(1).to(d)`` (a factory's tensor made on the host, then copied) made on the device at once:
    ``torch.zeros(1, device=d)``; ``.type_as(x)`` takes x's dtype and device; a factory's index made where the
    indexed tensor is (``x[:, torch.arange(n)]`` → ``torch.arange(n, device=x.device)``)."""
    changes = []
    for node in code.on_line():
        if isinstance(node, ast.Subscript) and isinstance(node.value, (ast.Name, ast.Attribute)):
            where = f"device={code.text(node.value)}.device"
            changes += [(part, _made_with(code, part, where)) for part in index_parts(node) if _host_factory(part)]
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        made, move = node.func.value, node.func.attr
        if not _host_factory(made):
            continue
        one = node.args[0] if len(node.args) == 1 and not node.keywords else None
        if move == "type_as" and one is not None:
            where = f"dtype={code.text(one)}.dtype, device={code.text(one)}.device"
        elif move == "to" and one is not None and _a_device(one):
            where = f"device={code.text(one)}"
        elif move == "cuda" and not node.args and not node.keywords:
            where = 'device="cuda"'
        else:
            continue
        changes.append((node, _made_with(code, made, where)))
    if not changes:
        return _Edit()
    return _Edit(
        rewrite=code.rewritten(changes),
        why="the tensor is made on the host and then copied to the GPU from pageable memory: the host waits",
        caveat="the tensor is made on the GPU at once, with the same values: nothing is copied",
        short="make it on the GPU",
    )


def _made_with(code: _Code, factory: ast.AST, where: str) -> str:
    """A factory call's text with ``where`` (``device=d``) added to its arguments."""
    inside = code.text(factory)[:-1].rstrip()
    return f"{inside}{'' if inside.endswith('(') else ', '}{where})"


def _a_device(node: ast.expr) -> bool:
    """Whether a ``.to()`` argument is evidently a device (``"cuda"``, ``x.device``, ``torch.device(...)``, a name
    saying so: ``d``, ``dev``, ``self.gpu``, ``local_rank``), not a tensor whose dtype ``.to(t)`` takes too."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str | int) and not isinstance(node.value, bool)
    if isinstance(node, ast.Call):
        node = node.func
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return name == "d" or any(word in name.lower() for word in ("dev", "cuda", "gpu", "rank"))


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
