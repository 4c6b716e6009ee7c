"""The in-memory trace: columns (pandas/numpy), never one Python object per event.

All times are integer nanoseconds on the session timeline shared by host and GPU rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from nsync.load.files import Profiler
from nsync.notices import Notice


class Frame(NamedTuple):
    function: str
    file: str
    line: int


Stack = tuple[Frame, ...]  # innermost frame first


class StackTable:
    """Interns stacks: equal stacks share one id, so grouping by call site is integer work. The loader fills
    the trace's with the Python stacks; later stages add theirs (native ones) to a copy."""

    def __init__(self, stacks: list[Stack] | None = None, ids: dict[Stack, int] | None = None) -> None:
        self.stacks: list[Stack] = list(stacks or [])
        self._ids: dict[Stack, int] = dict(ids or {})

    def intern(self, stack: Stack) -> int:
        found = self._ids.get(stack)
        if found is None:
            found = self._ids[stack] = len(self.stacks)
            self.stacks.append(stack)
        return found

    def copy(self) -> StackTable:
        return StackTable(self.stacks, self._ids)


PYTHON_FRAMES_NSYS = "2025.1"  # the first nsys that both records Python backtraces and exports them to SQLite


class CallsiteSource:
    """Where a call's stack came from, best first."""

    PYTHON_BACKTRACE = "python-backtrace"
    NATIVE_CALLCHAIN = "cuda-callchain"
    PYTHON_SAMPLING = "python-sampling"
    NONE = "none"


# The vocabulary of both formats' loaders: what an op is, which way a copy goes, which memory it touches
GPU_OP_KINDS = ("kernel", "memcpy", "memset", "graph")
COPY_DIRECTIONS = ("HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP")
MEMORY_KINDS = ("pageable", "pinned", "device", "array", "managed", "device static", "managed static", "unknown")

# A thread's id as nsys serialises it (``globalTid``: the OS process id in bits 24-47, the thread's in 0-23); a
# torch.profiler trace's ids are written the same way, so that every stage reads one kind of id
PID_MASK = 0xFFFFFF


def global_pid(global_tid: np.ndarray) -> np.ndarray:
    """The process id serialised like nsys's ``globalPid``: the thread's id with the TID bits cleared."""
    gt = np.asarray(global_tid, dtype=np.int64)
    return gt - (gt & PID_MASK)


def os_pid(global_pid: int) -> int:
    """The operating system's process id in a global process id."""
    return (global_pid >> 24) & PID_MASK


def thread_labels(global_tids: list[int], threads: pd.DataFrame) -> dict[int, str]:
    """``MainThread (4242)`` (the thread's name and OS id), or ``thread 4242`` when it has no name."""
    names = dict(zip(threads["global_tid"].tolist(), threads["name"].astype(str).tolist()))
    return {
        tid: f"{names[tid]} ({tid & PID_MASK})" if names.get(tid) else f"thread {tid & PID_MASK}" for tid in global_tids
    }


# The loader's tables, column by column, in nsync's vocabulary (no nsys enum value leaves the loader)
API_COLUMNS = ("start", "end", "global_tid", "correlation_id", "global_pid", "api", "py_stack_id", "callchain_id")
GPU_OP_COLUMNS = (
    *("start", "end", "global_pid", "device_id", "stream_id", "correlation_id", "bytes", "op", "name"),
    *("copy_direction", "src_memory", "dst_memory", "launch_start", "launch_end", "launch_tid"),
)
EVENT_LINK_COLUMNS = ("global_pid", "correlation_id", "device_id", "stream_id", "event_id", "event_sync_id")


@dataclass(frozen=True)
class Trace:
    """One capture, by nsys (an export, normalised across schema versions) or torch.profiler (its Chrome trace).

    Tables (columns):

    - ``api``: CUDA runtime and driver calls, eventClass 0/1 only (backtrace twins folded in):
      start, end, global_tid, global_pid, correlation_id, api (name without
      ``_vNNNN``/``_ptsz``), py_stack_id (Python backtrace: index into ``stacks``, or -1),
      callchain_id (native backtrace in ``callchains``, or -1).
    - ``gpu_ops``: kernels, memcpys and memsets: start, end, global_pid, device_id, stream_id,
      correlation_id, op (kernel|memcpy|memset|graph), name, bytes, copy_direction (HtoD, DtoH, DtoD...),
      src_memory and dst_memory (pageable, pinned, device, managed...; a memset's is the memory it writes),
      and the call that launched it (same process and correlationId): launch_start, launch_end,
      launch_tid (an untraced launch: the op's GPU start, and thread -1).
    - ``gpu_busy_extra``: intervals nsys itself counts as GPU busy (profiler overhead, graph launches):
      start, end, global_pid, device_id.
    - ``sync_activity``: CUPTI SYNCHRONIZATION rows: global_pid, correlation_id, stream_id, event_id,
      event_sync_id (-1: none, as for a device-wide sync's stream).
    - ``cuda_events``: cudaEventRecord activity: global_pid, correlation_id, stream_id, event_id,
      event_sync_id.
    - ``nvtx_ranges``: start, end, global_tid, name.
    - ``py_samples``: Python sampling marks: start, global_tid, stack_id.
    - ``callchains``: native CUDA backtraces, innermost first: callchain_id, depth, function, module.
    - ``threads``: global_tid, name. ``gpus``: device_id, name, uuid (the
      physical device's, '' where the export has none).
    """

    path: Path
    profiler: Profiler
    profiler_version: str | None  # the nsys that exported it (None: unknown, or a torch.profiler trace)
    schema_version: str | None  # the nsys export's schema, or the torch.profiler trace's schemaVersion
    api: pd.DataFrame
    gpu_ops: pd.DataFrame
    gpu_busy_extra: pd.DataFrame
    sync_activity: pd.DataFrame
    cuda_events: pd.DataFrame
    nvtx_ranges: pd.DataFrame
    py_samples: pd.DataFrame
    callchains: pd.DataFrame
    stack_table: StackTable  # the Python stacks; py_stack_id and py_samples' stack_id index it
    threads: pd.DataFrame
    gpus: pd.DataFrame
    span_ns: tuple[int, int] | None
    warnings: list[Notice] = field(default_factory=list)
    capture: dict[str, str] = field(
        default_factory=dict
    )  # what the profiler says of the run (nsys's META_DATA_CAPTURE)

    @property
    def nsys_version(self) -> str | None:
        return self.profiler_version if self.profiler == "nsys" else None

    @property
    def stacks(self) -> list[Stack]:
        return self.stack_table.stacks

    @property
    def has_cuda(self) -> bool:
        return len(self.api) > 0 or len(self.gpu_ops) > 0
