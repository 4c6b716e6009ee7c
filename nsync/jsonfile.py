"""Reading the JSON files nsync writes (results, calibrations): one-line errors for anything else."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from nsync.errors import TraceError, UsageError


def read_versioned(path: str | os.PathLike[str], schemas: str | tuple[str, ...], what: str) -> dict[str, Any]:
    """The JSON object in ``path``, written under one of ``schemas`` (``nsync.NAME/N``, the newest last); ``what``
    names such a file in the errors ("an nsync result"). A missing file or a folder is a :class:`UsageError`,
    anything else that is not one a :class:`TraceError`: one line each."""
    path = Path(path)
    schemas = (schemas,) if isinstance(schemas, str) else schemas
    data = _read_object(path, what)
    found = data.get("schema")
    if found not in schemas:
        newest = schemas[-1]
        if isinstance(found, str) and found.startswith(newest.rsplit("/", 1)[0] + "/"):
            raise TraceError(f"{path}: {what} of another version ({found}); this nsync reads {', '.join(schemas)}")
        raise TraceError(f"{path}: not {what} (schema {found!r}, expected {newest})")
    return data


def read_schema(path: str | os.PathLike[str], what: str) -> str:
    """The schema a JSON file of nsync's names (``nsync.analysis/2``), checked as read_versioned checks it."""
    path = Path(path)
    found = _read_object(path, what).get("schema")
    if not isinstance(found, str):
        raise TraceError(f"{path}: not {what} (no schema)")
    return found


def _read_object(path: Path, what: str) -> dict[str, Any]:
    if path.is_dir():
        raise UsageError(f"{path}: is a folder, not {what}")
    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise TraceError(f"{path}: not {what} (not JSON: {error})") from None
    return data if isinstance(data, dict) else {}
