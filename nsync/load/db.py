"""Open an nsys SQLite export read-only and answer questions about its schema.

Every version quirk of the export's *layout* (renamed metadata tables, columns added over versions,
tables absent when empty) is answered here, so readers ask "which columns exist" instead of
branching on version numbers.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from nsync.errors import TraceError, UsageError

SQLITE_MAGIC = b"SQLite format 3\x00"
# Tables every nsys export since 2020 writes, whatever was traced.
NSYS_MARKER_TABLES = (
    "StringIds",
    "ANALYSIS_DETAILS",
    "TARGET_INFO_SESSION_START_TIME",
    "EXPORT_META_DATA",
    "META_DATA_EXPORT",
    "ThreadNames",
)
META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")  # 2023.4+, then 2022.4 and older


@dataclass
class ExportDb:
    """A read-only connection plus the export's table and column inventory."""

    path: Path
    conn: sqlite3.Connection
    columns: dict[str, list[str]] = field(default_factory=dict)

    def has(self, table: str, column: str | None = None) -> bool:
        cols = self.columns.get(table)
        if cols is None:
            return False
        return column is None or column in cols

    def query(self, sql: str, params: tuple[object, ...] = ()) -> pd.DataFrame:
        """Run a query whose SQL is a constant of this package; trace data only travels as params."""
        try:
            return pd.read_sql_query(sql, self.conn, params=params)
        except (sqlite3.DatabaseError, ValueError) as err:
            raise TraceError(f"{self.path}: damaged or truncated SQLite file ({_first_line(err)})") from err

    def select(self, table: str, wanted: dict[str, str], where: str = "") -> pd.DataFrame:
        """Read ``wanted`` (output name -> column) from ``table``; absent columns come back NULL.

        Table and column names are checked against the file's own inventory before they are put into
        SQL, so nothing from the trace's data is ever interpolated.
        """
        if not self.has(table):
            return pd.DataFrame({name: pd.Series(dtype="float64") for name in wanted})
        present = self.columns[table]
        parts = [f'"{col}" AS "{name}"' if col in present else f'NULL AS "{name}"' for name, col in wanted.items()]
        sql = f'SELECT {", ".join(parts)} FROM "{table}"'
        return self.query(sql + (f" WHERE {where}" if where else ""))

    def select_ints(
        self, table: str, wanted: dict[str, str], where: str = "", params: tuple[object, ...] = ()
    ) -> pd.DataFrame:
        """Like :meth:`select` for integer columns, read in native code: NULL and absent columns are -1."""
        return pd.DataFrame(self.select_columns(table, wanted, where, params))

    def select_columns(
        self, table: str, wanted: dict[str, str], where: str = "", params: tuple[object, ...] = ()
    ) -> dict[str, np.ndarray]:
        """Integer columns as int64 arrays (NULL and absent columns: -1), without building a frame.

        Millions of rows go through ADBC's SQLite driver into Arrow (about 4x faster than Python's
        sqlite3 and no Python object per value); without it, through sqlite3.
        """
        if not self.has(table):
            return {name: np.zeros(0, np.int64) for name in wanted}
        present = self.columns[table]
        parts = [
            f'COALESCE("{col}", -1) AS "{name}"' if col in present else f'-1 AS "{name}"'
            for name, col in wanted.items()
        ]
        sql = f'SELECT {", ".join(parts)} FROM "{table}"' + (f" WHERE {where}" if where else "")
        columns = _read_arrow(self.path, sql, params)
        if columns is None:
            rows = self.query(sql, params)
            return {name: rows[name].to_numpy(np.int64) for name in wanted}
        return {name: columns[name] for name in wanted}

    def meta(self) -> dict[str, str]:
        for table in META_TABLES:
            if self.has(table, "name") and self.has(table, "value"):
                frame = self.query(f'SELECT name, value FROM "{table}"')
                return {str(k): str(v) for k, v in zip(frame["name"], frame["value"])}
        return {}

    def capture_meta(self) -> dict[str, str]:
        if not (self.has("META_DATA_CAPTURE", "name") and self.has("META_DATA_CAPTURE", "value")):
            return {}
        frame = self.query('SELECT name, value FROM "META_DATA_CAPTURE"')
        return {str(k): str(v) for k, v in zip(frame["name"], frame["value"])}

    def strings(self) -> pd.Series:
        """StringIds as a Series indexed by id (HTML entities of some nsys versions left as stored)."""
        frame = self.select("StringIds", {"id": "id", "value": "value"})
        return pd.Series(frame["value"].to_numpy(dtype=object), index=frame["id"].to_numpy(np.int64))

    def close(self) -> None:
        self.conn.close()


def _read_arrow(path: Path, sql: str, params: tuple[object, ...] = ()) -> dict[str, np.ndarray] | None:
    """Integer columns of ``sql`` via ADBC (read-only), or None when ADBC is unavailable or refuses."""
    try:
        import adbc_driver_sqlite.dbapi as adbc
    except ImportError:
        return None
    try:
        with adbc.connect(path.resolve().as_uri() + "?mode=ro") as conn, conn.cursor() as cursor:
            cursor.execute(sql, parameters=params or None)
            table = cursor.fetch_arrow_table()
    except (adbc.Error, OSError):  # sqlite3 then reads the same query and reports what is wrong properly
        return None
    return {name: table.column(name).to_numpy().astype(np.int64, copy=False) for name in table.column_names}


def _first_line(err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    return text.splitlines()[0]


def open_export(path: str | Path) -> ExportDb:
    """Open ``path`` read-only and check that it is an nsys SQLite export.

    Raises TraceError with a one-line reason for a missing, non-SQLite, damaged or non-nsys file.
    """
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    try:
        with path.open("rb") as handle:
            head = handle.read(100)
    except OSError as err:
        raise TraceError(f"{path}: cannot read ({err.strerror})") from err
    if path.suffix == ".nsys-rep" or path.suffix == ".qdrep":
        raise TraceError(
            f"{path}: this is an nsys report, not its SQLite export; run "
            f"'nsys export --type sqlite --include-blobs=true {path}' first"
        )
    if len(head) < 100 or not head.startswith(SQLITE_MAGIC):
        raise TraceError(f"{path}: not a SQLite file (expected an nsys SQLite export)")
    uri = path.resolve().as_uri() + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False)  # read-only; readers run in threads
        rows = conn.execute(
            "SELECT m.name, p.name FROM sqlite_master AS m JOIN pragma_table_info(m.name) AS p WHERE m.type = 'table'"
        ).fetchall()
    except sqlite3.DatabaseError as err:
        raise TraceError(f"{path}: damaged or truncated SQLite file ({_first_line(err)})") from err
    columns: dict[str, list[str]] = {}
    for table, column in rows:
        columns.setdefault(table, []).append(column)
    db = ExportDb(path=path, conn=conn, columns=columns)
    if not any(db.has(t) for t in NSYS_MARKER_TABLES[1:]) or not db.has("StringIds"):
        db.close()
        raise TraceError(f"{path}: a SQLite file, but not an nsys export (no StringIds/nsys metadata tables)")
    _check_readable(db)
    return db


def expected_size(head: bytes) -> int | None:
    """The file size a SQLite header promises (page size x page count), when the header's count is valid."""
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(head[28:32], "big")
    valid = head[92:96] == head[24:28] and pages > 0  # the in-header size is trusted only then
    return page_size * pages if valid else None


def _check_readable(db: ExportDb) -> None:
    """Truncation surfaces now, as one clear line: from the header's promised size (no scan of millions
    of rows), else by reading the string table through."""
    with db.path.open("rb") as handle:
        promised = expected_size(handle.read(100))
    if promised is not None and db.path.stat().st_size < promised:
        db.close()
        raise TraceError(f"{db.path}: damaged or truncated SQLite file ({db.path.stat().st_size} of {promised} bytes)")
    for table in ("StringIds",):
        if db.has(table):
            try:
                db.conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()
            except sqlite3.DatabaseError as err:
                db.close()
                raise TraceError(f"{db.path}: damaged or truncated SQLite file ({_first_line(err)})") from err
