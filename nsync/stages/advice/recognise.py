"""What a line's text cannot tell and its function can: an index named by a literal or a mask made there,
a module's _apply(fn)."""

from __future__ import annotations

import ast

from nsync.stages.advice.code import _Code, _names_in
from nsync.stages.advice.patterns import INDEX, PATTERNS


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


def _from_function(code: _Code) -> tuple[str, str, str] | None:
    """The pattern of a line whose text alone says nothing, read in its function: an index named by a tuple
    or list of integers (``x[:, COLS]``), an index named by a boolean mask made there (``idx = ~torch.isnan(r)``
    then ``r[idx]``), or a module's ``_apply(fn)`` moving its state (``.to(device)`` calls it)."""
    if _named_literal_index(code):
        wanted = INDEX
    elif _mask_named_index(code):
        wanted = "dynamic shape (a mask or nonzero)"
    elif _applies_module_fn(code):
        wanted = "copy between host and device"
    else:
        return None
    return next((p, d, f) for p, d, _, f in PATTERNS if p == wanted)


def _mask_named_index(code: _Code) -> bool:
    """Whether the line indexes with a name its function binds to a boolean expression."""
    scope = code.function or code.tree
    masks = {
        target.id
        for node in ast.walk(scope)
        if isinstance(node, ast.Assign) and _boolean(node.value)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    return any(
        isinstance(part, ast.Name) and part.id in masks
        for node in code.on_line()
        if isinstance(node, ast.Subscript)
        for part in (node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice])
    )


_BOOLEAN_CALLS = {"isnan", "isinf", "isfinite", "isin", "logical_and", "logical_or", "logical_not", "logical_xor",
                  "eq", "ne", "lt", "le", "gt", "ge", "bool"}  # fmt: skip


def _boolean(node: ast.AST) -> bool:
    """Whether an expression makes a boolean tensor: a comparison, a negation or a bitwise mix of them, or a
    call that returns one (``torch.isnan``, ``x.eq(y)``, ``.bool()``)."""
    if isinstance(node, ast.Compare):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Invert, ast.Not)):
        return _boolean(node.operand)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
        return _boolean(node.left) or _boolean(node.right)
    return isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in _BOOLEAN_CALLS


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
    return any(
        index_key(part) in names
        for node in code.on_line()
        if isinstance(node, ast.Subscript)
        for part in (node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice])
    )


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
    return None


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
    if function is not None:
        arguments = function.args
        positional = arguments.posonlyargs + arguments.args
        pairs = list(zip(positional[len(positional) - len(arguments.defaults) :], arguments.defaults))
        pairs += [(a, d) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults) if d is not None]
        found.update({a.arg: kind for a, d in pairs if (kind := _literal_kind(d, found))})
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
