"""One reader per nsys table family; each returns columns with nsync's names and dtypes."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import cast

import numpy as np
import pandas as pd

from nsync.keys import dense_codes
from nsync.load.model import COPY_DIRECTIONS, GPU_OP_KINDS, MEMORY_KINDS, global_pid
from nsync.load.nsys.db import ExportDb, Read, StringTable
from nsync.load.nsys.rows import CAPTURE_SLACK_NS

RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
API_EVENT_CLASSES = (0, 1)  # CUDA runtime, CUDA driver
BACKTRACE_EVENT_CLASS = 67  # the duplicate row nsys writes for a call with a CUDA backtrace
NVTX_MARK, NVTX_PUSH_POP, NVTX_START_END, NVTX_DOMAIN_CREATE = 34, 59, 60, 75
PY_BACKTRACE_DOMAINS = ("Python Backtrace on CUDA",)
PY_SAMPLING_DOMAINS = ("Python Periodic Sampling",)
# Intervals nsys's own gap rules count as GPU busy (docs/nsys-sqlite.md §2.15).
OVERHEAD_NAMES = ("CUDA profiling data flush overhead", "CUDA profiling stop overhead", "CUDA profiling overhead")
_VERSION_SUFFIX = re.compile(r"_v\d+$")
_PER_THREAD_SUFFIX = re.compile(r"_pt(sz|ds)$")
UNNAMED = "<string "  # a name whose id StringIds lacks: "<string 1234>"


def normalise_api_name(name: str) -> str:
    """``cudaStreamSynchronize_v3020`` and ``cudaStreamSynchronize_ptsz`` -> ``cudaStreamSynchronize``."""
    return _PER_THREAD_SUFFIX.sub("", _VERSION_SUFFIX.sub("", name))


def names_for(ids: pd.Series | np.ndarray, strings: StringTable, normalise: bool = False) -> pd.Categorical:
    """Resolve StringIds ids to a Categorical, touching each distinct id once."""
    ids = np.asarray(pd.Series(ids).fillna(-1), dtype=np.int64)
    inverse, uniq = dense_codes(ids)
    values = strings.lookup(uniq)
    resolved = [(f"{UNNAMED}{i}>" if not isinstance(v, str) else v) for i, v in zip(uniq, values)]
    if normalise:
        resolved = [normalise_api_name(v) for v in resolved]
    categories, codes = np.unique(np.asarray(resolved, dtype=object), return_inverse=True)
    return pd.Categorical.from_codes(codes[inverse] if len(ids) else codes, categories=categories)


def _ints(frame: pd.DataFrame, columns: list[str], missing: int = -1) -> pd.DataFrame:
    for col in columns:
        frame[col] = pd.to_numeric(frame[col], errors="coerce").fillna(missing).astype(np.int64)
    return frame


Window = tuple[int, int] | None  # [start, end) in ns on the trace's clock; None: the whole trace


def in_window(window: Window, where: str, params: tuple[object, ...] = ()) -> tuple[str, tuple[object, ...]]:
    """``where`` (with its ``params``) narrowed to rows that start in ``window``; the bounds travel as
    parameters too."""
    if window is None:
        return where, params
    return f"({where}) AND start >= ? AND start < ?", (*params, int(window[0]), int(window[1]))


def read_api(
    db: ExportDb, strings: StringTable, keep: Callable[[str], bool] | None = None, window: Window = None
) -> pd.DataFrame:
    """CUDA API calls (eventClass 0/1).

    ``keep`` (a test on the normalised API name) drops calls no stage uses before they are read: on
    PyTorch traces half the rows are cuKernelGetName and friends.
    """
    where, params = f"eventClass IN {API_EVENT_CLASSES}", cast(tuple[object, ...], ())
    if keep is not None and len(strings):
        ids = [int(i) for i, name in strings.items() if isinstance(name, str) and keep(normalise_api_name(name))]
        where += " AND nameId IN (SELECT value FROM json_each(?))"  # ids travel as a bound parameter
        params = (json.dumps(ids),)
    api = db.select_columns(
        RUNTIME,
        {
            "start": "start",
            "end": "end",
            "global_tid": "globalTid",
            "correlation_id": "correlationId",
            "name_id": "nameId",
        },
        *in_window(window, where, params),
    )
    name_ids = api.pop("name_id")
    api["global_pid"] = global_pid(api["global_tid"])
    return pd.DataFrame(api, copy=False).assign(api=names_for(name_ids, strings, normalise=True))


def read_backtrace_twins(db: ExportDb, window: Window = None) -> dict[str, np.ndarray]:
    """The duplicate rows (eventClass 67) nsys writes for calls with a CUDA backtrace: they carry the
    callchain, and Python marks point at them (docs/nsys-sqlite.md §2.9)."""
    return db.select_columns(
        RUNTIME,
        {"start": "start", "global_tid": "globalTid", "correlation_id": "correlationId", "callchain_id": "callchainId"},
        *in_window(window, f"eventClass = {BACKTRACE_EVENT_CLASS}"),
    )


GPU_OP_TABLES: tuple[tuple[str, dict[str, str]], ...] = (
    ("CUPTI_ACTIVITY_KIND_KERNEL", {"name_id": "shortName"}),
    (
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        {"copy_kind": "copyKind", "src_kind": "srcKind", "dst_kind": "dstKind", "bytes": "bytes"},
    ),
    ("CUPTI_ACTIVITY_KIND_MEMSET", {"bytes": "bytes", "mem_kind": "memKind"}),
    ("CUPTI_ACTIVITY_KIND_GRAPH_TRACE", {}),
)
GPU_COMMON_COLUMNS = {
    "start": "start",
    "end": "end",
    "global_pid": "globalPid",
    "device_id": "deviceId",
    "stream_id": "streamId",
    "correlation_id": "correlationId",
}
_ENUMS = ("copy_kind", "src_kind", "dst_kind", "mem_kind")
# nsys's ENUM_CUDA_MEMCPY_OPER and ENUM_CUDA_MEM_KIND by id (docs/nsys-sqlite.md §2.16), decoded here and nowhere
# else: the UVM copies (11-13) go by their direction, UNKNOWN (0) and a missing value by none.
COPY_DIRECTION_OF_KIND = (
    *(None, "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"),
    *("HtoD", "DtoH", "DtoD"),
)
MEMORY_OF_KIND = MEMORY_KINDS  # ENUM_CUDA_MEM_KIND by id is nsync's list, in its order
NO_ID = 0xFFFFFFFF  # CUPTI's "not applicable" stream or event id (a device-wide sync, a stream sync's event)


def read_gpu_op_columns(db: ExportDb, window: Window = None) -> tuple[dict[str, np.ndarray], list[int]]:
    """The GPU activity tables' columns stacked (kernels, memcpys, memsets, graph launches), and the row
    count of each."""
    where, params = in_window(window, "1")  # every row: an impossible one is set aside and counted (load.rows)
    return db.stack_columns(
        [Read(table, {**GPU_COMMON_COLUMNS, **extra}, where, params) for table, extra in GPU_OP_TABLES]
    )


def gpu_ops_table(stacked: tuple[dict[str, np.ndarray], list[int]], strings: StringTable) -> dict[str, np.ndarray]:
    """The GPU activity tables as one table of GPU intervals in start order (each table comes sorted;
    together they are a few sorted runs, merged here once so that later stages need not sort them).

    The columns are the arrays the reader filled, permuted one at a time: at millions of ops every
    extra copy is hundreds of MB.
    """
    columns, sizes = stacked
    columns["op"] = np.repeat(np.arange(len(GPU_OP_TABLES), dtype=np.int8), sizes)
    start = columns["start"]
    if len(start) and not (start[1:] >= start[:-1]).all():
        order = np.argsort(start, kind="stable")
        for name in list(columns):
            columns[name] = columns[name][order]
    ops = {name: columns.pop(name) for name in [*GPU_COMMON_COLUMNS, "bytes"]}
    op_codes = columns.pop("op")
    ops["op"] = pd.Categorical.from_codes(op_codes, categories=list(GPU_OP_KINDS))
    names = names_for(columns.pop("name_id"), strings)
    ops["name"] = names.set_categories([c for c in names.categories if c != f"{UNNAMED}-1>"])
    # categories on a byte of codes each: a sixth of the table at millions of ops
    ops["copy_direction"] = _decoded(columns.pop("copy_kind"), COPY_DIRECTION_OF_KIND, COPY_DIRECTIONS)
    ops["src_memory"] = _decoded(columns.pop("src_kind"), MEMORY_OF_KIND, MEMORY_OF_KIND)
    # a memset's memory is the memory it writes
    dst_kind = np.where(op_codes == GPU_OP_KINDS.index("memset"), columns.pop("mem_kind"), columns.pop("dst_kind"))
    ops["dst_memory"] = _decoded(dst_kind, MEMORY_OF_KIND, MEMORY_OF_KIND)
    return ops


def _decoded(ids: np.ndarray, meaning: tuple[str | None, ...], categories: tuple[str, ...]) -> pd.Categorical:
    """nsys enum ids as nsync's words (``meaning[id]``); ids out of range, and those meaning nothing, as NaN."""
    code_of_word = {word: code for code, word in enumerate(categories)}
    lookup = np.array([code_of_word.get(word, -1) if word else -1 for word in meaning], np.int8)
    ids = np.asarray(ids, np.int64)
    known = (ids >= 0) & (ids < len(lookup))
    codes = np.where(known, lookup[np.where(known, ids, 0)], -1).astype(np.int8)
    return pd.Categorical.from_codes(codes, categories=list(categories))


def read_busy_extra(db: ExportDb, strings: StringTable) -> pd.DataFrame:
    frame = db.select_ints(
        "PROFILER_OVERHEAD", {"start": "start", "end": "end", "global_tid": "globalTid", "name_id": "nameId"}
    )
    names = np.asarray(names_for(frame["name_id"], strings), dtype=object)
    frame = frame.loc[np.isin(names, OVERHEAD_NAMES)]
    return pd.DataFrame(
        {
            "start": frame["start"].to_numpy(),
            "end": frame["end"].to_numpy(),
            "global_pid": global_pid(frame["global_tid"].to_numpy()),
        }
    )


# Both tables link a call (correlationId) to a stream and a CUDA event.
_EVENT_LINK = {
    "global_pid": "globalPid",
    "correlation_id": "correlationId",
    "device_id": "deviceId",
    "stream_id": "streamId",
    "event_id": "eventId",
    "event_sync_id": "eventSyncId",
}


def _event_links(frame: pd.DataFrame) -> pd.DataFrame:
    """Stream and event ids with -1 for none (CUPTI writes 0xFFFFFFFF)."""
    for column in ("stream_id", "event_id", "event_sync_id"):
        frame[column] = frame[column].mask(frame[column] == NO_ID, -1)
    return frame


def read_sync_activity(db: ExportDb) -> pd.DataFrame:
    return _event_links(db.select_ints("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", _EVENT_LINK))


def read_cuda_events(db: ExportDb) -> pd.DataFrame:
    return _event_links(db.select_ints("CUPTI_ACTIVITY_KIND_CUDA_EVENT", _EVENT_LINK))


def read_nvtx_ranges(db: ExportDb, strings: StringTable, window: Window = None) -> pd.DataFrame:
    frame = db.select(
        "NVTX_EVENTS",
        {
            "start": "start",
            "end": "end",
            "global_tid": "globalTid",
            "text": "text",
            "text_id": "textId",
            "event_type": "eventType",
        },
        *in_window(window, f"eventType IN ({NVTX_PUSH_POP}, {NVTX_START_END}) AND end IS NOT NULL"),
    )
    frame = _ints(frame, ["start", "end", "global_tid", "text_id"])
    registered = np.asarray(names_for(frame["text_id"], strings), dtype=object)
    text = frame["text"].to_numpy(dtype=object)
    name = np.where(pd.isna(text), registered, text)
    return pd.DataFrame(
        {
            "start": frame["start"].to_numpy(),
            "end": frame["end"].to_numpy(),
            "global_tid": frame["global_tid"].to_numpy(),
            "name": name.astype(object),
        }
    )


def read_threads(db: ExportDb, strings: StringTable) -> pd.DataFrame:
    frame = _ints(db.select("ThreadNames", {"global_tid": "globalTid", "name_id": "nameId"}), ["global_tid", "name_id"])
    frame["name"] = np.asarray(names_for(frame["name_id"], strings), dtype=object)
    return frame.drop_duplicates("global_tid", keep="last")[["global_tid", "name"]].reset_index(drop=True)


def read_gpus(db: ExportDb) -> pd.DataFrame:
    """GPU names by the ``deviceId`` of the activity tables: ``TARGET_INFO_GPU`` (its ids mapped through
    ``TARGET_INFO_CUDA_DEVICE`` where present, which handles CUDA_VISIBLE_DEVICES; else through its own
    ``cuDevice``, the CUDA ordinal, as 2022.4 and 2023.4 write it), or the ``TARGET_INFO_CUDA_GPU`` of
    early-2021 exports. A 2020 export keys ``TARGET_INFO_GPU`` by ``deviceId`` itself, with no ``id``
    (docs/nsys-sqlite.md; fixtures/schema/nsys-2020.5.txt)."""
    if db.has("TARGET_INFO_GPU", "deviceId") and not db.has("TARGET_INFO_GPU", "id"):
        frame = _legacy_gpus(db)
    elif db.has("TARGET_INFO_GPU", "name"):
        columns = {"gpu_id": "id", "name": "name", "uuid": "uuid"}  # (NULL where the export has no uuid)
        frame = _ints(db.select("TARGET_INFO_GPU", columns), ["gpu_id"])
        if db.has("TARGET_INFO_CUDA_DEVICE", "cudaId") and db.has("TARGET_INFO_CUDA_DEVICE", "gpuId"):
            cuda = _ints(
                db.select("TARGET_INFO_CUDA_DEVICE", {"device_id": "cudaId", "gpu_id": "gpuId"}), ["device_id"]
            )
            mapped = cuda.merge(frame, on="gpu_id", how="inner").drop(columns="gpu_id")
            frame = pd.concat([mapped, frame.rename(columns={"gpu_id": "device_id"})], ignore_index=True)
        elif db.has("TARGET_INFO_GPU", "cuDevice"):  # 2022.4 and 2023.4: the CUDA ordinal in the GPU's own row
            cuda = _ints(db.select("TARGET_INFO_GPU", {**columns, "device_id": "cuDevice"}), ["device_id"])
            cuda = cuda.drop(columns="gpu_id")
            frame = pd.concat([cuda.loc[cuda["device_id"] >= 0], frame.rename(columns={"gpu_id": "device_id"})])
        else:
            frame = frame.rename(columns={"gpu_id": "device_id"})
    else:
        key = "deviceId" if db.has("TARGET_INFO_CUDA_GPU", "deviceId") else "id"
        frame = _ints(db.select("TARGET_INFO_CUDA_GPU", {"device_id": key, "name": "name"}), ["device_id"])
    # the GPU's own identity (one physical device, so one machine), where the export has it
    frame["uuid"] = frame["uuid"].fillna("").astype(str) if "uuid" in frame else ""
    return frame.drop_duplicates("device_id").reset_index(drop=True)[["device_id", "name", "uuid"]]


def _legacy_gpus(db: ExportDb) -> pd.DataFrame:
    """A 2020 export's GPUs: ``TARGET_INFO_GPU`` by ``deviceId``, a name it lacks taken from
    ``TARGET_INFO_CUDA_GPU`` (the CUDA device's properties, by the same ``deviceId``)."""
    frame = _ints(db.select("TARGET_INFO_GPU", {"device_id": "deviceId", "name": "name"}), ["device_id"])
    if db.has("TARGET_INFO_CUDA_GPU", "deviceId"):
        cuda = _ints(db.select("TARGET_INFO_CUDA_GPU", {"device_id": "deviceId", "cuda_name": "name"}), ["device_id"])
        frame = frame.merge(cuda.drop_duplicates("device_id"), on="device_id", how="outer")
        frame["name"] = frame["name"].where(frame["name"].notna() & (frame["name"] != ""), frame["cuda_name"])
    return frame[["device_id", "name"]]


SPAN_PROBES = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL")


def read_span(db: ExportDb) -> tuple[int, int] | None:
    """The capture's span, in the time base of its rows.

    ``ANALYSIS_DETAILS`` gives it from the session's start. A capture started by a range (``--capture-range``,
    ``nsync profile``'s window) times its rows from the capture's own start instead (nsys 2025.3 on the H200:
    startTime 12.93 s, every CUDA call between 0.011 and 1.488 s, the capture's duration): there the span is
    [0, duration]. Which base holds the rows is read off a table's first and last rows (no scan)."""
    frame = db.select("ANALYSIS_DETAILS", {"start": "startTime", "stop": "stopTime"})
    if frame.empty or frame["start"].isna().all() or frame["stop"].isna().all():
        return None
    span = int(frame["start"].min()), int(frame["stop"].max())
    own = 0, span[1] - span[0]  # the capture's own base
    probes = _edge_starts(db)
    if probes and not all(_within(t, span) for t in probes) and all(_within(t, own) for t in probes):
        return own
    return span


def _within(t: int, span: tuple[int, int]) -> bool:
    return span[0] - CAPTURE_SLACK_NS <= t <= span[1] + CAPTURE_SLACK_NS


def _edge_starts(db: ExportDb) -> list[int]:
    """The start of the first and the last row (by rowid) of the first probe table that has rows."""
    for table in SPAN_PROBES:
        if db.has(table, "start"):
            edges = db.query(
                f'SELECT "start" FROM "{table}" WHERE rowid IN (SELECT min(rowid) FROM "{table}" '
                f'UNION SELECT max(rowid) FROM "{table}")'
            )["start"]
            found = [int(t) for t in edges if isinstance(t, (int, np.integer))]
            if found:
                return found
    return []
