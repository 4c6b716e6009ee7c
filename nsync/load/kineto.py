"""Read a torch.profiler (Kineto) Chrome trace (``.json``, ``.json.gz``, ``*.pt.trace.json.gz``) into the same
:class:`~nsync.load.model.Trace` the nsys reader fills: the stages never learn which profiler wrote it.

What maps to what (times in Kineto are microseconds with three decimals; here nanoseconds from the trace's first
event, as nsys's are from its session's start):

- ``cuda_runtime`` / ``cuda_driver`` events -> ``api`` (their ``args.correlation`` links them to GPU work);
- ``kernel`` / ``gpu_memcpy`` / ``gpu_memset`` -> ``gpu_ops``; a copy's direction and memories from its name
  (``Memcpy DtoH (Device -> Pageable)``), as CUPTI words them;
- ``python_function`` events (``with_stack=True``) -> the Python stack of each call: the innermost Python frame
  on the call's thread whose interval holds the call, and its parents (``Python parent id``); C functions
  (``<built-in ...>``) are left out, as nsys's Python backtraces leave them out;
- ``user_annotation`` (``record_function``, ``ProfilerStep#N``) -> ``nvtx_ranges``; PyTorch's own
  ``Optimizer.step#SGD.step`` annotations stand for nsync's optimizer-step marks where the trace has none;
- ``deviceProperties`` -> ``gpus``; ``thread_name`` metadata -> ``threads``.

Kineto writes file names with the ``sys.path`` prefix cut off (``torch/nn/modules/module.py``, ``typing.py``,
``train.py``): a standard-library module becomes ``<stdlib>/typing.py``, a file in a package folder
``site-packages/PKG/...`` (unless the program itself runs from that package), a top-level file stays the
user's.
"""

from __future__ import annotations

import gzip
import re
import sys
import zlib
from collections.abc import Callable
from pathlib import Path

import msgspec
import numpy as np
import pandas as pd

from nsync.errors import TraceError
from nsync.load.model import EVENT_LINK_COLUMNS, Frame, StackTable, Trace
from nsync.load.readers import COPY_DIRECTIONS, GPU_OP_KINDS, MEMORY_OF_KIND, PID_MASK, with_launches
from nsync.marks import STEP_MARK
from nsync.notices import Notice

Progress = Callable[[str], None]
GZIP_MAGIC = b"\x1f\x8b"
OPTIMIZER_STEP = re.compile(r"^Optimizer\.step#")
_FRAME_NAME = re.compile(r"^(?P<file>.*)\((?P<line>\d+)\): (?P<function>.*)$")
_COPY_NAME = re.compile(r"^Memcpy (?P<direction>\w+) \((?P<src>[\w ]+) -> (?P<dst>[\w ]+)\)")
_SET_NAME = re.compile(r"^Memset \((?P<dst>[\w ]+)\)")
GPU_CATEGORIES = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
API_CATEGORIES = ("cuda_runtime", "cuda_driver")


class _Args(msgspec.Struct):
    correlation: int | None = None
    python_id: int | None = msgspec.field(default=None, name="Python id")
    python_parent_id: int | None = msgspec.field(default=None, name="Python parent id")
    device: int | None = None
    stream: int | None = None
    bytes: int | None = None
    name: str | None = None  # a metadata event's: the thread's or process's name


class _Event(msgspec.Struct):
    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: float = 0.0
    dur: float = 0.0
    args: _Args | None = None


class _Device(msgspec.Struct):
    id: int = 0
    name: str = ""


class _File(msgspec.Struct):
    traceEvents: list[_Event]
    deviceProperties: list[_Device] = []
    schemaVersion: int | None = None


def is_kineto(path: Path) -> bool:
    """Whether ``path`` holds a Chrome-trace JSON, by its first bytes: a ``{``, or gzip (no nsys export is
    gzip-compressed: a damaged one is then said by this reader)."""
    try:
        with path.open("rb") as handle:
            head = handle.read(64)
    except OSError:
        return False
    return head.startswith(GZIP_MAGIC) or head.lstrip().startswith(b"{")


def load_kineto(
    path: Path,
    progress: Progress | None = None,
    keep_api: Callable[[str], bool] | None = None,
    window_s: tuple[float, float | None] | None = None,
) -> Trace:
    """The trace in ``path``; TraceError (one line) where it is no Chrome trace nsync can read."""
    say = progress or (lambda _msg: None)
    say("reading the torch.profiler trace")
    data = _decoded(path)
    events = data.traceEvents
    say(f"arranging {len(events):,} events")
    by_cat = _indices_by(events, lambda e: e.cat)
    base_ns = _base_ns(events, by_cat)
    host_pid = _host_pid(events, by_cat)
    api = _api(events, by_cat, base_ns, host_pid, keep_api)
    gpu_ops = _gpu_ops(events, by_cat, base_ns, host_pid)
    python = _python_events(events, by_cat.get("python_function", []), base_ns)
    stacks = StackTable()
    api["py_stack_id"] = _stacks_of_calls(python, api, stacks)
    ranges = _ranges(events, by_cat.get("user_annotation", []), base_ns)
    api, gpu_ops, ranges = _in_window(window_s, api, gpu_ops, ranges)
    gpu_ops = with_launches({c: gpu_ops[c].values for c in gpu_ops}, api)[0]
    spans = [frame[c] for frame in (api, gpu_ops) for c in ("start", "end") if len(frame)]
    trace = Trace(
        path=path,
        nsys_version=None,
        schema_version=None if data.schemaVersion is None else str(data.schemaVersion),
        api=api,
        gpu_ops=gpu_ops,
        gpu_busy_extra=pd.DataFrame({c: np.zeros(0, np.int64) for c in ("start", "end", "global_pid")}),
        sync_activity=_empty(EVENT_LINK_COLUMNS),
        cuda_events=_empty(EVENT_LINK_COLUMNS),
        nvtx_ranges=ranges,
        py_samples=_empty(("start", "global_tid", "stack_id")),
        callchains=pd.DataFrame(
            {"callchain_id": np.zeros(0, np.int64), "depth": np.zeros(0, np.int64), "function": [], "module": []}
        ),
        stack_table=stacks,
        threads=_threads(events, by_cat.get("", [])),
        gpus=pd.DataFrame(
            {
                "device_id": [d.id for d in data.deviceProperties],
                "name": [d.name for d in data.deviceProperties],
                "uuid": ["" for _ in data.deviceProperties],
            }
        ),
        span_ns=(min(int(s.min()) for s in spans), max(int(s.max()) for s in spans)) if spans else None,
        capture={"profiler": "torch.profiler"},
    )
    trace.warnings.extend(_warnings(trace, len(python)))
    return trace


def _decoded(path: Path) -> _File:
    try:
        raw = path.read_bytes()
        if raw.startswith(GZIP_MAGIC):
            raw = gzip.decompress(raw)
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as err:
        raise TraceError(f"{path}: cannot read the trace ({err})") from err
    try:
        return msgspec.json.decode(raw, type=_File)
    except msgspec.ValidationError as err:
        raise TraceError(f"{path}: not a torch.profiler trace nsync can read ({err})") from err
    except msgspec.DecodeError as err:
        raise TraceError(f"{path}: not valid JSON ({err})") from err


def _indices_by(events: list[_Event], key: Callable[[_Event], str]) -> dict[str, list[int]]:
    codes, names = pd.factorize(pd.Series([key(e) for e in events], dtype=object))
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(names) + 1))
    return {str(name): order[bounds[k] : bounds[k + 1]].tolist() for k, name in enumerate(names)}


def _ns(events: list[_Event], rows: list[int], field: str) -> np.ndarray:
    return np.rint(np.array([getattr(events[i], field) for i in rows], np.float64) * 1000.0).astype(np.int64)


def _base_ns(events: list[_Event], by_cat: dict[str, list[int]]) -> int:
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


def _host_pid(events: list[_Event], by_cat: dict[str, list[int]]) -> int:
    """The profiled process (one per trace), as an nsys-style global process id."""
    rows = by_cat.get("cuda_runtime") or by_cat.get("python_function") or by_cat.get("cpu_op") or []
    pids = _int_ids([events[i].pid for i in rows])
    return int(np.bincount(pids).argmax()) << 24 if len(pids) else 0


def _global_tids(events: list[_Event], rows: list[int]) -> np.ndarray:
    return (_int_ids([events[i].pid for i in rows]) << 24) | _int_ids([events[i].tid for i in rows])


def _arg(events: list[_Event], rows: list[int], field: str) -> np.ndarray:
    values = [getattr(events[i].args, field, None) if events[i].args is not None else None for i in rows]
    return np.array([-1 if v is None else v for v in values], np.int64)


def _api(
    events: list[_Event], by_cat: dict[str, list[int]], base_ns: int, host_pid: int, keep: Callable[[str], bool] | None
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


def _gpu_ops(events: list[_Event], by_cat: dict[str, list[int]], base_ns: int, host_pid: int) -> pd.DataFrame:
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
            "src_memory": pd.Categorical(src, categories=list(MEMORY_OF_KIND)),
            "dst_memory": pd.Categorical(dst, categories=list(MEMORY_OF_KIND)),
        }
    )
    return frame.sort_values("start", kind="stable").reset_index(drop=True)


def _python_events(events: list[_Event], rows: list[int], base_ns: int) -> pd.DataFrame:
    """The Python frames (no C function), each with its parent row among them (-1: none)."""
    names = pd.Series([events[i].name for i in rows], dtype=object)
    python = ~names.str.startswith("<built-in").to_numpy(bool)
    start = _ns(events, rows, "ts") - base_ns
    frame = pd.DataFrame(
        {
            "start": start,
            "end": start + _ns(events, rows, "dur"),
            "global_tid": _global_tids(events, rows),
            "name": names,
            "id": _arg(events, rows, "python_id"),
            "parent": _arg(events, rows, "python_parent_id"),
        }
    )
    row_of_id = pd.Index(frame["id"]).get_indexer(frame["parent"])  # -1 where the parent is not in the trace
    parent = np.where(frame["parent"].to_numpy() >= 0, row_of_id, -1)
    while True:  # a C function's child: its parent is the nearest Python frame above it
        through = (parent >= 0) & ~python[np.maximum(parent, 0)]
        if not through.any():
            break
        parent[through] = parent[parent[through]]
    frame["parent"] = parent
    kept = np.flatnonzero(python)
    renumber = np.full(len(frame), -1, np.int64)
    renumber[kept] = np.arange(len(kept))
    frame = frame.iloc[kept].reset_index(drop=True)
    frame["parent"] = np.where(frame["parent"] >= 0, renumber[np.maximum(frame["parent"], 0)], -1)
    return frame


def _stacks_of_calls(python: pd.DataFrame, api: pd.DataFrame, stacks: StackTable) -> np.ndarray:
    """Each call's Python stack (an id in ``stacks``, -1: none): from the innermost frame holding the call."""
    if not len(python) or not len(api):
        return np.full(len(api), -1, np.int64)
    threads, thread_code = np.unique(python["global_tid"].to_numpy(), return_inverse=True)
    order = np.lexsort((python["start"].to_numpy(), thread_code))
    start, end, parent = (python[c].to_numpy() for c in ("start", "end", "parent"))
    call_thread = np.searchsorted(threads, api["global_tid"].to_numpy())
    known = (call_thread < len(threads)) & (threads[np.minimum(call_thread, len(threads) - 1)] == api["global_tid"])
    t = api["start"].to_numpy()
    # the last frame of the call's thread to start at or before the call, then up its parents to one that holds it
    sorted_thread, sorted_start = thread_code[order], start[order]
    offsets = np.searchsorted(sorted_thread, np.arange(len(threads) + 1))
    at = np.full(len(api), -1, np.int64)
    for k in range(len(threads)):  # one vectorised search per thread
        calls = np.flatnonzero(known & (call_thread == k))
        found = np.searchsorted(sorted_start[offsets[k] : offsets[k + 1]], t[calls], side="right") - 1
        at[calls] = np.where(found >= 0, order[offsets[k] + np.maximum(found, 0)], -1)
    while True:
        outside = (at >= 0) & (end[np.maximum(at, 0)] < t)
        if not outside.any():
            break
        at[outside] = parent[at[outside]]
    return _interned(python, at, stacks)


def _interned(python: pd.DataFrame, innermost: np.ndarray, stacks: StackTable) -> np.ndarray:
    """Stack ids for the innermost frames given (-1 stays -1): each distinct chain of frames interned once."""
    frames = _frames(python["name"])
    parent = python["parent"].to_numpy()
    ids = np.full(len(innermost), -1, np.int64)
    used = np.unique(innermost[innermost >= 0])
    chain_of: dict[int, int] = {}
    for row in used.tolist():  # the distinct frames that hold calls: a few thousand at most in a long capture
        chain, at = [], row
        while at >= 0:
            chain.append(frames[at])
            at = int(parent[at])
        chain_of[row] = stacks.intern(tuple(chain))
    if len(used):
        lookup = pd.Series(chain_of)
        held = innermost >= 0
        ids[held] = lookup.reindex(innermost[held]).to_numpy(np.int64)
    return ids


def _frames(names: pd.Series) -> list[Frame]:
    codes, uniques = pd.factorize(names)
    parsed = pd.Series(uniques, dtype=object).str.extract(_FRAME_NAME)
    roots = {_top(f) for f in parsed.loc[parsed["function"] == "<module>", "file"].dropna()}
    frames = [
        Frame(str(name), str(name), 0) if pd.isna(file) else Frame(str(function), _file(str(file), roots), int(line))
        for name, file, line, function in zip(uniques, parsed["file"], parsed["line"], parsed["function"])
    ]
    return [frames[c] for c in codes]


def _top(file: str) -> str:
    return file.split("/", 1)[0].removesuffix(".py")


def _file(file: str, roots: set[str]) -> str:
    """A file as Kineto wrote it, as the stages read files: stdlib and packages marked as such."""
    if file.startswith(("/", "<")) or re.match(r"^[A-Za-z]:[\\/]", file):
        return file
    top = _top(file)
    if top in sys.stdlib_module_names:
        return f"<stdlib>/{file}"
    if "/" in file and top not in roots:
        return f"site-packages/{file}"
    return file


def _ranges(events: list[_Event], rows: list[int], base_ns: int) -> pd.DataFrame:
    names = pd.Series([events[i].name for i in rows], dtype=object)
    if not names.eq(STEP_MARK).any():  # PyTorch's own optimizer-step annotations stand for nsync's marks
        names = names.mask(names.str.match(OPTIMIZER_STEP).fillna(False).astype(bool), STEP_MARK)
    start = _ns(events, rows, "ts") - base_ns
    frame = pd.DataFrame(
        {"start": start, "end": start + _ns(events, rows, "dur"), "global_tid": _global_tids(events, rows)}
    )
    return frame.assign(name=names.to_numpy(object)).sort_values("start", kind="stable").reset_index(drop=True)


def _threads(events: list[_Event], rows: list[int]) -> pd.DataFrame:
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


def _warnings(trace: Trace, python_frames: int) -> list[Notice]:
    """What the trace lacks, and which figures that takes away."""
    notes = []
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
    return notes
