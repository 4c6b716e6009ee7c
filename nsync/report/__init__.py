"""One typed, versioned result per command, what the library returns and every renderer prints:
``nsync analyze``: :class:`Analysis`, ``nsync diff``: :class:`Diff`, ``nsync ranks``: :class:`Ranks`,
``nsync measure``: :class:`Measurement`. Each writes its JSON (``to_dict``, schema ``nsync.NAME/N``) and reads
it back (``load``); the stages compute them, this package only holds them."""

from __future__ import annotations

import os
from pathlib import Path

from nsync.errors import TraceError
from nsync.jsonfile import read_schema
from nsync.report.analysis import Analysis
from nsync.report.diff import Diff
from nsync.report.measurement import Measurement
from nsync.report.ranks import Ranks

__all__ = ["RESULTS", "Analysis", "Diff", "Measurement", "Ranks", "Result", "load_result"]

Result = Analysis | Diff | Ranks | Measurement
RESULTS: tuple[type[Analysis] | type[Diff] | type[Ranks] | type[Measurement], ...] = (
    Analysis,
    Diff,
    Ranks,
    Measurement,
)


def load_result(path: str | os.PathLike[str], kind: type[Result] | None = None) -> Result:
    """The result a command's ``--json`` wrote to ``path``: of ``kind``, or of whichever command wrote it."""
    path = Path(path)
    if kind is not None:
        return kind.load(path)
    schema = read_schema(path, "an nsync result")
    family = schema.rsplit("/", 1)[0]
    for result in RESULTS:
        if result.SCHEMA.rsplit("/", 1)[0] == family:
            return result.load(path)
    expected = ", ".join(result.SCHEMA for result in RESULTS)
    raise TraceError(f"{path}: not an nsync result (schema {schema!r}, expected one of {expected})")
