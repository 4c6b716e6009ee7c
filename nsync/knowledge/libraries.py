"""The syncs known libraries issue, and the setting that removes each where one exists: libraries.json beside this
file, one entry per sync, read once. An entry names the package, where in it the sync is issued (a file and a
function, each a regular expression searched in the frame's; empty: any), the sync's pattern, why the library
syncs there, the switch (empty: none) and its caveat."""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

TABLE = Path(__file__).with_name("libraries.json")
SCHEMA = "nsync.libraries/1"
GENERATE = "generate"  # transformers' generate(): reads whether every sequence has finished, once per new token


@dataclass(frozen=True)
class LibrarySync:
    """One known sync of a library, and its switch ('' where no setting removes it)."""

    name: str
    package: str
    where: tuple[tuple[re.Pattern[str], re.Pattern[str]], ...]  # (file, function) pairs, any of them
    pattern: str
    why: str
    switch: str
    caveat: str

    def issued_at(self, package: str, file: str, function: str) -> bool:
        return package.startswith(self.package) and any(
            f.search(file) is not None and g.search(function) is not None for f, g in self.where
        )


@functools.cache
def known() -> tuple[LibrarySync, ...]:
    """The table, in its order (the first entry that matches wins)."""
    data = json.loads(TABLE.read_text(encoding="utf-8"))
    if data.get("schema") != SCHEMA:
        raise ValueError(f"{TABLE}: schema {data.get('schema')!r}, not {SCHEMA}")
    return tuple(
        LibrarySync(
            name=entry["name"],
            package=entry["package"],
            where=tuple((re.compile(w["file"]), re.compile(w["function"])) for w in entry["where"]),
            pattern=entry["pattern"],
            why=entry["why"],
            switch=entry["switch"],
            caveat=entry["caveat"],
        )
        for entry in data["libraries"]
    )


def library_sync(package: str, file: str, function: str) -> LibrarySync | None:
    """The known sync that ``package`` issues in ``file``'s ``function``, or None."""
    return next((entry for entry in known() if entry.issued_at(package, file, function)), None)


def generate_reads(files: pd.Series) -> np.ndarray:
    """Which of ``files`` (paths of sync frames) are where generate() reads its finished sequences."""
    entry = next(entry for entry in known() if entry.name == GENERATE)
    pattern = "|".join(f"{re.escape(entry.package)}/{f.pattern}" for f, _ in entry.where)
    return files.astype(str).str.contains(pattern).to_numpy()
