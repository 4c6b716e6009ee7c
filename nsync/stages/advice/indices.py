"""What a line's index is, read in its function: a tuple or list of integers by name (``x[:, COLS]``,
``self.cols``), one list of a list of lists (``x[groups[i]]``), or indices a matcher gave on the host (a DETR-style
loss's ``indices``): each is copied to the GPU where it indexes a GPU tensor, and the host waits."""

from __future__ import annotations

import ast
import re

from nsync.stages.advice.code import _HOST_BUILTINS, _Code, _names_in, index_parts


def _index_parts(code: _Code) -> list[ast.expr]:
    """The indices of the line's subscripts, a tuple index's parts each."""
    return [part for node in code.on_line() if isinstance(node, ast.Subscript) for part in index_parts(node)]


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


def _list_of_lists_index(code: _Code) -> bool:
    """Whether the line indexes with one list of a list of lists its function builds (``groups = []`` and
    ``groups.append([...])``, or ``[[...] for ...]``), taken by a subscript (``x[groups[i]]``)."""
    lists = _lists_of_lists(code.function or code.tree)
    return any(
        isinstance(part, ast.Subscript) and isinstance(part.value, ast.Name) and part.value.id in lists
        for part in _index_parts(code)
    )


def _lists_of_lists(scope: ast.AST) -> set[str]:
    """The names ``scope`` binds to a list comprehension of lists, or to a list it appends lists to."""
    made = {
        target.id
        for node in ast.walk(scope)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.ListComp)
        and isinstance(node.value.elt, (ast.List, ast.ListComp))
        for target in node.targets
        if isinstance(target, ast.Name)
    }  # fmt: skip
    appended = {
        node.func.value.id
        for node in ast.walk(scope)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "append"
        and isinstance(node.func.value, ast.Name) and len(node.args) == 1
        and isinstance(node.args[0], (ast.List, ast.ListComp))
    }  # fmt: skip
    return made | appended


# a parameter holding a matcher's assignment (DETR-style losses' ``indices``: CPU tensors from
# scipy's linear_sum_assignment)
_MATCHED = re.compile(r"(?:^|_)indices$")


def _matched_index(code: _Code) -> bool:
    """Whether the line indexes with indices that flow from a parameter named ``indices`` (a matcher's
    assignment, made on the host): through a comprehension's targets (``for t, (_, j) in zip(targets,
    indices)``) or a call given them (``idx = self._get_source_permutation_idx(indices)``)."""
    function = code.function
    if function is None:
        return False
    # (not ``mask_time_indices: torch.FloatTensor``: a tensor, where a matcher's are a list of pairs)
    host = {
        a.arg
        for a in function.args.posonlyargs + function.args.args
        if _MATCHED.search(a.arg) and not _annotated_tensor(a.annotation)
    }
    if not host:
        return False
    for _ in range(3):  # names from names: a few steps hold what these losses do
        host |= _flowing_from(function, host)
    return any(_names_in(part) & host for part in _index_parts(code) if not isinstance(part, (ast.Constant, ast.Slice)))


def _annotated_tensor(annotation: ast.expr | None) -> bool:
    """Whether a parameter's annotation names a tensor type (``torch.Tensor``, ``torch.FloatTensor``)."""
    return getattr(annotation, "attr", getattr(annotation, "id", "")).endswith("Tensor")


def _flowing_from(function: ast.AST, host: set[str]) -> set[str]:
    """The names bound from ``host`` names: comprehension targets over them (zip's places kept) and the
    targets of a call given one."""
    found: set[str] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.comprehension):
            zipped = isinstance(node.iter, ast.Call) and getattr(node.iter.func, "id", "") == "zip"
            sources = node.iter.args if zipped else [node.iter]  # type: ignore[attr-defined]
            targets = node.target.elts if len(sources) > 1 and isinstance(node.target, ast.Tuple) else [node.target]
            found |= {n for s, t in zip(sources, targets) if _names_in(s) & host for n in _names_in(t)}
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            given = [*node.value.args, *(k.value for k in node.value.keywords)]
            if getattr(node.value.func, "id", "") not in _HOST_BUILTINS and any(
                isinstance(a, ast.Name) and a.id in host for a in given
            ):  # (not ``len(indices)``: a size)
                found |= {n for t in node.targets for n in _names_in(t)}
    return found
