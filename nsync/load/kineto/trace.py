"""Read a torch.profiler (Kineto) Chrome trace (``.json``, ``.json.gz``, ``*.pt.trace.json.gz``) into the same
:class:`~nsync.load.model.Trace` the nsys reader fills: the stages never learn which profiler wrote it.

What maps to what (times in Kineto are microseconds with three decimals; here nanoseconds from the trace's first
event, as nsys's are from its session's start):

- ``cuda_runtime`` / ``cuda_driver`` events -> ``api`` (their ``args.correlation`` links them to GPU work);
- ``kernel`` / ``gpu_memcpy`` / ``gpu_memset`` -> ``gpu_ops``; a copy's direction and memories from its name
  (``Memcpy DtoH (Device -> Pageable)``), as CUPTI words them;
- ``python_function`` events (``with_stack=True``) -> the Python stack of each call (nsync.load.kineto.stacks),
  each frame placed on its line from the source (nsync.load.frame_lines);
- ``user_annotation`` (``record_function``, ``ProfilerStep#N``) -> ``nvtx_ranges``; PyTorch's own
  ``Optimizer.step#SGD.step`` annotations stand for nsync's optimizer-step marks where the trace has none;
- ``cuda_sync`` events (``enable_cuda_sync_events``) -> ``sync_activity`` (the stream a sync waited on) and, of an
  event sync, ``cuda_events`` (the awaited event's record);
- ``deviceProperties`` -> ``gpus``; ``thread_name`` metadata -> ``threads``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from nsync.code import search_folders
from nsync.load.frame_lines import FrameLines
from nsync.load.kineto.decode import Event, decoded
from nsync.load.kineto.stacks import python_frames, stacks_of_calls
from nsync.load.launches import with_launches
from nsync.load.model import COPY_DIRECTIONS, GPU_OP_KINDS, MEMORY_KINDS, PID_MASK, StackTable, Trace
from nsync.marks import STEP_MARK
from nsync.notices import Notice

Progress = Callable[[str], None]
OPTIMIZER_STEP = re.compile(r"^Optimizer\.step#")
_COPY_NAME = re.compile(r"^Memcpy (?P<direction>\w+) \((?P<src>[\w ]+) -> (?P<dst>[\w ]+)\)")
_SET_NAME = re.compile(r"^Memset \((?P<dst>[\w ]+)\)")
GPU_CATEGORIES = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
API_CATEGORIES = ("cuda_runtime", "cuda_driver")


def load_kineto(
    path: Path,
    progress: Progress | None = None,
    keep_api: Callable[[str], bool] | None = None,
    window_s: tuple[float, float | None] | None = None,
    source_dirs: list[Path] | None = None,
) -> Trace:
    """The trace in ``path``; TraceError (one line) where it is no Chrome trace nsync can read. ``source_dirs``:
    where else the program's files are looked for (its frames are placed on their lines from them)."""
    say = progress or (lambda _msg: None)
    say("reading the torch.profiler trace")
    data, repaired = decoded(path)
    events = data.traceEvents
    say(f"arranging {len(events):,} events")
    by_cat = _indices_by(events, lambda e: e.cat)
    base_ns = _base_ns(events, by_cat)
    host_pid = _host_pid(events, by_cat)
    api = _api(events, by_cat, base_ns, host_pid, keep_api)
    gpu_ops = _gpu_ops(events, by_cat, base_ns, host_pid)
    sync_activity, cuda_events = _sync_events(events, by_cat.get("cuda_sync", []), host_pid)
    python = _python_events(events, by_cat.get("python_function", []), base_ns)
    stacks, lines = StackTable(), FrameLines(search_folders(path, source_dirs))
    api["py_stack_id"] = stacks_of_calls(python, api, stacks, lines)
    ranges = _ranges(events, by_cat.get("user_annotation", []), base_ns)
    api, gpu_ops, ranges = _in_window(window_s, api, gpu_ops, ranges)
    gpu_ops = with_launches({c: gpu_ops[c].values for c in gpu_ops}, api)[0]
    spans = [frame[c] for frame in (api, gpu_ops) for c in ("start", "end") if len(frame)]
    devices = data.deviceProperties
    trace = Trace(
        path=path,
        profiler="torch.profiler",
        profiler_version=None,
        schema_version=None if data.schemaVersion is None else str(data.schemaVersion),
        api=api,
        gpu_ops=gpu_ops,
        gpu_busy_extra=pd.DataFrame({c: np.zeros(0, np.int64) for c in ("start", "end", "global_pid")}),
        sync_activity=sync_activity,
        cuda_events=cuda_events,
        nvtx_ranges=ranges,
        py_samples=_empty(("start", "global_tid", "stack_id")),
        callchains=pd.DataFrame(
            {"callchain_id": np.zeros(0, np.int64), "depth": np.zeros(0, np.int64), "function": [], "module": []}
        ),
        stack_table=stacks,
        threads=_threads(events, by_cat.get("", [])),
        gpus=pd.DataFrame(
            {"device_id": [d.id for d in devices], "name": [d.name for d in devices], "uuid": [""] * len(devices)}
        ),
        span_ns=(min(int(s.min()) for s in spans), max(int(s.max()) for s in spans)) if spans else None,
    )
    trace.warnings.extend(_warnings(trace, int((~python["is_c"]).sum()), lines, repaired))
    return trace


def _indices_by(events: list[Event], key: Callable[[Event], str]) -> dict[str, list[int]]:
    codes, names = pd.factorize(pd.Series([key(e) for e in events], dtype=object))
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(names) + 1))
    return {str(name): order[bounds[k] : bounds[k + 1]].tolist() for k, name in enumerate(names)}


def _ns(events: list[Event], rows: list[int], field: str) -> np.ndarray:
    return np.rint(np.array([getattr(events[i], field) for i in rows], np.float64) * 1000.0).astype(np.int64)


def _base_ns(events: list[Event], by_cat: dict[str, list[int]]) -> int:
    """The trace's first timed event (a CUDA call, a GPU op, a Python frame or a range): times count from it."""
    rows = [
        i
        for cat in (*API_CATEGORIES, *GPU_CATEGORIES, "python_function", "user_annotation", "cpu_op")
        for i in by_cat.get(cat, [])
    ]
    return int(_ns(events, rows, "ts").min()) if rows else 0


def _int_ids(values: list[int | str]) -> np.ndarray:
    """Kineto's pid and tid: integers, or a label for its own rows ('Spans'): those as 0."""
    return np.array([v if isinstance(v, int) else 0 for v in values], np.int64) & PID_MASK


def _host_pid(events: list[Event], by_cat: dict[str, list[int]]) -> int:
    """The profiled process (one per trace), as an nsys-style global process id."""
    rows = by_cat.get("cuda_runtime") or by_cat.get("python_function") or by_cat.get("cpu_op") or []
    pids = _int_ids([events[i].pid for i in rows])
    return int(np.bincount(pids).argmax()) << 24 if len(pids) else 0


def _global_tids(events: list[Event], rows: list[int]) -> np.ndarray:
    return (_int_ids([events[i].pid for i in rows]) << 24) | _int_ids([events[i].tid for i in rows])


def _arg(events: list[Event], rows: list[int], field: str) -> np.ndarray:
    values = [getattr(events[i].args, field, None) if events[i].args is not None else None for i in rows]
    return np.array([-1 if v is None else v for v in values], np.int64)


def _api(
    events: list[Event], by_cat: dict[str, list[int]], base_ns: int, host_pid: int, keep: Callable[[str], bool] | None
) -> pd.DataFrame:
    rows = sorted(i for cat in API_CATEGORIES for i in by_cat.get(cat, []))
    names = pd.Series([events[i].name for i in rows], dtype=object)
    if keep is not None and len(rows):
        kept = _kept(names, keep)
        rows, names = [r for r, k in zip(rows, kept) if k], names[kept].reset_index(drop=True)
    start = _ns(events, rows, "ts") - base_ns
    frame = pd.DataFrame(
        {
            "start": start,
            "end": start + _ns(events, rows, "dur"),
            "global_tid": _global_tids(events, rows),
            "correlation_id": _arg(events, rows, "correlation"),
            "global_pid": np.full(len(rows), host_pid, np.int64),
            "api": names.astype("category"),
            "py_stack_id": np.full(len(rows), -1, np.int64),
            "callchain_id": np.full(len(rows), -1, np.int64),
        }
    )
    return frame.sort_values("start", kind="stable").reset_index(drop=True)


def _kept(names: pd.Series, keep: Callable[[str], bool]) -> np.ndarray:
    """``keep`` asked once per distinct name."""
    codes, uniques = pd.factorize(names)
    return np.array([bool(keep(str(u))) for u in uniques], bool)[codes] if len(uniques) else np.zeros(0, bool)


def _gpu_ops(events: list[Event], by_cat: dict[str, list[int]], base_ns: int, host_pid: int) -> pd.DataFrame:
    rows = sorted(i for cat in GPU_CATEGORIES for i in by_cat.get(cat, []))
    start = _ns(events, rows, "ts") - base_ns
    names = pd.Series([events[i].name for i in rows], dtype=object)
    kind = pd.Series([GPU_CATEGORIES[events[i].cat] for i in rows], dtype=object)
    copies, sets = names.str.extract(_COPY_NAME), names.str.extract(_SET_NAME)
    src = copies["src"].str.lower()
    dst = copies["dst"].str.lower().where(kind == "memcpy", sets["dst"].str.lower())
    frame = pd.DataFrame(
        {
            "start": start,
            "end": start + _ns(events, rows, "dur"),
            "global_pid": np.full(len(rows), host_pid, np.int64),
            "device_id": _arg(events, rows, "device"),
            "stream_id": _arg(events, rows, "stream"),
            "correlation_id": _arg(events, rows, "correlation"),
            "bytes": np.maximum(_arg(events, rows, "bytes"), 0),
            "op": pd.Categorical(kind, categories=list(GPU_OP_KINDS)),
            "name": names.where(kind == "kernel").astype("category"),  # (a copy's or memset's: none, as nsys's)
            "copy_direction": pd.Categorical(copies["direction"], categories=list(COPY_DIRECTIONS)),
            "src_memory": pd.Categorical(src, categories=list(MEMORY_KINDS)),
            "dst_memory": pd.Categorical(dst, categories=list(MEMORY_KINDS)),
        }
    )
    return frame.sort_values("start", kind="stable").reset_index(drop=True)


def _sync_events(events: list[Event], rows: list[int], host_pid: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Kineto's ``cuda_sync`` events (CUPTI's synchronization records, where the profiler was asked for them) as
    nsys's SYNCHRONIZATION rows: the stream a sync waited on (-1: the device), by its call's correlation; and, of
    an event sync, the awaited event's record (its call's correlation and stream) as a CUDA_EVENT row."""
    links = {
        "global_pid": np.full(len(rows), host_pid, np.int64),
        "correlation_id": _arg(events, rows, "correlation"),
        "device_id": _arg(events, rows, "device"),
        "stream_id": _arg(events, rows, "stream"),
        "event_id": _arg(events, rows, "wait_on_cuda_event_id"),
        "event_sync_id": np.full(len(rows), -1, np.int64),
    }
    activity = pd.DataFrame(links).loc[lambda f: f["correlation_id"] >= 0].reset_index(drop=True)
    records = pd.DataFrame(
        links
        | {
            "correlation_id": _arg(events, rows, "wait_on_cuda_event_record_corr_id"),
            "stream_id": _arg(events, rows, "wait_on_stream"),
        }
    )
    known = (records["correlation_id"] >= 0) & (records["stream_id"] >= 0) & (records["event_id"] >= 0)
    return activity, records.loc[known].drop_duplicates().reset_index(drop=True)


def _python_events(events: list[Event], rows: list[int], base_ns: int) -> pd.DataFrame:
    start = _ns(events, rows, "ts") - base_ns
    return python_frames(
        pd.Series([events[i].name for i in rows], dtype=object),
        start,
        start + _ns(events, rows, "dur"),
        _global_tids(events, rows),
        _arg(events, rows, "python_id"),
        _arg(events, rows, "python_parent_id"),
    )


def _ranges(events: list[Event], rows: list[int], base_ns: int) -> pd.DataFrame:
    names = pd.Series([events[i].name for i in rows], dtype=object)
    if not names.eq(STEP_MARK).any():  # PyTorch's own optimizer-step annotations stand for nsync's marks
        names = names.mask(names.str.match(OPTIMIZER_STEP).fillna(False).astype(bool), STEP_MARK)
    start = _ns(events, rows, "ts") - base_ns
    frame = pd.DataFrame(
        {"start": start, "end": start + _ns(events, rows, "dur"), "global_tid": _global_tids(events, rows)}
    )
    return frame.assign(name=names.to_numpy(object)).sort_values("start", kind="stable").reset_index(drop=True)


def _threads(events: list[Event], rows: list[int]) -> pd.DataFrame:
    named = [i for i in rows if events[i].ph == "M" and events[i].name == "thread_name" and events[i].args]
    frame = pd.DataFrame(
        {
            "global_tid": _global_tids(events, named),
            "name": [str(events[i].args.name or "") for i in named],  # type: ignore[union-attr]
        }
    )
    return frame.drop_duplicates("global_tid", keep="last").reset_index(drop=True)


def _in_window(
    window_s: tuple[float, float | None] | None, *frames: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    api, ops, ranges = frames
    if window_s is None:
        return api, ops, ranges
    low = int(window_s[0] * 1e9)
    high = None if window_s[1] is None else int(window_s[1] * 1e9)

    def inside(frame: pd.DataFrame) -> pd.DataFrame:
        keep = frame["start"] >= low
        if high is not None:
            keep &= frame["start"] <= high
        return frame.loc[keep].reset_index(drop=True)

    return inside(api), inside(ops), inside(ranges)


def _empty(columns: tuple[str, ...]) -> pd.DataFrame:
    return pd.DataFrame({c: np.zeros(0, np.int64) for c in columns})


def _warnings(trace: Trace, python_frames: int, lines: FrameLines, repaired_quotes: int) -> list[Notice]:
    """What the trace lacks or had mended, and which figures that takes away."""
    notes = []
    if repaired_quotes:
        notes.append(
            Notice(
                "kineto-trace",
                f"{repaired_quotes} quote{'s' if repaired_quotes > 1 else ''} inside this trace's strings were not "
                "escaped (a torch.profiler export's fault): read as part of the string; names there may be cut",
            )
        )
    if not trace.has_cuda:
        notes.append(
            Notice(
                "kineto-trace",
                "this torch.profiler trace has no CUDA activity (no cuda_runtime call, no kernel): capture with "
                "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] on a CUDA build of torch",
            )
        )
    if python_frames == 0 and len(trace.api):
        notes.append(
            Notice(
                "python-frames",
                "this torch.profiler trace has no Python frames: syncs are named by their CUDA call only; capture "
                "with torch.profiler.profile(..., with_stack=True) to name Python lines",
            )
        )
    if lines.unread and not lines.read:
        named = ", ".join(sorted(lines.unread)[:3])
        notes.append(
            Notice(
                "python-lines",
                f"the program's files ({named}) are not readable here: torch.profiler names each Python frame by "
                "its function's first line, and without the source nsync names the function, not the line that "
                "synced (run from the program's folder, or pass --source-dir)",
            )
        )
    return notes
