"""The analysed steps' figures: each step's time, GPU idle and exposed idle, their totals over the steps (or the
whole window without steps), the GPUs used, the GPU time of each kernel, and the program's command line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from nsync.keys import dense_codes
from nsync.load import Trace
from nsync.notices import Notice
from nsync.stages.steps import DATA_BOUND_SHARE, Steps, gpu_step_times, launched_in_steps

# one row per analysed step
STEP_STATS_COLUMNS = (
    "start",
    "end",
    "duration_ns",
    "gpu_duration_ns",
    "gpu_idle_ns",
    "exposed_idle_ns",
    "sync_count",
    "data_wait_ns",
)


def cuda_span(trace: Trace, ops: pd.DataFrame) -> tuple[int, int]:
    """From the program's first CUDA call (or GPU op) to the end of its last: the phases' span."""
    first = [int(ops["launch_start"].min()), int(ops["start"].min())]
    last = [int(ops["end"].max())]
    if len(trace.api):
        first.append(int(trace.api["start"].min()))
        last.append(int(trace.api["end"].max()))
    return min(first), max(last)


KERNEL_TIME_CHUNK = 1 << 20  # rows summed at a time: a few MB of temporaries however big the trace


def kernel_time(gpu_ops: pd.DataFrame) -> dict[str, int]:
    names = gpu_ops["name"].cat
    codes = names.codes.to_numpy()  # -1: no name (copies, memsets)
    start, end = gpu_ops["start"].to_numpy(), gpu_ops["end"].to_numpy()
    totals = np.zeros(len(names.categories) + 1, np.int64)
    for first in range(0, len(codes), KERNEL_TIME_CHUNK):
        part = slice(first, first + KERNEL_TIME_CHUNK)
        # float sums are exact below 2**53 ns (104 days) of GPU time per name and chunk
        totals += np.bincount(codes[part] + 1, weights=end[part] - start[part], minlength=len(totals)).astype(np.int64)
    return {str(name): int(total) for name, total in zip(names.categories, totals[1:]) if total > 0}


def program_of(trace: Trace) -> str:
    """``python3 train.py`` from the capture metadata (file names only, so runs in other folders compare)."""
    words = [trace.capture.get("PROCESS_0:COMMAND", "")]
    words += [trace.capture[k] for k in sorted(trace.capture) if k.startswith("PROCESS_0:ARGUMENT_")][:1]
    return " ".join(Path(w).name for w in words if w)


def analysed_window(steps: Steps, ops: pd.DataFrame) -> tuple[int, int]:
    """The analysed steps, or the whole GPU span when there are none."""
    analysed = steps.analysed
    if not analysed.empty:
        return int(analysed["start"].min()), int(analysed["end"].max())
    return int(min(ops["start"].min(), ops["launch_start"].min())), int(ops["end"].max())


def analysed_intervals(steps: Steps, window: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Starts and ends of what the figures cover: the analysed steps, or the window when there are none."""
    analysed = steps.analysed
    if len(analysed):
        return analysed["start"].to_numpy(np.int64), analysed["end"].to_numpy(np.int64)
    return np.array([window[0]], np.int64), np.array([window[1]], np.int64)


def totals_of(
    syncs: pd.DataFrame,
    idle_by_gpu: dict[tuple[int, int], np.ndarray],
    span_ns: int,
    gpu_names: dict[int, str] | None = None,
) -> dict[str, Any]:
    """Sums over the analysed intervals (``idle_by_gpu``: each GPU's idle in each). Each GPU is idle or busy
    over the whole span, so idle + busy = span x GPUs, and each GPU's idle is given on its own."""
    idle_per_gpu = {key: int(idle.sum()) for key, idle in idle_by_gpu.items()}
    gpu_idle = sum(idle_per_gpu.values())
    return {
        "span_ns": span_ns,
        "gpu_count": len(idle_by_gpu),
        "gpu_idle_ns": gpu_idle,
        "gpu_busy_ns": len(idle_by_gpu) * span_ns - gpu_idle,
        "per_gpu": [
            {"device_id": device, "name": (gpu_names or {}).get(device, f"GPU {device}"), "idle_ns": idle}
            for (_pid, device), idle in idle_per_gpu.items()
        ],
        "exposed_idle_ns": int(syncs["exposed_idle_ns"].sum()) if len(syncs) else 0,
        "host_wait_ns": int(syncs["wait_ns"].sum()) if len(syncs) else 0,
        "sync_count": len(syncs),
    }


def gpu_step_times_of(steps: Steps, ops: pd.DataFrame) -> np.ndarray:
    """Each analysed step's time on the GPU."""
    launched = launched_in_steps(steps, ops["launch_start"].to_numpy(np.int64))
    start, end = ops["start"].to_numpy(np.int64), ops["end"].to_numpy(np.int64)
    return gpu_step_times(steps, launched, start, end)[steps.warmup :]


def step_stats(
    steps: Steps,
    syncs: pd.DataFrame,
    idle_by_gpu: dict[tuple[int, int], np.ndarray],
    gpu_step_ns: np.ndarray,
    data_wait_ns: np.ndarray,
) -> pd.DataFrame:
    """One row per analysed step; ``idle_by_gpu`` holds each GPU's idle in each of them (when there are any),
    ``data_wait_ns`` the host's wait for its DataLoader in each."""
    table = steps.analysed.reset_index(drop=True)
    starts, ends = table["start"].to_numpy(np.int64), table["end"].to_numpy(np.int64)
    gpu_idle = np.zeros(len(table), np.int64)
    for idle in idle_by_gpu.values() if len(table) else ():
        gpu_idle += idle
    in_step = syncs.loc[syncs["step"] >= 0]
    exposed = np.bincount(in_step["step"], weights=in_step["exposed_idle_ns"], minlength=len(table))
    count = np.bincount(in_step["step"], minlength=len(table))
    return pd.DataFrame(
        {
            "start": starts,
            "end": ends,
            "duration_ns": ends - starts,
            "gpu_duration_ns": gpu_step_ns,
            "gpu_idle_ns": gpu_idle,
            "exposed_idle_ns": exposed[: len(table)].astype(np.int64),
            "sync_count": count[: len(table)],
            "data_wait_ns": data_wait_ns,
        }
    )


def data_loader_notices(stats: pd.DataFrame) -> list[Notice]:
    """A note where the host thread waits for its DataLoader a large share of its steps: the step is bound by
    data loading, and an unprofiled run slower than the capture is waiting for data, not on a slow host."""
    if stats.empty:
        return []
    wait_ns, step_ns = float(stats["data_wait_ns"].mean()), float(stats["duration_ns"].mean())
    if not step_ns > 0 or wait_ns < DATA_BOUND_SHARE * step_ns:
        return []
    return [
        Notice(
            "data-loader",
            f"the host waited for its DataLoader {wait_ns / 1e6:.3f} ms a step, {100 * wait_ns / step_ns:.0f} % of "
            f"the mean step ({step_ns / 1e6:.3f} ms): the loop is bound by data loading (more workers, lighter "
            "transforms), and steps slower than their median are waiting for data, not on a slow host",
        )
    ]


def gpus_used(trace: Trace, ops: pd.DataFrame) -> tuple[dict[int, str], list[str]]:
    """The name of each device the GPU ops ran on, and their physical identities where the export records them."""
    used = dense_codes(ops["device_id"].to_numpy())[1].tolist()
    names = dict(zip(trace.gpus["device_id"], trace.gpus["name"]))
    uuids = trace.gpus.loc[trace.gpus["device_id"].isin(used), "uuid"]
    return {int(d): str(names.get(d, f"GPU {d}")) for d in used}, sorted({str(u) for u in uuids if u})
