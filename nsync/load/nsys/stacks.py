"""The readers of the call stacks nsys records: the Python frames of its NVTX marks (a backtrace with a CUDA
call, or a periodic sample) and native CUDA callchains."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from nsync.load.model import StackTable
from nsync.load.nsys.db import ExportDb, StringTable
from nsync.load.nsys.pyframes import UNREADABLE, intern_blobs
from nsync.load.nsys.readers import (
    NVTX_DOMAIN_CREATE,
    NVTX_MARK,
    PY_BACKTRACE_DOMAINS,
    PY_SAMPLING_DOMAINS,
    Window,
    _ints,
    global_pid,
    in_window,
    names_for,
)


def _domains(db: ExportDb) -> pd.DataFrame:
    """NVTX domain names per process: (global_pid, domain_id) -> name."""
    frame = db.select(
        "NVTX_EVENTS",
        {"global_tid": "globalTid", "domain_id": "domainId", "name": "text"},
        where=f"eventType = {NVTX_DOMAIN_CREATE}",
    )
    frame = _ints(frame, ["global_tid", "domain_id"])
    frame["global_pid"] = global_pid(frame["global_tid"].to_numpy())
    return frame[["global_pid", "domain_id", "name"]].drop_duplicates(["global_pid", "domain_id"])


def read_python_marks(
    db: ExportDb, strings: StringTable, stacks: StackTable, window: Window = None
) -> tuple[pd.DataFrame, int, int]:
    """Python-frame NVTX marks with decoded stack ids, how many backtrace marks had no frames, and how many of
    those had a blob that could not be read (a damaged export).

    Returns marks with columns start, global_tid, stack_id, kind ('backtrace' | 'sampling').
    """
    empty = pd.DataFrame({"start": [], "global_tid": [], "stack_id": [], "kind": []})
    if not db.has("NVTX_EVENTS"):
        return empty, 0, 0
    domains = _domains(db)
    kinds = np.select(
        [domains["name"].isin(PY_BACKTRACE_DOMAINS), domains["name"].isin(PY_SAMPLING_DOMAINS)],
        ["backtrace", "sampling"],
        default="",
    )
    domains = domains.assign(kind=kinds).loc[kinds != ""]
    if domains.empty:
        return empty, 0, 0
    columns, blob_codes, blobs = db.select_blobs(
        "NVTX_EVENTS",
        {"start": "start", "global_tid": "globalTid", "domain_id": "domainId"},
        "binaryData",
        *in_window(window, f"eventType = {NVTX_MARK}"),
    )
    marks = pd.DataFrame(columns).assign(
        global_pid=global_pid(columns["global_tid"]), blob_code=blob_codes, row=np.arange(len(blob_codes))
    )
    marks = marks.merge(domains, on=["global_pid", "domain_id"], how="inner").sort_values("row")
    stack_of_blob = np.append(intern_blobs(stacks, blobs, strings), -1)  # code -1 (no blob) lands on the -1
    marks["stack_id"] = stack_of_blob[marks["blob_code"].to_numpy()]
    backtrace = (marks["kind"] == "backtrace").to_numpy()
    unreadable = int((backtrace & (marks["stack_id"] == UNREADABLE).to_numpy()).sum())
    marks["stack_id"] = marks["stack_id"].clip(lower=-1)
    frameless = int((backtrace & (marks["stack_id"] < 0).to_numpy()).sum())
    return marks[["start", "global_tid", "stack_id", "kind"]].reset_index(drop=True), frameless, unreadable


def read_callchains(db: ExportDb, strings: StringTable, wanted: np.ndarray) -> pd.DataFrame:
    """Native CUDA backtraces (innermost first) of the ``wanted`` callchain ids: callchain_id, depth,
    function, module. Nothing is read when no call needs one (every call has its Python frames).

    Only the wanted chains are read, through the table's (id, stackDepth) key: a 10 M-row capture holds
    9 M frames, 4 s to read whole however few are wanted.
    """
    if len(wanted) == 0 or not db.has("CUDA_CALLCHAINS", "id"):
        return pd.DataFrame(
            {
                "callchain_id": np.zeros(0, np.int64),
                "depth": np.zeros(0, np.int64),
                "function": np.zeros(0, object),
                "module": np.zeros(0, object),
            }
        )
    frame = db.select_ints(
        "CUDA_CALLCHAINS",
        {"callchain_id": "id", "depth": "stackDepth", "symbol": "symbol", "module": "module"},
        "id IN (SELECT value FROM json_each(?))",  # ids travel as a bound parameter
        (json.dumps(np.asarray(wanted, np.int64).tolist()),),
    )
    return pd.DataFrame(
        {
            "callchain_id": frame["callchain_id"].to_numpy(),
            "depth": frame["depth"].to_numpy(),
            "function": np.asarray(names_for(frame["symbol"], strings), dtype=object),
            "module": np.asarray(names_for(frame["module"], strings), dtype=object),
        }
    )
