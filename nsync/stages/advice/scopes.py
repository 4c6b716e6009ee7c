"""One fix, several call sites: what a fix removes is priced together, not sync by sync.

A library's setting turns off every sync it issues for that setting (torchmetrics' ``validate_args=False``: four
checks a step); one statement's reads go with it (a log line printing five ``.item()`` values over three lines).
Priced one by one, each saves little, since each waits for the same GPU work; removed together, the GPU runs
ahead. Reads that one copy would do (``groups``) and loops of reads (the replay finds those) are the other scopes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pandas as pd

from nsync.stages.advice.code import read_code

ScopeKind = Literal["setting", "statement"]


@dataclass(frozen=True)
class FixScope:
    """Call sites one fix removes together: ``kind`` "setting" (``fix`` is the library's setting) or
    "statement" (``fix`` names its lines); ``site_ids`` in the call sites' order."""

    kind: ScopeKind
    site_ids: list[int]
    fix: str
    file: str = ""
    first_line: int = 0
    last_line: int = 0


def fix_scopes(callsites: pd.DataFrame, search: Iterable[Path]) -> list[FixScope]:
    """The settings and statements that hold two call sites or more (see the module)."""
    return [*_settings(callsites), *_statements(callsites, tuple(search))]


def _settings(callsites: pd.DataFrame) -> list[FixScope]:
    """Sites a known library issues and one of its settings removes, by setting."""
    by_setting: dict[str, list[int]] = {}
    for site_id, advice in zip(callsites["site_id"], callsites["advice"]):
        if advice is not None and advice.basis == "library" and advice.setup:
            by_setting.setdefault(advice.setup, []).append(int(site_id))
    return [FixScope("setting", sites, setup) for setup, sites in by_setting.items() if len(sites) >= 2]


def _statements(callsites: pd.DataFrame, search: tuple[Path, ...]) -> list[FixScope]:
    """Sites of the program's own code on different lines of one statement (a call spread over lines)."""
    by_statement: dict[tuple[str, int, int], list[int]] = {}
    own = callsites.loc[(callsites["file"] == callsites["sync_file"]) & (callsites["line"] == callsites["sync_line"])]
    for site_id, file, line in zip(own["site_id"], own["file"], own["line"]):
        code = read_code(str(file), int(line), search)
        if code is None:
            continue
        statement = code.statement
        first, last = statement.lineno, statement.end_lineno or statement.lineno
        if last > first:
            by_statement.setdefault((str(file), first, last), []).append(int(site_id))
    return [
        FixScope("statement", sites, f"lines {first}-{last} of {Path(file).name}", file, first, last)
        for (file, first, last), sites in by_statement.items()
        if len(sites) >= 2
    ]
