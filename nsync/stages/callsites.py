"""Stage 4: name the line behind each sync and rank lines by the GPU time their syncs cost.

A sync's stack comes from, best first: its Python backtrace (``--python-backtrace=cuda``), its native
CUDA backtrace (``CUDA_CALLCHAINS``), or the Python sampling mark nearest to it on its thread. The call
site is the innermost frame of the user's own code (not the standard library, site-packages or torch);
its sync frame is the innermost frame outside PyTorch and the standard library, where the sync is issued
(a framework's helper that copies a batch to the device; the user's own line for ``.item()``). A call
site is the pair: one user line whose syncs come from three library lines is three call sites.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from nsync.keys import codes_in, take_matched
from nsync.load import CallsiteSource, Frame, Stack, StackTable, Trace
from nsync.stages.detect import SyncKind
from nsync.stages.timeline import neighbour_in_group, rows_by_key

# PyTorch's own files: installed, or in a source tree (``.../torch/nn/...``); not any folder named torch
TORCH_FILE = (
    r"(site-packages|dist-packages)[/\\]torch[/\\]"
    r"|[/\\]torch[/\\](_[a-z_]+|nn|optim|autograd|cuda|utils|amp|fx|jit|distributed)[/\\.]"
)
_LIBRARY_FILE = re.compile(
    r"(site-packages|dist-packages)[/\\]|^<frozen |^<stdlib>/|[/\\]lib[/\\]python\d+(\.\d+)?[/\\]|" + TORCH_FILE
)
_RUNTIME_MODULE = re.compile(r"lib(cuda|cudart|cupti|nvidia-|nvrtc|c\.so|pthread)|ld-linux|python\d")
SAMPLE_LOOKBACK_NS = 5_000_000  # a sampling mark this long before a sync can still name its line
UNKNOWN_FILE = "<unknown>"

# kind -> (short hint for the table, full hint): the usual PyTorch fix of each kind of sync
HINTS = {
    SyncKind.READ: (
        "keep the value on the GPU",
        "a GPU value is read on the host (.item(), print(t), .tolist(), `if t:`): keep it on the GPU "
        "(torch.where), or batch the reads into one .cpu() every N steps",
    ),
    SyncKind.STREAM: (
        "wait later, on an event",
        "stream synchronize: wait on an event recorded where the value is ready, or move the wait out of the hot loop",
    ),
    SyncKind.DEVICE: (
        "drop torch.cuda.synchronize()",
        "torch.cuda.synchronize(): drop it from the hot loop (time with CUDA events instead)",
    ),
    SyncKind.EVENT: (
        "let the GPU wait (wait_event)",
        "event.synchronize(): let the GPU wait instead (stream.wait_event) or query it later",
    ),
    SyncKind.MEMCPY_PAGEABLE: (
        "pin memory, non_blocking=True",
        "copy between the GPU and pageable memory: pin the host buffer (pin_memory()) and pass non_blocking=True",
    ),
    SyncKind.MEMCPY_BLOCKING: (
        "copy with non_blocking=True",
        "blocking copy (.cpu(), .cuda(), torch.tensor(data, device='cuda')): create on "
        "the CPU, pin, and copy with non_blocking=True",
    ),
    SyncKind.MEMSET: (
        "use an async memset",
        "synchronous memset of pinned/managed memory: use an async memset on a stream",
    ),
    SyncKind.IMPLICIT: (
        "reuse buffers",
        "allocation/free that synchronises the device: reuse buffers (avoid "
        "torch.cuda.empty_cache() and per-step allocations of pinned memory)",
    ),
}
# When a site shows several kinds (.cpu() = pageable copy + stream sync), the first here names the fix.
HINT_PRIORITY = (
    SyncKind.MEMCPY_PAGEABLE,
    SyncKind.MEMCPY_BLOCKING,
    SyncKind.READ,
    SyncKind.DEVICE,
    SyncKind.EVENT,
    SyncKind.STREAM,
    SyncKind.MEMSET,
    SyncKind.IMPLICIT,
)
PRINT_HINT = (
    "print outside the hot loop",
    "printing a CUDA tensor copies it to the host: print outside the hot loop, or log a value read once every N steps",
)


_PYTORCH_OR_STDLIB_FILE = re.compile(
    TORCH_FILE + r"|^<frozen |^<stdlib>/|[/\\]lib[/\\]python\d+(\.\d+)?[/\\](?!site-packages|dist-packages)"
)
SITE_KEYS = ["file", "line", "function", "sync_file", "sync_line", "sync_function"]  # what makes a call site
STACK_COLUMNS = ("stack_id", "callsite_source")  # what assign_stacks adds to each sync
LABEL_COLUMNS = (*SITE_KEYS, "site_id", "caller_id")  # what label_callsites adds
CALLSITE_COLUMNS = (  # rank_callsites' table: one row per call site
    *SITE_KEYS,
    "site_id",
    "count",
    "syncs_per_step",
    "executions_per_step",
    "exposed_idle_ns",
    "exposed_idle_ns_per_step",
    "host_wait_ns",
    "host_wait_ns_per_step",
    "lead_before_ns_mean",
    "apis",
    "kinds",
    "copy_directions",
    "stack",
    "callsite_source",
    "short_hint",
    "hint",
)


def is_user_file(path: str) -> bool:
    return not _LIBRARY_FILE.search(path)


def callsite_frame(stack: Stack, source: str) -> Frame:
    """The frame that names the call site: innermost user frame (innermost frame if none)."""
    if source == CallsiteSource.NATIVE_CALLCHAIN:
        return next((f for f in stack if not _RUNTIME_MODULE.search(f.file)), stack[0])
    return next((f for f in stack if is_user_file(f.file)), stack[0])


_PACKAGE = re.compile(r"(?:site-packages|dist-packages)[/\\]([A-Za-z0-9_]+)")


def library_package(path: str) -> str:
    """The installed package a file belongs to (``transformers``), or '' for the user's own files."""
    found = _PACKAGE.search(path)
    return found.group(1) if found else ""


def issued_by_own_code(callsites: pd.DataFrame) -> pd.Series:
    """Per call site: whether the program's own line issues its syncs (not a library it calls)."""
    return (callsites["sync_file"] == callsites["file"]) & (callsites["sync_line"] == callsites["line"])


def copies_to_pageable_host(callsites: pd.DataFrame) -> list[bool]:
    """Whether each call site syncs in a copy from the GPU to pageable host memory (``.tolist()``, a copy a
    library makes inside a call)."""
    return [
        SyncKind.MEMCPY_PAGEABLE in kinds and "DtoH" in directions
        for kinds, directions in zip(callsites["kinds"], callsites["copy_directions"])
    ]


def sync_frame(stack: Stack, source: str) -> Frame:
    """The frame where the sync is issued: innermost outside PyTorch and the standard library (a native
    backtrace has no Python frames: its call site frame)."""
    if source == CallsiteSource.NATIVE_CALLCHAIN:
        return callsite_frame(stack, source)
    return next((f for f in stack if not _PYTORCH_OR_STDLIB_FILE.search(f.file)), callsite_frame(stack, source))


# For programs whose stack shows no PyTorch (CUDA C, other frameworks): the CUDA-level fix of each kind.
CUDA_HINTS = {
    SyncKind.READ: (
        "copy asynchronously, read later",
        "a device-to-host copy read at once: copy with cudaMemcpyAsync into pinned memory and read it "
        "after an event, later",
    ),
    SyncKind.STREAM: HINTS[SyncKind.STREAM],
    SyncKind.DEVICE: (
        "drop the device synchronize",
        "cudaDeviceSynchronize: drop it from the hot loop, or wait on one stream's event instead",
    ),
    SyncKind.EVENT: (
        "let the GPU wait (cudaStreamWaitEvent)",
        "event synchronize: let the GPU wait instead (cudaStreamWaitEvent), or query the event later",
    ),
    SyncKind.MEMCPY_PAGEABLE: (
        "pin the host buffer",
        "copy between the GPU and pageable memory: allocate the host buffer pinned (cudaMallocHost)",
    ),
    SyncKind.MEMCPY_BLOCKING: (
        "use cudaMemcpyAsync",
        "blocking cudaMemcpy: use cudaMemcpyAsync on a stream with pinned host memory",
    ),
    SyncKind.MEMSET: HINTS[SyncKind.MEMSET],
    SyncKind.IMPLICIT: (
        "reuse buffers",
        "allocation/free that synchronises the device: allocate once and reuse, or use cudaMallocAsync",
    ),
}
_TORCH_FRAME = re.compile(TORCH_FILE + r"|libtorch|libc10")


def uses_pytorch(stacks: list[Stack]) -> bool:
    """Whether any stack of the trace runs through PyTorch (a ``.item()`` stack holds the user's line alone,
    so the question is asked of the program, not of one call site)."""
    return any(_TORCH_FRAME.search(frame.file) for stack in stacks for frame in stack)


def hint_for(kinds: list[str], stack: Stack, pytorch: bool = True) -> tuple[str, str]:
    """(short, full) fix hint for a call site, from its sync kinds and its stack: PyTorch's fixes in a PyTorch
    program, CUDA's elsewhere (CUDA C, other frameworks)."""
    if any(frame.file.endswith("_tensor_str.py") for frame in stack):
        return PRINT_HINT
    hints = HINTS if pytorch else CUDA_HINTS
    return next((hints[kind] for kind in HINT_PRIORITY if kind in kinds), ("", ""))


def assign_stacks(trace: Trace, syncs: pd.DataFrame) -> tuple[pd.DataFrame, list[Stack]]:
    """Give each sync a stack id (into the returned list) and the source it came from."""
    table = trace.stack_table.copy()
    calls = trace.api.iloc[syncs["call_row"].to_numpy()]
    stack_id = calls["py_stack_id"].to_numpy(np.int64).copy()
    source = np.where(stack_id >= 0, CallsiteSource.PYTHON_BACKTRACE, CallsiteSource.NONE).astype(object)

    chains = np.where(stack_id < 0, calls["callchain_id"].to_numpy(np.int64), -1)  # only where Python is missing
    native = _native_stacks(trace, chains, table)
    use_native = (stack_id < 0) & (native >= 0)
    stack_id[use_native] = native[use_native]
    source[use_native] = CallsiteSource.NATIVE_CALLCHAIN

    sampled = _sampled_stacks(trace.py_samples, syncs)
    use_sample = (stack_id < 0) & (sampled >= 0)
    stack_id[use_sample] = sampled[use_sample]
    source[use_sample] = CallsiteSource.PYTHON_SAMPLING

    following = _next_sync_of_the_same_line(trace, syncs, stack_id)
    stack_id[following >= 0] = stack_id[following[following >= 0]]
    source[following >= 0] = source[following[following >= 0]]
    return syncs.assign(stack_id=stack_id, callsite_source=source), table.stacks


SAME_LINE_NS = 20_000  # a frameless sync this close before a framed one, with no call between, is its line's


def _next_sync_of_the_same_line(trace: Trace, syncs: pd.DataFrame, stack_id: np.ndarray) -> np.ndarray:
    """For a sync with no stack, the next sync of its thread when that one has a stack, starts at most
    SAME_LINE_NS after it ends and the thread made no CUDA call between: the two are one line's (a tuple
    index's pageable copy, whose call nsys recorded no frames for, and the stream sync after it); else -1."""
    out = np.full(len(syncs), -1, np.int64)
    tid = syncs["global_tid"].to_numpy(np.int64)
    start, end = syncs["start"].to_numpy(np.int64), syncs["end"].to_numpy(np.int64)
    following = neighbour_in_group(tid, 1)
    after = np.where(following >= 0, following, 0)
    close = (stack_id < 0) & (following >= 0) & (stack_id[after] >= 0) & (start[after] - end <= SAME_LINE_NS)
    here = np.flatnonzero(close)
    api_start = trace.api["start"].to_numpy(np.int64)
    for mine, rows in rows_by_key([trace.api["global_tid"].to_numpy(np.int64)], [tid[here]], api_start):
        calls, k = api_start[rows], here[mine]  # the thread's calls in time order
        between = np.searchsorted(calls, start[after[k]], "left") - np.searchsorted(calls, end[k], "left")
        out[k[between == 0]] = after[k[between == 0]]
    return out


def _native_stacks(trace: Trace, callchain_ids: np.ndarray, table: StackTable) -> np.ndarray:
    wanted = np.unique(callchain_ids[callchain_ids >= 0])
    frames = trace.callchains.loc[trace.callchains["callchain_id"].isin(wanted)].sort_values(["callchain_id", "depth"])
    ids = {}
    for chain, group in frames.groupby("callchain_id", sort=False):
        modules = [m.rsplit("/", 1)[-1] for m in group["module"]]
        ids[chain] = table.intern(tuple(Frame(fn, mod, 0) for fn, mod in zip(group["function"], modules)))
    chains = np.array(sorted(ids), np.int64)
    return take_matched(np.array([ids[c] for c in chains.tolist()], np.int64), codes_in(callchain_ids, chains))


def _sampled_stacks(samples: pd.DataFrame, syncs: pd.DataFrame) -> np.ndarray:
    """The latest sampling mark on the sync's thread at or before its end, if recent enough."""
    out = np.full(len(syncs), -1, np.int64)
    if samples.empty or syncs.empty:
        return out
    left = pd.DataFrame(
        {
            "row": np.arange(len(syncs)),
            "global_tid": syncs["global_tid"].to_numpy(),
            "end": syncs["end"].to_numpy(np.int64),
            "start": syncs["start"].to_numpy(np.int64),
        }
    )
    merged = pd.merge_asof(
        left.sort_values("end"),
        samples.sort_values("start").rename(columns={"start": "t"}),
        left_on="end",
        right_on="t",
        by="global_tid",
        direction="backward",
    )
    recent = merged["t"].notna() & (merged["t"] >= merged["start"] - SAMPLE_LOOKBACK_NS)
    out[merged.loc[recent, "row"].to_numpy()] = merged.loc[recent, "stack_id"].to_numpy(np.int64)
    return out


def label_callsites(syncs: pd.DataFrame, stacks: list[Stack]) -> pd.DataFrame:
    """Add each sync's call site: the user's frame (file, line, function), the frame that issues the sync
    (sync_file, sync_line, sync_function), and ``site_id``, one per distinct pair (all worked out once per
    distinct stack); and ``caller_id``, one per distinct stack from the user's frame outward (-1: no stack):
    syncs of one call of a line share it, wherever inside the line's libraries each is issued."""
    # the API is part of the key: a sync without a stack (or a frame without a function) is named by it
    keys = pd.MultiIndex.from_arrays([syncs["stack_id"], syncs["callsite_source"], syncs["api"].astype(str)])
    distinct = keys.unique()
    position = distinct.get_indexer(keys)
    no_frame = Frame("", UNKNOWN_FILE, 0)
    labels = []
    callers: dict[Stack, int] = {}
    caller_of_stack = []
    for stack_id, source, api in distinct:  # one per distinct stack and API: a few hundred at most
        user = callsite_frame(stacks[stack_id], source) if stack_id >= 0 else no_frame
        issuing = sync_frame(stacks[stack_id], source) if stack_id >= 0 else no_frame
        labels.append((user.file, user.line, user.function or api, issuing.file, issuing.line, issuing.function or api))
        stack = stacks[stack_id] if stack_id >= 0 else ()
        outward = stack[stack.index(user) :] if user in stack else stack
        caller_of_stack.append(callers.setdefault(outward, len(callers)) if stack else -1)
    table = pd.DataFrame(labels, columns=SITE_KEYS)
    site_of_stack, _ = pd.MultiIndex.from_frame(table).factorize() if len(table) else (np.zeros(0, np.int64), None)
    return syncs.assign(
        **{column: table[column].to_numpy()[position] for column in SITE_KEYS},
        site_id=np.asarray(site_of_stack, np.int64)[position] if len(table) else np.zeros(0, np.int64),
        caller_id=np.asarray(caller_of_stack, np.int64)[position] if len(table) else np.zeros(0, np.int64),
    )


def rank_callsites(syncs: pd.DataFrame, stacks: list[Stack], step_count: int) -> pd.DataFrame:
    """One row per call site, ranked by exposed idle (descending); the analysis re-ranks them by predicted
    saving once the what-if has run."""
    columns = list(CALLSITE_COLUMNS)
    if syncs.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
    # An execution of a line: consecutive syncs from it on one thread within one step (print(t) = 8 syncs).
    previous = np.full(len(syncs), -1, np.int64)  # the thread's sync before (the syncs are in start order)
    for rows in syncs.groupby("global_tid", sort=False).indices.values():
        previous[rows[1:]] = rows[:-1]
    site, step = syncs["site_id"].to_numpy(), syncs["step"].to_numpy()
    had = np.maximum(previous, 0)
    new_execution = (previous < 0) | (site[had] != site) | (step[had] != step)
    grouped = syncs.assign(execution=new_execution.astype(np.int64)).groupby("site_id", sort=False)
    table = grouped.agg(
        **{column: (column, "first") for column in SITE_KEYS},
        count=("start", "size"),
        executions=("execution", "sum"),
        exposed_idle_ns=("exposed_idle_ns", "sum"),
        host_wait_ns=("wait_ns", "sum"),
        lead_before_ns_mean=("lead_before_ns", "mean"),
        stack_id=("stack_id", lambda s: s.mode().iloc[0]),
        callsite_source=("callsite_source", lambda s: s.mode().iloc[0]),
    ).reset_index()
    table["apis"] = _distinct(grouped["api"])
    table["kinds"] = _distinct(grouped["kind"])
    table["copy_directions"] = [[d for d in ds if d] for ds in _distinct(grouped["copy_direction"])]
    per_step = step_count if step_count > 0 else np.nan
    table["syncs_per_step"] = table["count"] / per_step
    table["executions_per_step"] = table["executions"] / per_step
    table["exposed_idle_ns_per_step"] = table["exposed_idle_ns"] / per_step
    table["host_wait_ns_per_step"] = table["host_wait_ns"] / per_step
    table["stack"] = [stacks[i] if i >= 0 else () for i in table["stack_id"]]
    pytorch = uses_pytorch(stacks)
    hints = [hint_for(k, s, pytorch) for k, s in zip(table["kinds"], table["stack"])]
    packages = [library_package(str(f)) for f in table["sync_file"]]
    table["short_hint"] = [f"in {pkg}: see its settings" if pkg else short for (short, _), pkg in zip(hints, packages)]
    table["hint"] = [
        f"the sync is issued inside {pkg} ({Path(str(f)).name}:{ln}, {fn}), not in your code: a setting of {pkg} "
        f"may turn it off or make it rarer. The sync itself: {full}"
        if pkg
        else full
        for (_, full), pkg, f, ln, fn in zip(
            hints, packages, table["sync_file"], table["sync_line"], table["sync_function"]
        )
    ]
    return table.sort_values(["exposed_idle_ns", "count"], ascending=False)[columns].reset_index(drop=True)


def _distinct(column: pd.core.groupby.SeriesGroupBy) -> list[list[str]]:
    """Sorted distinct values per group (a list per group: pandas' agg cannot return lists everywhere)."""
    return [sorted({str(v) for v in values}) for values in column.unique()]
