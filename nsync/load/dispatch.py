"""The one door to the loader: a trace handed to the reader of its format, and a trace split by process."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from nsync.load.files import newest_torch_trace, profiler_of, require_file
from nsync.load.kineto import load_kineto
from nsync.load.model import Trace, global_pid, os_pid
from nsync.load.nsys import load_nsys
from nsync.notices import Notice

Progress = Callable[[str], None]


def load_trace(
    path: str | Path,
    progress: Progress | None = None,
    keep_api: Callable[[str], bool] | None = None,
    window_s: tuple[float, float | None] | None = None,
    max_memory_bytes: int | None = None,
    source_dirs: list[Path] | None = None,
) -> Trace:
    """Load ``path`` (``.sqlite``, ``.sqlite.xz``, or a torch.profiler ``.json[.gz]``, told by its content) read-only.

    ``keep_api`` (a test on API names) leaves out calls the caller has no use for, before they are read.
    ``window_s`` reads only what starts in that part of the capture (seconds from its start). A trace
    that would not fit in ``max_memory_bytes`` (default: the memory available) is read for as much of
    its time as fits, with a warning. ``source_dirs``: where else a torch.profiler trace's program files are
    looked for, to place its frames on their lines (nsync.load.frame_lines). Raises
    :class:`nsync.errors.TraceError` when the file cannot be analysed.
    """
    say = progress or (lambda _msg: None)
    chosen = newest_torch_trace(Path(path)) if Path(path).is_dir() else None
    if chosen is not None:
        trace = load_trace(chosen[0], progress, keep_api, window_s, max_memory_bytes, source_dirs)
        said = (
            f"the newest of {chosen[1]} torch.profiler traces in it"
            if chosen[1] > 1
            else "the torch.profiler trace in it"
        )
        trace.warnings.insert(0, Notice("trace-chosen", f"{path}: a folder; read {chosen[0].name}, {said}"))
        return trace
    require_file(Path(path))
    if profiler_of(Path(path)) == "torch.profiler":
        return load_kineto(Path(path), say, keep_api, window_s, source_dirs)
    return load_nsys(Path(path), say, keep_api, window_s, max_memory_bytes)


def split_processes(trace: Trace) -> dict[int, Trace]:
    """One trace per process that ran GPU work, by its OS process id, in that order (a capture of
    ``torchrun`` holds every rank): each keeps its own calls, GPU ops, syncs, ranges, samples and threads, and
    shares the strings, stacks, GPUs and metadata."""
    pids = sorted(int(pid) for pid in pd.unique(trace.gpu_ops["global_pid"]))

    def of(frame: pd.DataFrame, pid: int) -> pd.DataFrame:
        column = frame["global_pid"] if "global_pid" in frame else global_pid(frame["global_tid"].to_numpy())
        return frame.loc[np.asarray(column) == pid].reset_index(drop=True)

    tables = ("api", "gpu_ops", "gpu_busy_extra", "sync_activity", "cuda_events", "nvtx_ranges", "py_samples")
    return {
        os_pid(pid): replace(
            trace,
            **{name: of(getattr(trace, name), pid) for name in (*tables, "threads")},
            warnings=list(trace.warnings),
        )
        for pid in pids
    }
