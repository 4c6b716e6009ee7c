"""Reading the JSON files nsync writes (results, calibrations): one-line errors for anything else."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nsync.errors import TraceError, UsageError


def read_versioned(path: Path, schema: str, what: str) -> dict[str, Any]:
    """The JSON object in ``path``, written under ``schema`` (``nsync.NAME/N``); ``what`` names such a file in
    the errors ("an nsync result"). A missing file or a folder is a :class:`UsageError`, anything else that
    is not one a :class:`TraceError`: one line each."""
    if path.is_dir():
        raise UsageError(f"{path}: is a folder, not {what}")
    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise TraceError(f"{path}: not {what} (not JSON: {error})") from None
    found = data.get("schema") if isinstance(data, dict) else None
    if found != schema:
        if isinstance(found, str) and found.startswith(schema.rsplit("/", 1)[0] + "/"):
            raise TraceError(f"{path}: {what} of another version ({found}); this nsync reads {schema}")
        raise TraceError(f"{path}: not {what} (schema {found!r}, expected {schema})")
    return data
