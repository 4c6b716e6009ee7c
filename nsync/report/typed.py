"""Results to JSON and back: dataclasses written field by field (the tables left out), and parsed JSON read
back into the dataclasses it was written from, checked, so that a saved result renders as the fresh one did."""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from typing import Any, Literal, TypeVar

from nsync.errors import TraceError
from nsync.jsonfile import read_versioned
from nsync.notices import Notice

Kind = TypeVar("Kind")
NOT_IN_JSON = {"json": False}  # a field's metadata: the JSON leaves it out (tables, what only this run has)


def plain(value: Any) -> Any:
    """``value`` as JSON's types: dataclasses as objects of their fields (less those NOT_IN_JSON), tuples as
    lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value) if f.metadata.get("json", True)
        }
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    return value


def load_typed(kind: type[Kind], path: str | os.PathLike[str], what: str) -> Kind:
    """The ``kind`` result that ``path`` holds, written under ``kind.SCHEMA`` or one of the older ``kind.READS``
    (``what`` names such a file in the errors; a field an older schema lacks takes its default);
    ``kind.json_shape``, where it has one, turns the JSON's shape into the dataclasses' first."""
    schemas = getattr(kind, "READS", (typing.cast(Any, kind).SCHEMA,))
    data = read_versioned(path, schemas, what)
    shape = getattr(kind, "json_shape", None)
    if shape is not None:
        shape(data)
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
    if origin is Literal:
        if value not in args:
            raise ValueError(f"{where}: expected one of {', '.join(map(repr, args))}, found {value!r}")
        return value
    if kind is Notice and isinstance(value, str):  # written by an analysis/1 or ranks/1, before warnings had codes
        return Notice("unknown", value)
    if dataclasses.is_dataclass(kind):
        return _dataclass(kind, value, where)
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


def _dataclass(kind: Any, value: Any, where: str) -> Any:
    if not isinstance(value, dict):
        raise ValueError(f"{where or 'the result'}: expected an object")
    hints = typing.get_type_hints(kind)
    values = {}
    for item in dataclasses.fields(kind):
        name = f"{where}.{item.name}" if where else item.name
        if item.name in value and item.metadata.get("json", True):
            values[item.name] = typed(hints[item.name], value[item.name], name)
        elif item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING:
            raise ValueError(f"{name} is missing")
    return typing.cast(Any, kind)(**values)
