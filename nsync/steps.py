"""Find the program's steps: from NVTX ranges when it has them, else from the kernel pattern."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from nsync.config import AnalysisConfig
from nsync.errors import UsageError
from nsync.load import Trace

_DIGITS = re.compile(r"\d+")
_STEP_EXACT = re.compile(r"^(profilerstep#?n|(train[_ ]?)?step[_ #]?n?|iter(ation)?[_ #]?n?|batch[_ #]?n?)$", re.I)
_STEP_LIKE = re.compile(r"(step|iter|batch)", re.I)
MIN_STEPS = 2
REGULAR_CV = 0.3  # coefficient of variation under which a kernel's launches count as periodic


@dataclass(frozen=True)
class Steps:
    """All steps in time order (start, end, name); the first ``warmup`` are left out of per-step figures."""

    table: pd.DataFrame
    source: str
    warmup: int

    @property
    def analysed(self) -> pd.DataFrame:
        return self.table.iloc[self.warmup :]

    @property
    def count(self) -> int:
        return len(self.analysed)

    def median_index(self) -> int | None:
        """Position (among analysed steps) of the step whose length is closest to the median."""
        analysed = self.analysed
        if analysed.empty:
            return None
        durations = (analysed["end"] - analysed["start"]).to_numpy()
        return int(np.argmin(np.abs(durations - np.median(durations))))


def step_containing(table: pd.DataFrame, t: np.ndarray) -> np.ndarray:
    """Index (in ``table``, steps in time order) of the step [start, end) containing each t, or -1."""
    if table.empty:
        return np.full(len(t), -1, np.int64)
    starts, ends = table["start"].to_numpy(np.int64), table["end"].to_numpy(np.int64)
    k = np.searchsorted(starts, t, side="right") - 1
    return np.where((k >= 0) & (t < ends[np.clip(k, 0, None)]), k, -1)


def launched_in_steps(steps: Steps, launch_start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ops launched inside a step (their rows) and the index of that step (among all steps)."""
    k = step_containing(steps.table, launch_start)
    rows = np.flatnonzero(k >= 0)
    return rows, k[rows]


def gpu_step_times(
    steps: Steps, launched: tuple[np.ndarray, np.ndarray], gpu_start: np.ndarray, gpu_end: np.ndarray
) -> np.ndarray:
    """Each step's time on the GPU (all steps): from the end of the previous step's work to the end of its own.

    A step's work is what was launched inside its range (``launched``, from :func:`launched_in_steps`).
    When the host runs ahead (no syncs), NVTX ranges time the host's enqueueing, not the GPU; successive GPU
    completions time the throughput either way. Shared by the analysis (measured ends) and the what-if
    replay (replayed ends).
    """
    rows, k = launched
    if not len(rows):
        return np.full(len(steps.table), np.nan)
    # in the times' own dtype (int64 measured, float replayed): ufunc.at is fast only without casting
    dtype = np.result_type(gpu_start, gpu_end)
    low, high = (np.iinfo(dtype).min, np.iinfo(dtype).max) if dtype.kind in "iu" else (-np.inf, np.inf)
    last_end, first_start = np.full(len(steps.table), low, dtype), np.full(len(steps.table), high, dtype)
    np.maximum.at(last_end, k, gpu_end[rows])
    np.minimum.at(first_start, k, gpu_start[rows])
    last = np.where(last_end == low, np.nan, last_end)  # a step that launched nothing: NaN
    first = np.where(first_start == high, np.nan, first_start)
    return last - np.concatenate([[first[0]], last[:-1]])


def normalise_range_name(name: str) -> str:
    """``ProfilerStep#12`` and ``iter3`` -> ``ProfilerStep#N`` and ``iterN``."""
    return _DIGITS.sub("N", name)


def find_steps(trace: Trace, ops: pd.DataFrame, config: AnalysisConfig) -> Steps:
    table, source = _nvtx_steps(trace.nvtx_ranges, config.step_range)
    if table is None:
        table, source = _detected_steps(ops)
    if config.warmup_steps is not None:
        if len(table) and config.warmup_steps >= len(table):
            raise UsageError(
                f"cannot skip {config.warmup_steps} warm-up steps (--warmup-steps): the trace has "
                f"{len(table)} steps ({source}), and at least one must be left to analyse"
            )
        warmup = max(config.warmup_steps, 0)
    else:
        warmup = 1 if len(table) >= 4 else 0
    return Steps(table=table.reset_index(drop=True), source=source, warmup=warmup)


def _nvtx_steps(ranges: pd.DataFrame, wanted: str | None) -> tuple[pd.DataFrame | None, str]:
    names = ranges["name"].astype(str)
    normalised = names.map(normalise_range_name)
    if wanted is not None:
        chosen = (names == wanted) | (normalised == normalise_range_name(wanted))
        if not chosen.any():
            available = ", ".join(sorted(set(normalised))[:8]) or "none"
            raise UsageError(f"no NVTX range named {wanted!r} in this trace (ranges: {available})")
        return _one_thread(ranges.loc[chosen]), f"nvtx:{wanted}"
    counts = normalised.value_counts()
    counts = counts[counts >= MIN_STEPS]
    for pattern in (_STEP_EXACT, _STEP_LIKE):
        candidates = [name for name in counts.index if pattern.search(name)]
        if candidates:
            best = max(candidates, key=lambda n: (counts[n], n))
            return _one_thread(ranges.loc[normalised == best]), f"nvtx:{best}"
    return None, "none"


def _one_thread(ranges: pd.DataFrame) -> pd.DataFrame:
    """The ranges of the thread that has most of them, without nested repeats, in time order."""
    tid = ranges["global_tid"].value_counts().idxmax()
    own = ranges.loc[ranges["global_tid"] == tid].sort_values("start")
    ends = own["end"].to_numpy()
    previous_end = np.concatenate([[np.iinfo(np.int64).min], np.maximum.accumulate(ends)[:-1]])
    top_level = own["start"].to_numpy() >= previous_end
    return own.loc[top_level, ["start", "end", "name"]].reset_index(drop=True)


def _detected_steps(ops: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Steps between successive launches of the kernel that recurs most regularly.

    Among kernels whose launch intervals vary little (coefficient of variation below REGULAR_CV), the
    step kernel is one with the most common count (one launch per step), launched earliest.
    """
    empty = pd.DataFrame(
        {"start": pd.Series(dtype=np.int64), "end": pd.Series(dtype=np.int64), "name": pd.Series(dtype=object)}
    )
    kernels = ops.loc[(ops["op"] == "kernel") & (ops["launch_tid"] >= 0), ["name", "launch_start"]]
    if kernels.empty:
        return empty, "none"
    kernels = kernels.sort_values("launch_start")
    grouped = kernels.groupby("name", observed=True)["launch_start"]
    gaps = kernels["launch_start"] - grouped.shift(1)
    stats = pd.DataFrame(
        {
            "count": grouped.size(),
            "first": grouped.min(),
            "gap_mean": gaps.groupby(kernels["name"], observed=True).mean(),
            "gap_std": gaps.groupby(kernels["name"], observed=True).std(),
        }
    )
    stats = stats.loc[(stats["count"] >= MIN_STEPS + 1) & (stats["gap_mean"] > 0)]
    regular = stats.loc[stats["gap_std"].fillna(0) / stats["gap_mean"] < REGULAR_CV]
    if regular.empty:
        return empty, "none"
    usual_count = regular["count"].mode().max()
    name = regular.loc[regular["count"] == usual_count].sort_values("first").index[0]
    bounds = kernels.loc[kernels["name"] == name, "launch_start"].to_numpy(np.int64)
    table = pd.DataFrame({"start": bounds[:-1], "end": bounds[1:], "name": f"step (detected: {name})"})
    return table, "detected"
