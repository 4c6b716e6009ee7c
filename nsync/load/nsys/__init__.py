"""An nsys SQLite export (any schema since 2020, or its .xz), read into a :class:`Trace`: every nsys encoding is
decoded in this package (db.py: the file and its strings; readers.py: the tables; stacks.py and pyframes.py: the
backtraces; rows.py and checks.py: what cannot be true; budget.py: a window that fits in memory; locate.py and
export.py: the nsys that turns an .nsys-rep into SQLite)."""

from __future__ import annotations

import lzma
import shutil
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from nsync.errors import TraceError
from nsync.keys import match_rows, take_matched
from nsync.load.files import require_file
from nsync.load.launches import with_launches
from nsync.load.model import PYTHON_FRAMES_NSYS, StackTable, Trace
from nsync.load.nsys import readers, rows
from nsync.load.nsys import stacks as stacks_reader
from nsync.load.nsys.budget import plan_window
from nsync.load.nsys.checks import check_columns, check_devices_agree, check_metadata, check_tables_agree
from nsync.load.nsys.db import ExportDb, open_export
from nsync.notices import Notice
from nsync.waiting import result

Progress = Callable[[str], None]


def load_nsys(
    path: Path,
    say: Progress,
    keep_api: Callable[[str], bool] | None = None,
    window_s: tuple[float, float | None] | None = None,
    max_memory_bytes: int | None = None,
) -> Trace:
    """Read the export at ``path`` (``.sqlite`` or ``.sqlite.xz``), within ``max_memory_bytes``
    (nsync.load.load_trace says what each argument does)."""
    with sqlite_file(path, say) as sqlite_path:
        db = open_export(sqlite_path, name=path)
        try:
            check_columns(db)
            window, cut = plan_window(db, readers.read_span(db), window_s, max_memory_bytes)
            trace = _load(db, say, keep_api, window)
        finally:
            db.close()
    if cut:
        trace.warnings.insert(0, Notice("trace-cut", cut))
    return replace(trace, path=path)


@contextmanager
def sqlite_file(path: Path, say: Progress) -> Iterator[Path]:
    """The SQLite file behind ``path``: itself, or an xz-compressed export unpacked to a temporary file."""
    if path.suffix != ".xz":
        yield path
        return
    require_file(path)
    say("decompressing")
    with tempfile.TemporaryDirectory(prefix="nsync-") as tmp:
        target = Path(tmp) / path.stem
        try:
            with lzma.open(path) as source, target.open("wb") as sink:
                shutil.copyfileobj(source, sink, length=1 << 20)
        except (lzma.LZMAError, EOFError) as err:
            raise TraceError(f"{path}: not a valid .xz file ({err})") from err
        yield target


def _load(db: ExportDb, say: Progress, keep_api: Callable[[str], bool] | None, window: readers.Window) -> Trace:
    meta = db.meta()
    say("reading strings")
    strings = db.strings()
    say("reading CUDA calls, GPU activity and Python frames")
    # The two big tables are read side by side (the native readers let go of the GIL while they work);
    # the small ones are read meanwhile on this thread.
    with ThreadPoolExecutor(max_workers=2) as pool:
        api_job = pool.submit(readers.read_api, db, strings, keep_api, window)
        ops_job = pool.submit(
            lambda: with_launches(
                readers.gpu_ops_table(readers.read_gpu_op_columns(db, window), strings), api_job.result()
            )
        )
        twins_job = pool.submit(readers.read_backtrace_twins, db, window)  # by whichever reader is done first
        stacks = StackTable()
        marks, frameless, unreadable = stacks_reader.read_python_marks(db, strings, stacks, window)
        small = {
            "gpu_busy_extra": readers.read_busy_extra(db, strings),
            "sync_activity": readers.read_sync_activity(db),
            "cuda_events": readers.read_cuda_events(db),
            "nvtx_ranges": readers.read_nvtx_ranges(db, strings, window),
            "threads": readers.read_threads(db, strings),
            "gpus": readers.read_gpus(db),
            "span_ns": readers.read_span(db),
            "capture": db.capture_meta(),
        }
        api = _attach_backtraces(result(api_job), result(twins_job), marks)
        gpu_ops, launched_op, repeated_calls = result(ops_job)
    api, gpu_ops, launched_op, set_aside = _possible(api, gpu_ops, launched_op, repeated_calls, small)
    needing_callchains = api.loc[(api["py_stack_id"] < 0) & (api["callchain_id"] >= 0), "callchain_id"]
    trace = Trace(
        path=db.path,
        profiler="nsys",
        profiler_version=meta.get("EXPORT_PRODUCT_VERSION"),
        schema_version=meta.get("EXPORT_SCHEMA_VERSION"),
        api=api,
        gpu_ops=gpu_ops,
        py_samples=marks.loc[marks["kind"] == "sampling", ["start", "global_tid", "stack_id"]]
        .sort_values(["global_tid", "start"])
        .reset_index(drop=True),
        callchains=stacks_reader.read_callchains(db, strings, np.unique(needing_callchains)),
        stack_table=stacks,
        **small,
    )
    trace.warnings.extend(check_metadata(meta, trace.schema_version))
    trace.warnings.extend(check_tables_agree(db, api, gpu_ops, launched_op))
    trace.warnings.extend(check_devices_agree(trace.sync_activity, gpu_ops))
    trace.warnings.extend(aside.warning() for aside in set_aside)
    trace.warnings.extend(_frame_warnings(db, trace, frameless))
    trace.warnings.extend(_damage_warnings(db, unreadable))
    return trace


def _damage_warnings(db: ExportDb, unreadable: int) -> list[Notice]:
    """What of the export could not be read as written: strings not in UTF-8, Python backtraces past their blob."""
    notes = []
    if db.text.replaced:
        notes.append(
            Notice(
                "not-utf8",
                f"{db.text.replaced} strings of the export are not valid UTF-8: the bytes that are not show as "
                "U+FFFD in names.",
            )
        )
    if unreadable:
        notes.append(
            Notice(
                "damaged-frames",
                f"{unreadable} Python backtraces of the export cannot be read (a frame count or an offset past the "
                "end of its blob: the export is damaged): the calls they belong to have no Python line, and their "
                "syncs are named by their native backtrace or API.",
            )
        )
    return notes


def _possible(
    api: pd.DataFrame, gpu_ops: pd.DataFrame, launched_op: np.ndarray, repeated_calls: np.ndarray, small: dict
) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray, list[rows.SetAside]]:
    """The calls, ops and ranges without the rows that cannot be true (nsync.load.nsys.rows), and what was set
    aside. Nothing is copied when every row passes, the usual case."""
    span = small["span_ns"]
    keep_api, api_aside = rows.check_api(api, span, repeated_calls)
    keep_ops, ops_aside = rows.check_gpu_ops(gpu_ops, span)
    keep_ranges, ranges_aside = rows.check_ranges(small["nvtx_ranges"])
    if not keep_api.all():
        api, launched_op = api.loc[keep_api].reset_index(drop=True), launched_op[keep_api]
    if not keep_ops.all():
        gpu_ops = gpu_ops.loc[keep_ops].reset_index(drop=True)
    if not keep_ranges.all():
        small["nvtx_ranges"] = small["nvtx_ranges"].loc[keep_ranges].reset_index(drop=True)
    return api, gpu_ops, launched_op, [*api_aside, *ops_aside, *ranges_aside]


def _attach_backtraces(api: pd.DataFrame, twins: dict[str, np.ndarray], marks: pd.DataFrame) -> pd.DataFrame:
    """Fold each call's backtrace twin (native callchain) and Python mark (frames) onto the call.

    A Python backtrace mark has the twin's start and thread; the twin shares the call's
    (thread, correlationId) (docs/nsys-sqlite.md §2.9).
    """
    bt_marks = marks.loc[(marks["kind"] == "backtrace") & (marks["stack_id"] >= 0)]
    mark_row = match_rows(
        twins["global_tid"], twins["start"], bt_marks["global_tid"].to_numpy(), bt_marks["start"].to_numpy()
    )
    twin_stack = take_matched(bt_marks["stack_id"].to_numpy(), mark_row)
    twin_row = match_rows(
        api["global_tid"].to_numpy(), api["correlation_id"].to_numpy(), twins["global_tid"], twins["correlation_id"]
    )
    py_stack_id = take_matched(twin_stack, twin_row)
    callchain_id = take_matched(twins["callchain_id"], twin_row)
    return api.assign(py_stack_id=py_stack_id, callchain_id=callchain_id)


# the calls nsys takes backtraces of with --cudabacktrace=sync,memory (Python frames with them): a trace without
# one (a compiled program's launches alone, no copy, no sync) has no frames to miss
BACKTRACED_CALLS = r"Synchronize|Memcpy|Memset|Malloc|Free"


def _frame_warnings(db: ExportDb, trace: Trace, frameless: int) -> list[Notice]:
    """Say why Python lines may be missing or approximate, and how to capture them."""
    return [Notice("python-frames", message) for message in _frame_messages(db, trace, frameless)]


def _frame_messages(db: ExportDb, trace: Trace, frameless: int) -> list[str]:
    api = trace.api
    if len(api) == 0 or not api["api"].str.contains(BACKTRACED_CALLS).any() or (api["py_stack_id"] >= 0).any():
        return []
    version = trace.nsys_version or "unknown"
    capture = (
        "capture with 'nsys profile --python-backtrace=cuda --cudabacktrace=sync,memory' and export "
        "with 'nsys export --type sqlite --include-blobs=true'"
    )
    if frameless:
        if db.has("NVTX_EVENTS", "binaryData"):
            return [
                "Python backtraces were captured but not exported: re-export with "
                "'nsys export --type sqlite --include-blobs=true' to name Python lines."
            ]
        return [
            f"Python backtraces were captured, but the SQLite export of nsys {version} cannot carry them "
            f"(nsys >= {PYTHON_FRAMES_NSYS} can, with --include-blobs=true)."
        ]
    if version.startswith(("2020", "2021", "2022")):
        return [
            f"no Python frames: nsys {version} cannot record Python backtraces; call sites come from "
            f"native CUDA backtraces where present. For Python lines use nsys >= {PYTHON_FRAMES_NSYS} and {capture}."
        ]
    if len(trace.py_samples):
        return [
            f"no Python backtraces: call sites come from the nearest Python sampling mark (approximate); {capture}."
        ]
    return [f"no Python frames in this trace: {capture}."]
