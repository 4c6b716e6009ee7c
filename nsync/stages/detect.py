"""Stage 2: find the CUDA calls that blocked their host thread on GPU work, and what they waited for.

Classification goes by API name (plus the MEMCPY/MEMSET row), never by SYNCHRONIZATION.syncType,
whose labels are wrong on recent stacks (docs/nsys-sqlite.md §2.5).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsync.keys import match_rows, take_matched
from nsync.load import Trace
from nsync.stages.timeline import latest_at, rows_by_key

DEVICE_SYNC_APIS = frozenset({"cudaDeviceSynchronize", "cudaThreadSynchronize", "cuCtxSynchronize"})
STREAM_SYNC_APIS = frozenset({"cudaStreamSynchronize", "cuStreamSynchronize"})
EVENT_SYNC_APIS = frozenset({"cudaEventSynchronize", "cuEventSynchronize"})
# Calls documented or observed to synchronise the device implicitly.
IMPLICIT_SYNC_APIS = frozenset(
    {"cudaFree", "cudaFreeHost", "cudaFreeArray", "cudaDeviceReset", "cuMemFree", "cuMemFreeHost"}
)
MEMCPY_PREFIXES = ("cudaMemcpy", "cuMemcpy")
MEMSET_PREFIXES = ("cudaMemset", "cuMemset", "cuMemsetD")
# memory a memset of which blocks the host: host memory the GPU writes
HOST_VISIBLE_MEMORY = ("pinned", "managed")


class SyncKind:
    DEVICE = "device-sync"
    STREAM = "stream-sync"
    EVENT = "event-sync"
    READ = "dtoh-read"  # a device->host copy followed by a stream sync: .item(), print(t), .tolist()
    MEMCPY_PAGEABLE = "pageable-copy"
    MEMCPY_BLOCKING = "blocking-copy"
    MEMSET = "sync-memset"
    IMPLICIT = "implicit-sync"


# The one order of the syncs table, from detection on: every later stage keeps it (and may rely on it).
SYNC_ORDER = ["start", "global_tid"]
CANDIDATE_KINDS = [v for k, v in vars(SyncKind).items() if not k.startswith("_")] + ["memcpy", "memset"]
SYNC_COLUMNS = [
    "call_row",
    "start",
    "end",
    "global_tid",
    "global_pid",
    "correlation_id",
    "api",
    "kind",
    "device_id",
    "scope_stream_id",
    "cutoff_ns",
    "copy_bytes",
    "copy_direction",
    "read_start_ns",
]


def detect_syncs(trace: Trace, ops: pd.DataFrame) -> pd.DataFrame:
    """One row per blocking call, in SYNC_ORDER: its interval, kind, device, and the scope of GPU work it
    waited on.

    ``scope_stream_id`` is the stream waited on, or -1 for the whole device; only ops launched at or
    before ``cutoff_ns`` (their launch call's start) count as waited for. ``read_start_ns``: for a value
    read, the start of the copy call that fetched the value (the read is that call and the sync); else
    the sync's own start.
    """
    api = trace.api.reset_index(drop=True)
    names = api["api"].astype("category")
    codes = names.cat.codes.to_numpy()
    # classify each distinct name once; code -1 (no name) lands on the trailing ""
    kind_of_code = np.array([_kind_of_name(str(c)) for c in names.cat.categories] + [""], dtype=object)
    async_of_code = np.array(["Async" in str(c) for c in names.cat.categories] + [False])
    rows = np.flatnonzero((kind_of_code != "")[codes])
    candidates = pd.DataFrame(
        {
            "call_row": rows,
            **{col: api[col].to_numpy()[rows] for col in ("start", "end", "global_tid", "correlation_id")},
            "global_pid": api["global_pid"].to_numpy()[rows],
            # categories, not strings: at hundreds of thousands of syncs, string columns cost seconds
            "api": pd.Categorical.from_codes(codes[rows], categories=names.cat.categories),
            "is_async": async_of_code[codes[rows]],
            "kind": pd.Categorical(kind_of_code[codes[rows]], categories=CANDIDATE_KINDS),
        }
    )
    candidates = candidates.sort_values(SYNC_ORDER, kind="stable").reset_index(drop=True)
    candidates = _attach_copy(candidates, ops)
    candidates = _classify_copies(candidates)
    candidates = _mark_reads(candidates, api, ops)
    candidates = _resolve_scope(candidates, trace, ops)
    return candidates[SYNC_COLUMNS].reset_index(drop=True)


# Calls that launch GPU work or that later stages look at (event records, for event syncs).
LAUNCH_AND_RECORD_PREFIXES = (
    "cudaLaunch",
    "cuLaunch",
    "cudaGraphLaunch",
    "cuGraphLaunch",
    "cudaEventRecord",
    "cuEventRecord",
    "cudaMemPrefetch",
    "cuMemPrefetch",
)


def is_relevant_api(name: str) -> bool:
    """Whether analysis needs calls of this (normalised) name: launches, copies, syncs, event records."""
    return _kind_of_name(name) != "" or name.startswith(LAUNCH_AND_RECORD_PREFIXES + MEMSET_PREFIXES)


def _kind_of_name(name: str) -> str:
    """Sync kind by API name; 'memcpy'/'memset' are candidates that their GPU row decides."""
    if name in DEVICE_SYNC_APIS:
        return SyncKind.DEVICE
    if name in STREAM_SYNC_APIS:
        return SyncKind.STREAM
    if name in EVENT_SYNC_APIS:
        return SyncKind.EVENT
    if name in IMPLICIT_SYNC_APIS:
        return SyncKind.IMPLICIT
    if name.startswith(MEMCPY_PREFIXES):
        return "memcpy"
    if name.startswith(MEMSET_PREFIXES) and "Async" not in name:
        return "memset"
    return ""


_COPY_COLUMNS = {
    "start": "op_start",
    "end": "op_end",
    "device_id": "op_device",
    "stream_id": "op_stream",
    "bytes": "bytes",
}
_COPY_WORDS = ("copy_direction", "src_memory", "dst_memory")  # categories


def _attach_copy(calls: pd.DataFrame, ops: pd.DataFrame) -> pd.DataFrame:
    """The memcpy or memset row each call launched (same process and correlationId), NaN where none."""
    copies = np.flatnonzero(ops["op"].isin(["memcpy", "memset"]).to_numpy())
    row = match_rows(
        calls["global_pid"].to_numpy(),
        calls["correlation_id"].to_numpy(),
        ops["global_pid"].to_numpy()[copies],
        ops["correlation_id"].to_numpy()[copies],
    )
    found = row >= 0
    op_row = copies[row[found]]
    for column, name in _COPY_COLUMNS.items():
        values = np.full(len(calls), np.nan)
        values[found] = ops[column].to_numpy()[op_row]
        calls[name] = values
    for column in _COPY_WORDS:
        codes = np.full(len(calls), -1, np.int8)
        codes[found] = ops[column].cat.codes.to_numpy()[op_row]
        calls[column] = pd.Categorical.from_codes(codes, categories=ops[column].cat.categories)
    return calls


def _classify_copies(calls: pd.DataFrame) -> pd.DataFrame:
    """Keep the copies and memsets that actually blocked the host; name their kind.

    A copy blocked its thread when the GPU had reached it before the call returned: the call waited
    for all earlier work on the stream. A pageable host-to-device copy the driver could stage and
    return from early starts on the GPU after the call returned, and is not a sync.
    """
    has_op = calls["op_end"].notna()
    waited = ~has_op | (calls["op_start"] <= calls["end"])
    pageable = (calls["src_memory"] == "pageable") | (calls["dst_memory"] == "pageable")
    is_copy = calls["kind"] == "memcpy"
    blocking_copy = is_copy & ~calls["is_async"] & waited & (calls["copy_direction"] != "DtoD")
    pageable_copy = is_copy & calls["is_async"] & has_op & pageable & waited
    sync_memset = (calls["kind"] == "memset") & calls["dst_memory"].isin(HOST_VISIBLE_MEMORY)
    kind = calls["kind"].copy()  # set on its own, not through the frame: that would copy every column
    kind[blocking_copy] = SyncKind.MEMCPY_BLOCKING
    kind[pageable_copy] = SyncKind.MEMCPY_PAGEABLE
    kind[sync_memset] = SyncKind.MEMSET
    calls = calls.assign(kind=kind).loc[~kind.isin(["memcpy", "memset"])]
    calls["copy_bytes"] = calls["bytes"].fillna(-1).astype(np.int64)
    calls["copy_direction"] = calls["copy_direction"].astype(object).fillna("")
    return calls


def _mark_reads(syncs: pd.DataFrame, calls: pd.DataFrame, ops: pd.DataFrame) -> pd.DataFrame:
    """A stream sync right after a device-to-host copy on the same thread is a value read (.item())."""
    stream_rows = np.flatnonzero((syncs["kind"] == SyncKind.STREAM).to_numpy())
    sync_call = syncs["call_row"].to_numpy()[stream_rows]
    tid, start = calls["global_tid"].to_numpy(), calls["start"].to_numpy()
    before = np.full(len(sync_call), -1, np.int64)  # the thread's call just before the sync
    for mine, rows in rows_by_key([tid], [tid[sync_call]], start):
        before[mine] = latest_at(start[rows], rows, start[sync_call[mine]], side="left")
    dtoh = (ops["copy_direction"] == "DtoH").to_numpy()
    before_read = match_rows(
        calls["global_pid"].to_numpy()[before],
        np.where(before >= 0, calls["correlation_id"].to_numpy()[before], -1),
        ops["global_pid"].to_numpy()[dtoh],
        ops["correlation_id"].to_numpy()[dtoh],
    )
    after_read = before_read >= 0
    syncs.loc[syncs.index[stream_rows[after_read]], "kind"] = SyncKind.READ
    read_start = syncs["start"].to_numpy(np.int64).copy()
    read_start[stream_rows[after_read]] = start[before[after_read]]
    return syncs.assign(read_start_ns=read_start)


def _resolve_scope(syncs: pd.DataFrame, trace: Trace, ops: pd.DataFrame) -> pd.DataFrame:
    """Device, stream and launch cutoff of the work each sync waited for."""
    syncs = syncs.reset_index(drop=True)
    syncs["device_id"] = _thread_device(syncs, ops)
    syncs["scope_stream_id"] = -1
    syncs["cutoff_ns"] = syncs["start"].to_numpy(np.int64)

    copies = syncs["op_stream"].notna()
    syncs.loc[copies, "device_id"] = syncs.loc[copies, "op_device"]
    syncs.loc[copies, "scope_stream_id"] = syncs.loc[copies, "op_stream"]

    activity = trace.sync_activity.drop_duplicates(["global_pid", "correlation_id"])
    joined = syncs[["global_pid", "correlation_id"]].merge(activity, on=["global_pid", "correlation_id"], how="left")
    stream_like = syncs["kind"].isin([SyncKind.STREAM, SyncKind.READ]).to_numpy().copy()
    stream_like &= joined["stream_id"].fillna(-1).to_numpy() >= 0  # -1: none (a device-wide sync)
    syncs.loc[stream_like, "scope_stream_id"] = joined.loc[stream_like, "stream_id"].to_numpy()
    syncs.loc[stream_like, "device_id"] = joined.loc[stream_like, "device_id"].to_numpy()

    events = _event_records(syncs, joined, trace)
    found = events["record_start"].notna().to_numpy()
    syncs.loc[found, "scope_stream_id"] = events.loc[found, "record_stream"].to_numpy()
    syncs.loc[found, "device_id"] = events.loc[found, "record_device"].to_numpy()
    syncs.loc[found, "cutoff_ns"] = events.loc[found, "record_start"].to_numpy()
    return syncs.astype({"device_id": np.int64, "scope_stream_id": np.int64, "cutoff_ns": np.int64})


def _thread_device(syncs: pd.DataFrame, ops: pd.DataFrame) -> np.ndarray:
    """The device of the thread's latest launch before each sync (else its process's first device)."""
    launch_start, sync_start = ops["launch_start"].to_numpy(), syncs["start"].to_numpy()
    device = np.full(len(syncs), -1, np.int64)
    for mine, rows in rows_by_key([ops["launch_tid"].to_numpy()], [syncs["global_tid"].to_numpy()], launch_start):
        device[mine] = take_matched(ops["device_id"].to_numpy(), latest_at(launch_start[rows], rows, sync_start[mine]))
    first_of_process = ops.groupby("global_pid")["device_id"].first()
    fallback = syncs["global_pid"].map(first_of_process).fillna(0).to_numpy(np.int64)
    return np.where(device >= 0, device, fallback)


def _event_records(syncs: pd.DataFrame, activity: pd.DataFrame, trace: Trace) -> pd.DataFrame:
    """For event syncs: the latest record of the awaited event before the sync (stream, time)."""
    out = pd.DataFrame({"record_start": np.nan, "record_stream": np.nan, "record_device": np.nan}, index=syncs.index)
    is_event = (syncs["kind"] == SyncKind.EVENT).to_numpy() & (activity["event_id"].fillna(-1).to_numpy() >= 0)
    if not is_event.any() or trace.cuda_events.empty:
        return out
    events, api = trace.cuda_events, trace.api
    call = match_rows(
        events["global_pid"].to_numpy(),
        events["correlation_id"].to_numpy(),
        api["global_pid"].to_numpy(),
        api["correlation_id"].to_numpy(),
    )
    records = events.assign(record_start=take_matched(api["start"].to_numpy(), call)).loc[call >= 0]
    records = records.rename(columns={"stream_id": "record_stream", "device_id": "record_device"})
    records = records[["global_pid", "event_id", "record_start", "record_stream", "record_device"]]
    wanted = pd.DataFrame(
        {
            "row": np.flatnonzero(is_event),
            "global_pid": syncs["global_pid"].to_numpy()[is_event],
            "event_id": activity["event_id"].to_numpy()[is_event].astype(np.int64),
            "start": syncs["start"].to_numpy()[is_event],
        }
    ).sort_values("start")
    records = records.sort_values("record_start")
    matched = pd.merge_asof(
        wanted, records, left_on="start", right_on="record_start", by=["global_pid", "event_id"], direction="backward"
    )
    out.iloc[matched["row"].to_numpy()] = matched[["record_start", "record_stream", "record_device"]].to_numpy()
    return out
