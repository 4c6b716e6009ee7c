"""Make large nsys exports by tiling a real one in time, with consistent ids.

Each copy of the source's CUDA, NVTX and backtrace rows is shifted by the source's span (plus a gap) and
gets its own correlation and callchain ids, so the tiled trace is the source program run N times in a row.
Everything runs inside SQLite (INSERT ... SELECT), so a 10 M-row trace takes about a minute.

Usage: python benchmarks/tile_trace.py SOURCE.sqlite[.xz] TARGET.sqlite (--copies N | --rows N)
"""

from __future__ import annotations

import argparse
import lzma
import shutil
import sqlite3
import tempfile
from pathlib import Path

GAP_NS = 1_000_000
# table -> (columns shifted in time, id columns shifted by the correlation / callchain offsets)
EVENTS = {
    "CUPTI_ACTIVITY_KIND_RUNTIME": (("start", "end"), ("correlationId",), ("callchainId",)),
    "CUPTI_ACTIVITY_KIND_KERNEL": (("start", "end"), ("correlationId",), ()),
    "CUPTI_ACTIVITY_KIND_MEMCPY": (("start", "end"), ("correlationId",), ()),
    "CUPTI_ACTIVITY_KIND_MEMSET": (("start", "end"), ("correlationId",), ()),
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": (("start", "end"), ("correlationId",), ()),
    "CUPTI_ACTIVITY_KIND_CUDA_EVENT": ((), ("correlationId",), ()),
    "NVTX_EVENTS": (("start", "end"), (), ()),
    "PROFILER_OVERHEAD": (("start", "end"), (), ()),
    "CUDA_CALLCHAINS": ((), (), ("id",)),
}
COPIED_ONCE = (
    "StringIds",
    "ThreadNames",
    "PROCESSES",
    "TARGET_INFO_GPU",
    "TARGET_INFO_CUDA_DEVICE",
    "META_DATA_EXPORT",
    "EXPORT_META_DATA",
    "META_DATA_CAPTURE",
    "TARGET_INFO_SESSION_START_TIME",
)
COUNTED = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "NVTX_EVENTS")


def _plain(source: Path, folder: Path) -> Path:
    if source.suffix != ".xz":
        return source
    target = folder / source.stem
    with lzma.open(source) as src, target.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return target


def rows_per_copy(conn: sqlite3.Connection) -> int:
    return sum(conn.execute(f'SELECT count(*) FROM src."{t}"').fetchone()[0] for t in COUNTED if _has(conn, t))


def _has(conn: sqlite3.Connection, table: str) -> bool:
    return (
        conn.execute("SELECT 1 FROM src.sqlite_master WHERE type='table' AND name=?", (table,)).fetchone() is not None
    )


def tile(source: Path, target: Path, copies: int | None = None, rows: int | None = None) -> tuple[int, int]:
    """Write ``target``; returns (copies, rows in the counted tables)."""
    with tempfile.TemporaryDirectory() as tmp:
        plain = _plain(source, Path(tmp))
        target.unlink(missing_ok=True)
        conn = sqlite3.connect(target)
        conn.execute("ATTACH DATABASE ? AS src", (f"file:{plain}?mode=ro",))
        per_copy = rows_per_copy(conn)
        copies = copies or max(1, round((rows or per_copy) / per_copy))
        start, stop = conn.execute("SELECT min(startTime), max(stopTime) FROM src.ANALYSIS_DETAILS").fetchone()
        span = stop - start + GAP_NS
        corr_step = conn.execute("SELECT max(correlationId) + 1 FROM src.CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
        chain_step = (
            (conn.execute("SELECT max(id) + 1 FROM src.CUDA_CALLCHAINS").fetchone()[0] or 1)
            if _has(conn, "CUDA_CALLCHAINS")
            else 1
        )
        for table in (*COPIED_ONCE, "ANALYSIS_DETAILS", *EVENTS):
            if _has(conn, table):
                ddl = conn.execute("SELECT sql FROM src.sqlite_master WHERE name=?", (table,)).fetchone()[0]
                conn.execute(ddl)
        for table in COPIED_ONCE:
            if _has(conn, table):
                conn.execute(f'INSERT INTO main."{table}" SELECT * FROM src."{table}"')
        conn.execute(
            "INSERT INTO main.ANALYSIS_DETAILS SELECT globalVid, ? , startTime, startTime + ? "
            "FROM src.ANALYSIS_DETAILS",
            (span * copies, span * copies),
        )
        for table, (times, corrs, chains) in EVENTS.items():
            if not _has(conn, table):
                continue
            columns = [r[1] for r in conn.execute(f'PRAGMA src.table_info("{table}")')]
            exprs = [
                f'"{c}" + :dt'
                if c in times
                else f'"{c}" + :dc'
                if c in corrs
                else f'"{c}" + :dk'
                if c in chains
                else f'"{c}"'
                for c in columns
            ]
            # NVTX domain declarations are per process: once is enough
            where = " WHERE eventType != 75 OR :i = 0" if table == "NVTX_EVENTS" else ""
            sql = f'INSERT INTO main."{table}" SELECT {", ".join(exprs)} FROM src."{table}"{where}'
            for i in range(copies):
                conn.execute(sql, {"dt": i * span, "dc": i * corr_step, "dk": i * chain_step, "i": i})
        conn.commit()
        conn.close()
    return copies, copies * per_copy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("target", type=Path)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--copies", type=int)
    group.add_argument("--rows", type=int, help="about this many rows in RUNTIME, KERNEL, MEMCPY and NVTX")
    args = parser.parse_args()
    copies, rows = tile(args.source, args.target, args.copies, args.rows)
    print(f"{args.target}: {copies} copies, {rows:,} rows, {args.target.stat().st_size / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
