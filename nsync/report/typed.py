"""Parsed JSON back into the report dataclasses it was written from, field by field, checked: the reports'
readers share it, so that a saved result renders as the fresh one did."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from nsync.errors import TraceError
from nsync.jsonfile import read_versioned

Kind = TypeVar("Kind")


def read_typed(
    kind: type[Kind], path: Path, schema: str, what: str, prepare: Callable[[dict[str, Any]], None] | None = None
) -> Kind:
    """The ``kind`` report that ``path`` holds, written under ``schema`` (``what`` names such a file in the
    errors); ``prepare`` turns the JSON's shape into the dataclasses' first where they differ."""
    data = read_versioned(path, schema, what)
    if prepare is not None:
        prepare(data)
    try:
        return typing.cast(Kind, typed(kind, data, ""))
    except ValueError as error:
        raise TraceError(f"{path}: not {what}: {error}") from None


def typed(kind: Any, value: Any, where: str) -> Any:
    """``value`` (parsed JSON) as ``kind``: dataclasses field by field, lists item by item, checked."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (kind,) = [a for a in args if a is not type(None)]
        return typed(kind, value, where)
    if dataclasses.is_dataclass(kind):
        if not isinstance(value, dict):
            raise ValueError(f"{where or 'the result'}: expected an object")
        hints = typing.get_type_hints(kind)
        values = {}
        for item in dataclasses.fields(kind):
            name = f"{where}.{item.name}" if where else item.name
            if item.name in value:
                values[item.name] = typed(hints[item.name], value[item.name], name)
            elif item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING:
                raise ValueError(f"{name} is missing")
        return typing.cast(Any, kind)(**values)
    if origin in (list, tuple):
        if not isinstance(value, list):
            raise ValueError(f"{where}: expected a list")
        if origin is tuple:
            return tuple(typed(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
        return [typed(args[0], v, f"{where}[{i}]") for i, v in enumerate(value)]
    if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if kind in (int, str, bool) and type(value) is kind:
        return value
    raise ValueError(f"{where}: expected {getattr(kind, '__name__', kind)}, found {type(value).__name__}")
