"""The Python stack of each CUDA call in a torch.profiler trace, from its ``python_function`` events
(``with_stack=True``): the innermost frame on the call's thread whose interval holds the call, and its parents
(``Python parent id``). C functions (``<built-in method item ...>``) are no frames of the stack, as nsys's Python
backtraces have none, but the one the call was made in tells which line of its Python frame called it
(nsync.load.frame_lines).

Kineto writes file names with the ``sys.path`` prefix cut off (``torch/nn/modules/module.py``, ``typing.py``,
``train.py``): a standard-library module becomes ``<stdlib>/typing.py``, a file in a package folder
``site-packages/PKG/...`` (unless the program itself runs from that package), a top-level file stays the user's.
"""

from __future__ import annotations

import re
import sys

import numpy as np
import pandas as pd

from nsync.load.frame_lines import LIBRARY_PREFIXES, FrameLines, c_function
from nsync.load.model import Frame, StackTable

# nsync's own files in the profiled program (nsync/capturing/inject, first on its sys.path): nsync's, not the user's
INJECTED = {"sitecustomize.py", "_nsync_kineto.py"}
_FRAME_NAME = re.compile(r"^(?P<file>.*)\((?P<line>\d+)\): (?P<function>.*)$")


def stacks_of_calls(python: pd.DataFrame, api: pd.DataFrame, stacks: StackTable, lines: FrameLines) -> np.ndarray:
    """Each call's Python stack (an id in ``stacks``, -1: none). ``python``: the frames (python_frames)."""
    if not len(python) or not len(api):
        return np.full(len(api), -1, np.int64)
    threads, thread_code = np.unique(python["global_tid"].to_numpy(), return_inverse=True)
    order = np.lexsort((python["start"].to_numpy(), thread_code))
    end, parent = python["end"].to_numpy(), python["parent"].to_numpy()
    call_thread = np.searchsorted(threads, api["global_tid"].to_numpy())
    known = (call_thread < len(threads)) & (threads[np.minimum(call_thread, len(threads) - 1)] == api["global_tid"])
    t = api["start"].to_numpy()
    # the last frame of the call's thread to start at or before the call, then up its parents to one that holds it
    sorted_thread, sorted_start = thread_code[order], python["start"].to_numpy()[order]
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
    return _interned(python, at, stacks, lines)


def python_frames(
    names: pd.Series, start: np.ndarray, end: np.ndarray, tid: np.ndarray, ids: np.ndarray, parent_ids: np.ndarray
) -> pd.DataFrame:
    """The python_function events as rows: each with its parent's row (-1: none), whether it is no Python frame
    (a C function, a module marker), and its nearest Python parent's row."""
    frame = pd.DataFrame({"start": start, "end": end, "global_tid": tid, "name": names.to_numpy(object)})
    row_of_id = pd.Index(ids).get_indexer(parent_ids)  # -1 where the parent is not in the trace
    parent = np.where(parent_ids >= 0, row_of_id, -1)
    # C functions, and the module markers Kineto adds (``nn.Module: GPT2Model_0``): no frames of Python code
    is_c = (names.str.startswith("<built-in") | ~names.str.match(_FRAME_NAME).astype(bool)).to_numpy(bool)
    python_parent = parent.copy()
    while True:  # a C function's child: its Python parent is the nearest Python frame above it
        through = (python_parent >= 0) & is_c[np.maximum(python_parent, 0)]
        if not through.any():
            break
        python_parent[through] = parent[python_parent[through]]
    return frame.assign(parent=parent, python_parent=python_parent, is_c=is_c)


def _interned(python: pd.DataFrame, innermost: np.ndarray, stacks: StackTable, lines: FrameLines) -> np.ndarray:
    """Stack ids for the innermost frames given (-1 stays -1): each distinct chain of Python frames interned
    once, each frame placed on its line from the C function it was in, or the frame inside it."""
    held = innermost >= 0
    ids = np.full(len(innermost), -1, np.int64)
    if not held.any():
        return ids
    is_c, parent = python["is_c"].to_numpy(), python["parent"].to_numpy()
    uniques, codes = _frames(python["name"], python["python_parent"].to_numpy() < 0)
    distinct, where = np.unique(innermost[held], return_inverse=True)
    paths = []  # per distinct innermost row: the rows from it outward
    for row in distinct.tolist():  # the distinct frames that hold calls: a few thousand at most
        path = [row]
        while parent[path[-1]] >= 0:
            path.append(int(parent[path[-1]]))
        paths.append(path)
    callers = np.unique([r for path in paths for r in path if not is_c[r]])
    called_from = _called_from(python, uniques, codes, callers, lines)
    names = python["name"].to_numpy(object)
    interned = np.empty(len(distinct), np.int64)
    for k, path in enumerate(paths):
        chain: list[Frame] = []
        via: list[str | None] = [None]  # per Python frame: the C function it was in, calling inward
        known: list[int] = []  # per Python frame: its line, where the order of its calls tells it
        for below, at in zip([-1, *path], path):
            if is_c[at]:
                via[-1] = via[-1] or c_function(str(names[at]))
            else:
                chain.append(uniques[codes[at]])
                known.append(int(called_from[below]) if below >= 0 else -1)
                via.append(None)
        interned[k] = stacks.intern(lines.placed(chain, via[: len(chain)], known)) if chain else -1
    ids[held] = interned[where]
    return ids


def _called_from(
    python: pd.DataFrame, frames: list[Frame], codes: np.ndarray, callers: np.ndarray, lines: FrameLines
) -> np.ndarray:
    """Per event under one of the ``callers`` rows (Python frames), the line of that frame that called it where
    the frame's function calls its name on several statements (-1 elsewhere). A loop runs its statements in
    order, so the k-th such call after the last sibling whose name one line calls (or after the frame's own
    line) is the k-th of those lines from there, cyclically: a per-class loop of ``(p & t).sum().item()`` then
    ``(p | t).sum().item()``."""
    out = np.full(len(python), -1, np.int64)
    parent, is_c = python["parent"].to_numpy(), python["is_c"].to_numpy()
    c_code = np.zeros(len(frames), bool)
    c_code[codes] = is_c
    callee = [c_function(f.function) if c else f.function for f, c in zip(frames, c_code)]
    rows = np.flatnonzero(np.isin(parent, callers))
    pair_keys = codes[parent[rows]].astype(np.int64) * len(frames) + codes[rows]
    pairs, pair_of = np.unique(pair_keys, return_inverse=True)
    found = [
        lines.statement_lines(frames[key // len(frames)], name) if (name := callee[key % len(frames)]) else []
        for key in pairs.tolist()  # the distinct (caller, callee) pairs
    ]
    count = np.array([len(f) for f in found], np.int64)
    if not (count >= 2).any():
        return out
    candidates = np.full((len(found), count.max()), np.iinfo(np.int64).max, np.int64)
    for k, lines_of in enumerate(found):
        candidates[k, : len(lines_of)] = lines_of
    keep = count[pair_of] >= 1
    rows, pair_of = rows[keep], pair_of[keep]
    order = np.lexsort((python["start"].to_numpy()[rows], parent[rows]))
    rows, pair_of = rows[order], pair_of[order]
    anchor = count[pair_of] == 1
    last = np.maximum.accumulate(np.where(anchor, np.arange(len(rows)), -1))
    own = (last >= 0) & (parent[rows[np.maximum(last, 0)]] == parent[rows])
    parent_line = np.array([f.line for f in frames], np.int64)[codes[parent[rows]]]
    after = np.where(own, candidates[pair_of[np.maximum(last, 0)], 0], parent_line)
    many = ~anchor
    nth = (
        pd.DataFrame({"p": parent[rows], "s": np.cumsum(anchor), "c": pair_of})[many]
        .groupby(["p", "s", "c"])
        .cumcount()
    )
    mine = candidates[pair_of[many]]
    start = (mine <= after[many, None]).sum(axis=1)
    out[rows[many]] = mine[np.arange(len(mine)), (start + nth.to_numpy()) % count[pair_of[many]]]
    return out


def _frames(names: pd.Series, outermost: np.ndarray) -> tuple[list[Frame], np.ndarray]:
    """Each distinct event name's frame, and each event's index among them; the program's own files are those
    of the outermost ``<module>`` frames (the script; not a package's module imported on the way, whose
    ``<module>`` frame has a parent)."""
    codes, uniques = pd.factorize(names)
    parsed = pd.Series(uniques, dtype=object).str.extract(_FRAME_NAME)
    root_codes = np.unique(codes[outermost])
    outer = parsed.iloc[root_codes]
    roots = {_top(f) for f in outer.loc[outer["function"] == "<module>", "file"].dropna()}
    frames = [
        Frame(str(name), str(name), 0) if pd.isna(file) else Frame(str(function), _file(str(file), roots), int(line))
        for name, file, line, function in zip(uniques, parsed["file"], parsed["line"], parsed["function"])
    ]
    return frames, codes


def _top(file: str) -> str:
    return file.split("/", 1)[0].removesuffix(".py")


def _file(file: str, roots: set[str]) -> str:
    """A file as Kineto wrote it, as the stages read files: stdlib and packages marked as such."""
    if file.startswith(("/", "<")) or re.match(r"^[A-Za-z]:[\\/]", file):
        return file
    if file in INJECTED:
        return f"{LIBRARY_PREFIXES[0]}nsync/capturing/inject/{file}"
    top = _top(file)
    if top in sys.stdlib_module_names:
        return f"{LIBRARY_PREFIXES[1]}{file}"
    if "/" in file and top not in roots:
        return f"{LIBRARY_PREFIXES[0]}{file}"
    return file
