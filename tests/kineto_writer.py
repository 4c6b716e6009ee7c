"""Writes a Chrome trace in Kineto's format (as torch.profiler's export_chrome_trace writes it) from the rows of a
real nsys export: the same calls, GPU ops, ranges and Python stacks, so that the Kineto reader can be checked
against the nsys reader on one program. The format is written from Kineto's, not from nsync's reader: each call
with a Python stack gets its own chain of ``python_function`` events around it (ids and parent ids as Kineto
numbers them) with a C-function event (``<built-in method item ...>``) innermost, as Kineto records them."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np

from nsync.load import Trace

PID, TID = 4242, 4242
MEMORY_WORD = {"pageable": "Pageable", "pinned": "Pinned", "device": "Device", "managed": "Managed"}
STDLIB_PREFIX = "/usr/lib/python3.12/"


def _us(ns: int) -> float:
    return round(1_000_000_000.0 + ns / 1000.0, 3)  # Kineto's microseconds, on a clock far from zero


def _kineto_file(file: str) -> str:
    """The file as Kineto writes it: the sys.path prefix cut off (site-packages and the stdlib's folder)."""
    for cut in ("site-packages/", "dist-packages/", STDLIB_PREFIX, "/lib/python3.11/", "/lib/python3.12/"):
        if cut in file:
            return file.split(cut, 1)[1]
    return file.rsplit("/", 1)[-1]  # the script's own folder is on sys.path


def kineto_events(trace: Trace) -> list[dict]:
    events: list[dict] = [
        {"ph": "M", "name": "thread_name", "pid": PID, "tid": TID, "ts": _us(0), "args": {"name": "thread (python)"}}
    ]
    api = trace.api
    for start, end, corr, name, stack_id in zip(
        api["start"].tolist(),
        api["end"].tolist(),
        api["correlation_id"].tolist(),
        api["api"].astype(str).tolist(),
        api["py_stack_id"].tolist(),
    ):
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": name,
                "pid": PID,
                "tid": TID,
                "ts": _us(start),
                "dur": round((end - start) / 1000.0, 3),
                "args": {"cbid": 0, "correlation": corr},
            }
        )
        if stack_id >= 0:
            events.extend(_frames(trace.stacks[stack_id], start, end, len(events)))
    ops = trace.gpu_ops
    for row in ops.itertuples(index=False):
        args = {"device": int(row.device_id), "stream": int(row.stream_id), "correlation": int(row.correlation_id)}
        if row.op == "kernel":
            cat, name = "kernel", str(row.name)
        elif row.op == "memcpy":
            src, dst = MEMORY_WORD.get(str(row.src_memory), "Unknown"), MEMORY_WORD.get(str(row.dst_memory), "Unknown")
            cat, name, args["bytes"] = "gpu_memcpy", f"Memcpy {row.copy_direction} ({src} -> {dst})", int(row.bytes)
        elif row.op == "memset":
            cat, name = "gpu_memset", f"Memset ({MEMORY_WORD.get(str(row.dst_memory), 'Device')})"
        else:
            continue
        events.append(
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": int(row.device_id),
                "tid": int(row.stream_id),
                "ts": _us(int(row.start)),
                "dur": round((int(row.end) - int(row.start)) / 1000.0, 3),
                "args": args,
            }
        )
    for start, end, name in zip(trace.nvtx_ranges["start"], trace.nvtx_ranges["end"], trace.nvtx_ranges["name"]):
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": str(name),
                "pid": PID,
                "tid": TID,
                "ts": _us(int(start)),
                "dur": round((int(end) - int(start)) / 1000.0, 3),
                "args": {"External id": 1},
            }
        )
    return events


def _frames(stack: tuple, start: int, end: int, first_id: int) -> list[dict]:
    """The stack as nested python_function events (outermost first, each 1 ns wider than the one inside it)."""
    outer_first = list(reversed(stack))
    events, parent = [], None
    for depth, frame in enumerate(outer_first):
        pad = len(outer_first) - depth + 1
        python_id = first_id * 100 + depth + 1
        events.append(
            {
                "ph": "X",
                "cat": "python_function",
                "name": f"{_kineto_file(frame.file)}({frame.line}): {frame.function}",
                "pid": PID,
                "tid": TID,
                "ts": _us(start - pad),
                "dur": round((end - start + 2 * pad) / 1000.0, 3),
                "args": {"Python parent id": parent, "Python id": python_id, "Ev Idx": 0},
            }
        )
        parent = python_id
    events.append(  # the C function that made the call (.item()), innermost
        {
            "ph": "X",
            "cat": "python_function",
            "name": "<built-in method item of Tensor object at 0x7f00>",
            "pid": PID,
            "tid": TID,
            "ts": _us(start - 1),
            "dur": round((end - start + 2) / 1000.0, 3),
            "args": {"Python parent id": parent, "Python id": first_id * 100 + 99},
        }
    )
    return events


def write_kineto(trace: Trace, path: Path, gpu_name: str = "NVIDIA H200") -> Path:
    body = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": gpu_name, "totalGlobalMem": 150000000000}],
        "displayTimeUnit": "ms",
        "traceEvents": kineto_events(trace),
    }
    raw = json.dumps(body, indent=1).encode()
    path.write_bytes(gzip.compress(raw) if path.suffix == ".gz" else raw)
    return path


def api_counts(path: Path) -> dict[str, int]:
    """Calls per API name, counted straight from the JSON (the issue's direct count)."""
    raw = path.read_bytes()
    data = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    names = [e["name"] for e in data["traceEvents"] if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    values, counts = np.unique(names, return_counts=True)
    return dict(zip(values.tolist(), counts.tolist()))
