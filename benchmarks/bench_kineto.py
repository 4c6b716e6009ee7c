"""nsync's whole analysis of a tiled torch.profiler (Kineto) trace, in a fresh process: seconds and peak memory.

    python -m benchmarks.bench_kineto [EVENTS]          (default 5,000,000)

The trace is written here, in Kineto's format: STEPS ``ProfilerStep#N`` ranges (a profiler's usual window), each
of many tiles of a training loop: a forward and backward of launches (``cuda_runtime`` + ``kernel``), 16 ``.item()``
reads (a DtoH copy to pageable memory and a stream sync, each inside its Python frames and a C function); 160
events a tile. (One step per tile, 31,000 steps at 5 M events, made HTA's per-event loop over the steps quadratic:
no profiler window has that many.)
Where HolisticTraceAnalysis is installed (``pip install HolisticTraceAnalysis``, here or in the Python that
``NSYNC_HTA_PYTHON`` names), its ``TraceAnalysis`` load of the same file is timed too, in its own fresh process,
stopped after HTA_LIMIT_S; peak memory is sampled from /proc while each runs."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LAUNCHES, READS, STEPS = 40, 16, 40
TILE_EVENTS = 2 * LAUNCHES + 5 * READS
PID = 4242


def _x(cat: str, name: str, ts: float, dur: float, pid: int, tid: int, args: dict) -> str:
    return json.dumps(
        {
            "ph": "X",
            "cat": cat,
            "name": name,
            "pid": pid,
            "tid": tid,
            "ts": round(ts, 3),
            "dur": round(dur, 3),
            "args": args,
        }
    )


def write_trace(path: Path, events_wanted: int) -> int:
    """A tiled trace of at least ``events_wanted`` events; the count written."""
    written, step, corr, pyid, t = 0, 0, 0, 1, 1_000_000.0
    tiles_per_step = max(1, -(-events_wanted // (TILE_EVENTS * STEPS)))
    with gzip.open(path, "wt", compresslevel=1) as out:
        out.write('{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}], "traceEvents": [\n')
        out.write(
            _x(
                "python_function",
                "train.py(40): <module>",
                t - 1,
                1e12,
                PID,
                PID,
                {"Python id": 0, "Python parent id": None},
            )
        )
        while written < events_wanted:
            begin = t
            lines = []
            for tile in range(tiles_per_step):
                t = _tile(lines, t, corr, pyid)
                corr, pyid = corr + LAUNCHES + 2 * READS, pyid + 2 * READS
                if tile % 64 == 63:  # bounded memory: write as it goes
                    out.write(",\n" + ",\n".join(lines))
                    written, lines = written + len(lines), []
            lines.append(_x("user_annotation", f"ProfilerStep#{step}", begin, t - begin, PID, PID, {}))
            out.write(",\n" + ",\n".join(lines))
            written += len(lines)
            step += 1
        out.write("\n]}\n")
    return written + 1


def _tile(lines: list[str], t: float, corr: int, pyid: int) -> float:
    """Append one tile's events (correlation ids after ``corr``, Python ids from ``pyid``); the time it ends."""
    for _ in range(LAUNCHES):
        corr += 1
        lines.append(_x("cuda_runtime", "cudaLaunchKernel", t, 4.0, PID, PID, {"correlation": corr}))
        kernel = {"device": 0, "stream": 7, "correlation": corr}
        lines.append(_x("kernel", "void at::native::vectorized_elementwise_kernel<4>", t + 6, 9.0, 0, 7, kernel))
        t += 5.0
    for k in range(READS):
        frame = {"Python id": pyid, "Python parent id": 0}
        lines.append(_x("python_function", "train.py(22): step", t, 30.0, PID, PID, frame))
        method = {"Python id": pyid + 1, "Python parent id": pyid}
        lines.append(
            _x("python_function", "<built-in method item of Tensor object at 0x7f00>", t + 1, 28.0, PID, PID, method)
        )
        pyid += 2
        corr += 1
        lines.append(_x("cuda_runtime", "cudaMemcpyAsync", t + 2, 20.0, PID, PID, {"correlation": corr}))
        copy = {"device": 0, "stream": 7, "correlation": corr, "bytes": 4}
        lines.append(_x("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", t + 15, 1.0, 0, 7, copy))
        corr += 1
        lines.append(_x("cuda_runtime", "cudaStreamSynchronize", t + 23, 3.0, PID, PID, {"correlation": corr}))
        t += 31.0 + k % 3
    return t


ANALYSE = """
import sys, time
t = time.perf_counter()
import nsync
result = nsync.analyze(sys.argv[1], calibration=None)
print(round(time.perf_counter() - t, 2), result.steps.count, result.callsites[0].line if result.callsites else None)
"""
HTA = """
import sys, time, os
t = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
TraceAnalysis(trace_dir=os.path.dirname(sys.argv[1]))
print(round(time.perf_counter() - t, 2), "s")
"""
HTA_LIMIT_S = 900  # HTA's load of 5 M events took 163 s on a 2-core machine (2026-12-06)


def _peak_mb(pid: int) -> int:
    """The process's peak resident memory so far (Linux ``VmHWM``), in MB; 0 where it cannot be read."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    kb = [line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")]
    return int(kb[0]) // 1024 if kb else 0


def _run(python: str, script: str, path: Path, limit_s: float | None = None) -> tuple[str, int]:
    """Run ``script`` on ``path`` in a fresh ``python``: its first output line (or why it has none) and its
    peak memory, sampled while it runs, so that a run stopped at ``limit_s`` still tells how much it held."""
    began, peak = time.perf_counter(), 0
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen([python, "-c", script, str(path)], stdout=out, stderr=err, text=True)
        while child.poll() is None:
            peak = max(peak, _peak_mb(child.pid))
            if limit_s is not None and time.perf_counter() - began > limit_s:
                child.kill()
                child.wait()
                return f"not finished after {limit_s:.0f} s", peak
            time.sleep(0.2)
        out.seek(0), err.seek(0)
        if child.returncode != 0:
            return f"failed: {err.read().strip().splitlines()[-1:]}", peak
        return out.read().strip(), peak


def main() -> None:
    wanted = int(sys.argv[1]) if len(sys.argv) > 1 else 5_000_000
    # HTA needs its own pandas and numpy: it may live in another environment (NSYNC_HTA_PYTHON)
    hta_python = os.environ.get("NSYNC_HTA_PYTHON", sys.executable)
    with tempfile.TemporaryDirectory(prefix="nsync-kineto-") as folder:
        path = Path(folder) / "rank0.pt.trace.json.gz"
        began = time.perf_counter()
        events = write_trace(path, wanted)
        print(
            f"kineto: {events:,} events, {path.stat().st_size / 1e6:.0f} MB gz, written in "
            f"{time.perf_counter() - began:.0f} s"
        )
        answer, peak_mb = _run(sys.executable, ANALYSE, path)
        seconds, steps, line = (answer.split() + ["?"] * 3)[:3]
        print(f"kineto: nsync analyze {seconds} s, peak {peak_mb} MB ({steps} steps, top line {line})")
        has_hta = subprocess.run([hta_python, "-c", "import hta"], capture_output=True, check=False).returncode == 0
        if not has_hta:
            print("kineto: HolisticTraceAnalysis not installed (NSYNC_HTA_PYTHON names a Python that has it)")
            return
        answer, peak_mb = _run(hta_python, HTA, path, HTA_LIMIT_S)
        print(f"kineto: HTA TraceAnalysis load alone: {answer}, peak {peak_mb} MB")


if __name__ == "__main__":
    main()
