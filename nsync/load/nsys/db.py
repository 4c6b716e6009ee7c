"""Open an nsys SQLite export read-only and answer questions about its schema.

Every version quirk of the export's *layout* (renamed metadata tables, columns added over versions,
tables absent when empty) is answered here, so readers ask "which columns exist" instead of
branching on version numbers.
"""

from __future__ import annotations

import functools
import sqlite3
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import numpy as np
import pandas as pd

from nsync.errors import TraceError
from nsync.exports import NSYS_MARKER_TABLES, SQLITE_MAGIC
from nsync.load.files import require_file

META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")  # 2023.4+, then 2022.4 and older


class Read(NamedTuple):
    """One table's integer columns to read: output name -> column, an optional WHERE and its parameters."""

    table: str
    wanted: dict[str, str]
    where: str = ""
    params: tuple[object, ...] = ()


class Utf8Text:
    """sqlite3's text factory: UTF-8, and where a string is not (a thread name is the kernel's ``comm``,
    which is bytes), the bytes that are not as U+FFFD, counted: one such byte must not refuse the file."""

    def __init__(self) -> None:
        self.replaced = 0

    def __call__(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.replaced += 1
            return raw.decode("utf-8", "replace")


@dataclass
class ExportDb:
    """A read-only connection plus the export's table and column inventory."""

    path: Path
    conn: sqlite3.Connection
    columns: dict[str, list[str]] = field(default_factory=dict)
    text: Utf8Text = field(default_factory=Utf8Text)
    name: Path | None = None  # the file as the user named it, for messages (a .sqlite.xz, not its unpacked copy)

    def __post_init__(self) -> None:
        self.name = self.name or self.path

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
            raise TraceError(f"{self.name}: {_damaged(err)}") from err

    def select(
        self, table: str, wanted: dict[str, str], where: str = "", params: tuple[object, ...] = ()
    ) -> pd.DataFrame:
        """Read ``wanted`` (output name -> column) from ``table``; absent columns come back NULL.

        Table and column names are checked against the file's own inventory before they are put into
        SQL, so nothing from the trace's data is ever interpolated.
        """
        if not self.has(table):
            return pd.DataFrame({name: pd.Series(dtype="float64") for name in wanted})
        present = self.columns[table]
        parts = [f'"{col}" AS "{name}"' if col in present else f'NULL AS "{name}"' for name, col in wanted.items()]
        sql = f'SELECT {", ".join(parts)} FROM "{table}"'
        return self.query(sql + (f" WHERE {where}" if where else ""), params)

    def select_ints(
        self, table: str, wanted: dict[str, str], where: str = "", params: tuple[object, ...] = ()
    ) -> pd.DataFrame:
        """Like :meth:`select` for integer columns, read in native code: NULL and absent columns are -1."""
        return pd.DataFrame(self.select_columns(table, wanted, where, params))

    def select_columns(
        self, table: str, wanted: dict[str, str], where: str = "", params: tuple[object, ...] = ()
    ) -> dict[str, np.ndarray]:
        """Integer columns as int64 arrays (NULL and absent columns: -1), without building a frame."""
        columns, _sizes = self.stack_columns([Read(table, wanted, where, params)])
        return columns

    def stack_columns(self, reads: list[Read]) -> tuple[dict[str, np.ndarray], list[int]]:
        """Several tables' integer columns stacked into one set of int64 arrays, and each table's row count.

        A column a table lacks, and NULL, read as -1. Millions of rows go through ADBC's SQLite driver
        (about 4x faster than Python's sqlite3, and no Python object per value), batch by batch straight
        into arrays sized once for all the tables; without ADBC, or where it fails, through sqlite3.
        """
        names = list(dict.fromkeys(name for read in reads for name in read.wanted))
        sink = Int64Columns(names, sum(self.capacity(read.table) for read in reads))
        sizes = []
        for read in reads:
            before = sink.size
            if self.has(read.table):
                present = [f'"{col}" AS "{name}"' for name, col in read.wanted.items() if self.has(read.table, col)]
                # a constant column keeps the row count when none of the wanted columns exists
                sql = f'SELECT {", ".join(present or ["0 AS _rows"])} FROM "{read.table}"'
                sql += f" WHERE {read.where}" if read.where else ""
                if _with_adbc(self.path, sql, read.params, sink.extend) is None:
                    sink.size = before
                    rows = self.query(sql, read.params)
                    sink.append(len(rows), {name: _int64(rows[name]) for name in rows.columns})
            sizes.append(sink.size - before)
        return sink.finish(), sizes

    def select_blobs(
        self, table: str, wanted: dict[str, str], blob: str, where: str = "", params: tuple[object, ...] = ()
    ) -> tuple[dict[str, np.ndarray], np.ndarray, list[bytes]]:
        """Integer columns plus one BLOB column, factorised: (columns, blob code per row, distinct blobs).

        A NULL, empty or absent blob has code -1. Each distinct blob (one per Python stack, shared by
        thousands of calls) comes back once, and no Python object is made per row.
        """
        if not self.has(table):
            return {name: np.zeros(0, np.int64) for name in wanted}, np.zeros(0, np.int64), []
        parts = [f'"{col}" AS "{name}"' if self.has(table, col) else f'-1 AS "{name}"' for name, col in wanted.items()]
        parts.append(
            f'COALESCE(CAST("{blob}" AS BLOB), X\'\') AS "_blob"' if self.has(table, blob) else "X'' AS \"_blob\""
        )
        sql = f'SELECT {", ".join(parts)} FROM "{table}"' + (f" WHERE {where}" if where else "")
        arrow = _with_adbc(self.path, sql, params, lambda reader: reader.read_all())
        if arrow is not None:
            columns = {name: _filled(arrow.column(name)) for name in wanted}
            encoded = arrow.column("_blob").combine_chunks().dictionary_encode()
            codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
            distinct = encoded.dictionary.to_pylist()
        else:
            rows = self.query(sql, params)
            columns = {name: _int64(rows[name]) for name in wanted}
            codes, uniques = pd.factorize(rows["_blob"])
            distinct = list(uniques)
        empty = [k for k, value in enumerate(distinct) if not value]
        codes = np.where(np.isin(codes, empty), -1, codes)
        return columns, codes, distinct

    def capacity(self, table: str) -> int:
        """An upper bound on the table's row count, read from its b-tree without a scan (capped by the
        file's size, should rowids be sparse)."""
        if not self.has(table):
            return 0
        try:
            largest = int(self.conn.execute(f'SELECT max(rowid) FROM "{table}"').fetchone()[0] or 0)
        except (sqlite3.DatabaseError, TypeError, ValueError):  # no rowid: the readers grow their arrays
            return 0
        return max(0, min(largest, self.path.stat().st_size // 8))

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

    def strings(self) -> StringTable:
        """StringIds (HTML entities of some nsys versions left as stored)."""
        frame = self.select("StringIds", {"id": "id", "value": "value"})
        return StringTable.of(frame["id"].to_numpy(np.int64), frame["value"].to_numpy(dtype=object))

    def close(self) -> None:
        self.conn.close()


class StringTable(Mapping[int, str]):
    """StringIds, built once before the reader threads start and only read after: plain numpy arrays and a
    dict, never a pandas object, which is not safe to index from two threads (pandas 2.0 fails ``reindex``
    about 1 run in 8)."""

    def __init__(self, ids: np.ndarray, values: np.ndarray, by_id: dict[int, str]) -> None:
        self._ids, self._values, self._by_id = ids, values, by_id

    @classmethod
    def of(cls, ids: np.ndarray, values: np.ndarray) -> StringTable:
        order = np.argsort(ids, kind="stable")
        ids, values = ids[order], values[order]
        return cls(ids, values, dict(zip(ids.tolist(), values.tolist())))

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        """The strings of ``ids`` (an object array; None where an id is unknown)."""
        ids = np.asarray(ids, np.int64)
        at = np.clip(np.searchsorted(self._ids, ids), 0, max(len(self._ids) - 1, 0))
        found = (self._ids[at] == ids) if len(self._ids) else np.zeros(len(ids), bool)
        out = np.full(len(ids), None, dtype=object)
        out[found] = self._values[at[found]]
        return out

    def __getitem__(self, string_id: int) -> str:
        return self._by_id[string_id]

    def __iter__(self) -> Iterator[int]:
        return iter(self._by_id)

    def __len__(self) -> int:
        return len(self._by_id)


T = TypeVar("T")
BATCH_ROWS = 65536  # ADBC's default of 1024 rows per batch costs 10-15 % more time on millions of rows


def _with_adbc(path: Path, sql: str, params: tuple[object, ...], consume: Callable[[Any], T]) -> T | None:
    """``consume(reader)`` over a pyarrow RecordBatchReader for ``sql`` on a read-only ADBC connection.

    None without ADBC, or when reading fails (a value ADBC cannot type, a damaged page): sqlite3 then
    reads the same query and reports what is wrong properly.
    """
    try:
        import adbc_driver_sqlite.dbapi as adbc
        import pyarrow as pa
    except ImportError:
        return None
    _plain_blocking_calls()
    try:
        with adbc.connect(path.resolve().as_uri() + "?mode=ro") as conn, conn.cursor() as cursor:
            cursor.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(BATCH_ROWS)})
            cursor.execute(sql, parameters=params or None)
            return consume(cursor.fetch_record_batch())
    except (adbc.Error, OSError, pa.ArrowException, TypeError, ValueError):
        return None


@functools.cache
def _plain_blocking_calls() -> None:
    """ADBC swaps Python's SIGINT handler for its own during each blocking call (on the main thread), and on a
    Ctrl-C asks the statement to cancel: the query then fails, sqlite3 reads it again, and the Ctrl-C is lost
    (seen: a Ctrl-C during the loading let the analysis run to its end). Its calls are made plainly instead,
    so that Python's own handler raises KeyboardInterrupt as soon as the call returns."""

    def plain(func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], _cancel: object) -> Any:
        return func(*args, **kwargs)

    for name in ("adbc_driver_manager._lib", "adbc_driver_manager.dbapi"):
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "_blocking_call"):
            module._blocking_call = plain  # type: ignore[attr-defined]


class Int64Columns:
    """Batches copied into int64 arrays allocated once for everything to be read.

    Beside the result only one batch is ever held: no Arrow table, no concatenation. Capacity that is
    never written (rows a WHERE clause left out) is never paged in, and is handed back at the end.
    """

    def __init__(self, names: list[str], capacity: int) -> None:
        self.arrays = {name: np.empty(max(capacity, 1), np.int64) for name in names}
        self.size = 0

    def extend(self, batches: Iterable[Any]) -> bool:
        """Append each Arrow record batch."""
        for batch in batches:
            self.append(batch.num_rows, dict(zip(batch.schema.names, batch.columns)))
        return True

    def append(self, size: int, columns: dict[str, Any]) -> None:
        """Append ``size`` rows; a column missing from ``columns`` gets -1."""
        end = self.size + size
        for name, target in self.arrays.items():
            if end > len(target):  # more rows than the rowids promised: grow geometrically
                target.resize(max(end, 2 * len(target)), refcheck=False)
            column = columns.get(name)
            target[self.size : end] = -1 if column is None else _filled(column)
        self.size = end

    def finish(self) -> dict[str, np.ndarray]:
        for array in self.arrays.values():
            array.resize(self.size, refcheck=False)
        return self.arrays


def _filled(column: Any) -> np.ndarray:
    """An Arrow integer column (or a numpy one) as int64 numpy, NULL as -1; a column ADBC typed otherwise
    (every value of a batch a string, in a damaged export) with what is no integer as -1 too."""
    if isinstance(column, np.ndarray):
        return column
    import pyarrow as pa

    if not pa.types.is_integer(column.type):
        return _int64(column.to_pandas())
    if column.null_count:
        column = column.fill_null(-1)
    return column.to_numpy().astype(np.int64, copy=False)


def _int64(values: pd.Series) -> np.ndarray:
    return pd.to_numeric(values, errors="coerce").fillna(-1).to_numpy(np.int64)


def _damaged(err: BaseException) -> str:
    """What a SQLite error says of the file: locked by a writer (not damaged), or damaged."""
    if "locked" in str(err):
        return "locked by another program (an export still being written?): try again once it is done"
    return f"damaged or truncated SQLite file ({_first_line(err)})"


def _first_line(err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    return text.splitlines()[0]


def open_export(path: str | Path, name: Path | None = None) -> ExportDb:
    """Open ``path`` read-only and check that it is an nsys SQLite export (``name``: the file as the user
    named it, for messages).

    Raises TraceError with a one-line reason for a missing, non-SQLite, damaged or non-nsys file.
    """
    path = Path(path)
    name = name or path
    require_file(path)
    try:
        with path.open("rb") as handle:
            head = handle.read(100)
    except OSError as err:
        raise TraceError(f"{name}: cannot read ({err.strerror})") from err
    if path.suffix == ".nsys-rep" or path.suffix == ".qdrep":
        raise TraceError(
            f"{name}: this is an nsys report, not its SQLite export; run "
            f"'nsys export --type sqlite --include-blobs=true {path}' first"
        )
    if len(head) < 100 or not head.startswith(SQLITE_MAGIC):
        raise TraceError(f"{name}: not a SQLite file (expected an nsys SQLite export or a torch.profiler trace)")
    uri = path.resolve().as_uri() + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False)  # read-only; readers run in threads
        rows = conn.execute(
            "SELECT m.name, p.name FROM sqlite_master AS m JOIN pragma_table_info(m.name) AS p WHERE m.type = 'table'"
        ).fetchall()
    except sqlite3.DatabaseError as err:
        raise TraceError(f"{name}: {_damaged(err)}") from err
    columns: dict[str, list[str]] = {}
    for table, column in rows:
        columns.setdefault(table, []).append(column)
    db = ExportDb(path=path, conn=conn, columns=columns, name=name)
    conn.text_factory = db.text
    if not any(db.has(t) for t in NSYS_MARKER_TABLES[1:]) or not db.has("StringIds"):
        db.close()
        raise TraceError(f"{name}: a SQLite file, but not an nsys export (no StringIds/nsys metadata tables)")
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
        raise TraceError(f"{db.name}: damaged or truncated SQLite file ({db.path.stat().st_size} of {promised} bytes)")
    if db.has("StringIds"):
        try:
            db.conn.execute('SELECT count(*) FROM "StringIds"').fetchone()
        except sqlite3.DatabaseError as err:
            db.close()
            raise TraceError(f"{db.name}: {_damaged(err)}") from err
