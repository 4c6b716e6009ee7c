"""``--db results.db``: every sync and the call-site table in a SQLite database of nsync's own.

Users query it with sqlite-utils or Datasette (``sqlite-utils query results.db "select ..."``). It is never
the user's trace: a path that holds an nsys export, or any SQLite file nsync did not write, is refused.
Rows go in through ``executemany`` over column lists (about a million rows a second); sqlite-utils
declares the tables, their types and indexes.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import sqlite_utils

from nsync.errors import UsageError
from nsync.exports import NSYS_MARKER_TABLES, SQLITE_MAGIC
from nsync.render.options import refuse
from nsync.report import Analysis, Result
from nsync.report.tables import LOOP_COLUMNS, SAVING_COLUMNS, AnalysisTables
from nsync.version import installed_version

META_TABLE = "nsync_meta"

SYNC_COLUMNS: dict[str, type] = {
    "id": int,
    "start_ns": int,
    "end_ns": int,
    "host_wait_ns": int,
    "lead_before_ns": int,
    "drain_ns": int,
    "rebuild_ns": int,
    "exposed_idle_ns": int,
    "step": int,
    "thread_id": int,
    "thread_name": str,
    "api": str,
    "kind": str,
    "device_id": int,
    "stream_id": int,
    "copy_bytes": int,
    "copy_direction": str,
    "callsite_file": str,
    "callsite_line": int,
    "callsite_function": str,
    "callsite_source": str,
    "sync_frame_file": str,
    "sync_frame_line": int,
    "sync_frame_function": str,
}
CALLSITE_COLUMNS: dict[str, type] = {
    "rank": int,
    "file": str,
    "line": int,
    "function": str,
    "sync_frame_file": str,
    "sync_frame_line": int,
    "sync_frame_function": str,
    "count": int,
    "syncs_per_step": float,
    "exposed_idle_ns": int,
    "exposed_idle_ns_per_step": float,
    "host_wait_ns": int,
    "host_wait_ns_per_step": float,
    "lead_before_ns_mean": float,
    "predicted_saving_ns_per_step": float,
    "predicted_saving_ns_per_step_low": float,  # its likely range (AnalysisConfig.saving_ratio)
    "predicted_saving_ns_per_step_high": float,
    "loop_id": int,  # the loop of reads it is in (NULL: in none): a loop's sites share it
    "loop_saving_ns_per_step": float,  # its loop of reads done for all items at once (NULL: in no loop)
    "loop_saving_ns_per_step_low": float,
    "loop_saving_ns_per_step_high": float,
    "kinds": str,
    "apis": str,
    "hint": str,
    "stack": str,
    "fix_pattern": str,  # the advice, where nsync wrote one from the code (NULL: the hint is all there is)
    "fix_dependency": str,
    "fix_why": str,
    "fix_rewrite": str,  # the statement rewritten ('' deletes it); NULL: none written
    "fix_setup": str,
}


def check_database_path(path: Path, trace_path: Path | None = None) -> None:
    """Refuse, before any analysis runs, a path nsync must not write: the trace, a folder, another SQLite."""
    if trace_path is not None and path.resolve() == Path(trace_path).resolve():
        raise UsageError(f"{path}: that is the trace being analysed; nsync never writes into a trace")
    if path.is_dir():
        raise UsageError(f"{path}: is a folder")
    if not path.exists():
        return
    try:
        with path.open("rb") as handle:
            head = handle.read(16)
    except OSError as error:
        raise UsageError(f"{path}: cannot read ({error.strerror})") from error
    if head and head != SQLITE_MAGIC:
        raise UsageError(f"{path}: exists and is not SQLite; choose another path")
    if head:
        tables = set(_tables(path))
        if tables & set(NSYS_MARKER_TABLES):
            raise UsageError(f"{path}: is an nsys export; nsync never writes into a trace")
        if tables and META_TABLE not in tables:
            raise UsageError(f"{path}: is a SQLite database nsync did not write; choose another path")


def _tables(path: Path) -> list[str]:
    try:
        with sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True) as conn:
            return [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    except sqlite3.DatabaseError as error:
        raise UsageError(f"{path}: exists and is not a readable SQLite database ({error})") from error


@functools.singledispatch
def write_database(result: Result, path: Path) -> None:
    """(Re)write ``path`` with the tables ``nsync_meta``, ``syncs`` and ``callsites`` of an analysis."""
    refuse(result, "database", "the database holds every sync of one analysis (nsync analyze)")


@write_database.register
def _analysis_database(result: Analysis, path: Path) -> None:
    if result.tables is None:
        raise UsageError(
            f"{path}: the database holds every sync, which a result read back from JSON does not: analyse the trace"
        )
    check_database_path(path, Path(result.trace.path))
    analysis, tables = result, result.tables
    db = sqlite_utils.Database(path)
    try:
        with db.conn:
            for name in (META_TABLE, "syncs", "callsites"):
                db[name].drop(ignore=True)
            db.table(META_TABLE).insert_all(
                [{"key": key, "value": value} for key, value in _meta(analysis).items()], pk="key"
            )
            _insert(db, "syncs", SYNC_COLUMNS, _sync_rows(tables, analysis.steps.warmup_skipped), pk="id")
            _insert(db, "callsites", CALLSITE_COLUMNS, _callsite_rows(tables), pk="rank")
        syncs = db.table("syncs")
        for columns in (["callsite_file", "callsite_line"], ["step"], ["kind"], ["start_ns"], ["thread_id"]):
            syncs.create_index(columns, if_not_exists=True)
        db.table("callsites").create_index(["file", "line"], if_not_exists=True)
    finally:
        db.close()


def _insert(
    db: sqlite_utils.Database, name: str, schema: dict[str, type], columns: dict[str, list[Any]], pk: str
) -> None:
    db.table(name).create(schema, pk=pk)
    names = list(schema)
    placeholders = ", ".join("?" for _ in names)
    quoted = ", ".join(f'"{n}"' for n in names)  # names are this module's constants, never trace data
    db.conn.executemany(f'INSERT INTO "{name}" ({quoted}) VALUES ({placeholders})', zip(*(columns[n] for n in names)))


def _meta(analysis: Analysis) -> dict[str, str]:
    return {
        "nsync_version": installed_version(),
        "trace_path": analysis.trace.path,
        "nsys_version": analysis.trace.nsys_version or "",
        "export_schema_version": analysis.trace.export_schema_version or "",
        "gpus": ", ".join(analysis.trace.gpus),
        "steps": str(analysis.steps.count),
        "step_source": analysis.steps.source,
        "window_start_ns": str(analysis.window.start_ns),
        "window_end_ns": str(analysis.window.end_ns),
    }


def _sync_rows(tables: AnalysisTables, warmup: int) -> dict[str, list[Any]]:
    syncs = tables.syncs
    if syncs.empty:
        return {name: [] for name in SYNC_COLUMNS}
    tids = syncs["global_tid"].to_numpy(np.int64)
    step = syncs["step"].to_numpy(np.int64)
    return {
        "id": list(range(len(syncs))),
        "start_ns": syncs["start"].tolist(),
        "end_ns": syncs["end"].tolist(),
        "host_wait_ns": syncs["wait_ns"].tolist(),
        "lead_before_ns": syncs["lead_before_ns"].tolist(),
        "drain_ns": syncs["drain_ns"].tolist(),
        "rebuild_ns": syncs["rebuild_ns"].tolist(),
        "exposed_idle_ns": syncs["exposed_idle_ns"].tolist(),
        # numbered as the JSON's per_step and the HTML number them: from 1 over every step found
        "step": [None if s < 0 else s + warmup + 1 for s in step.tolist()],
        "thread_id": tids.tolist(),
        "thread_name": [tables.thread_names.get(t, "") for t in tids.tolist()],
        "api": syncs["api"].astype(str).tolist(),
        "kind": syncs["kind"].astype(str).tolist(),
        "device_id": syncs["device_id"].tolist(),
        "stream_id": [None if s < 0 else s for s in syncs["scope_stream_id"].tolist()],
        "copy_bytes": [None if b < 0 else b for b in syncs["copy_bytes"].tolist()],
        "copy_direction": [d or None for d in syncs["copy_direction"].astype(str).tolist()],
        "callsite_file": syncs["file"].astype(str).tolist(),
        "callsite_line": syncs["line"].tolist(),
        "callsite_function": syncs["function"].astype(str).tolist(),
        "callsite_source": syncs["callsite_source"].astype(str).tolist(),
        "sync_frame_file": syncs["sync_file"].astype(str).tolist(),
        "sync_frame_line": syncs["sync_line"].tolist(),
        "sync_frame_function": syncs["sync_function"].astype(str).tolist(),
    }


def _callsite_rows(tables: AnalysisTables) -> dict[str, list[Any]]:
    sites = tables.callsites

    def saving(column: str) -> Any:
        return sites[column] if column in sites else [None] * len(sites)

    def number(values: Any) -> list[Any]:
        return [None if v is None or v != v else float(v) for v in values]  # NaN -> NULL

    return {
        "rank": list(range(1, len(sites) + 1)),
        "file": sites["file"].astype(str).tolist(),
        "line": [int(v) for v in sites["line"]],
        "function": sites["function"].astype(str).tolist(),
        "sync_frame_file": sites["sync_file"].astype(str).tolist(),
        "sync_frame_line": [int(v) for v in sites["sync_line"]],
        "sync_frame_function": sites["sync_function"].astype(str).tolist(),
        "count": [int(v) for v in sites["count"]],
        "syncs_per_step": number(sites["syncs_per_step"]),
        "exposed_idle_ns": [int(v) for v in sites["exposed_idle_ns"]],
        "exposed_idle_ns_per_step": number(sites["exposed_idle_ns_per_step"]),
        "host_wait_ns": [int(v) for v in sites["host_wait_ns"]],
        "host_wait_ns_per_step": number(sites["host_wait_ns_per_step"]),
        "lead_before_ns_mean": number(sites["lead_before_ns_mean"]),
        **{column: number(saving(column)) for column in SAVING_COLUMNS},
        "loop_id": [None if v is None else int(v) for v in number(saving("loop_id"))],
        **{column: number(saving(column)) for column in LOOP_COLUMNS[1:]},
        "kinds": [", ".join(k) for k in sites["kinds"]],
        "apis": [", ".join(a) for a in sites["apis"]],
        "hint": sites["hint"].astype(str).tolist(),
        "stack": [json.dumps([f._asdict() for f in stack]) for stack in sites["stack"]],
        **{
            f"fix_{field}": [None if advice is None else getattr(advice, field) for advice in sites["advice"]]
            for field in ("pattern", "dependency", "why", "rewrite", "setup")
        },
    }
