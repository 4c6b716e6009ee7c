"""nsync's whole analysis of a tiled torch.profiler (Kineto) trace, in a fresh process: seconds and peak memory.

    python -m benchmarks.bench_kineto [EVENTS]          (default 5,000,000)

The trace is written here, in Kineto's format: steps of a training loop, each a forward and backward of
launches (``cuda_runtime`` + ``kernel``), 16 ``.item()`` reads (a DtoH copy to pageable memory and a stream
sync, each inside its Python frames and a C function), ``ProfilerStep#N`` ranges; about 150 events a step.
Where HolisticTraceAnalysis is installed (``pip install HolisticTraceAnalysis``), its ``TraceAnalysis`` load of
the same file is timed too, in its own fresh process."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LAUNCHES, READS = 40, 16
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
            for _ in range(LAUNCHES):
                corr += 1
                lines.append(_x("cuda_runtime", "cudaLaunchKernel", t, 4.0, PID, PID, {"correlation": corr}))
                lines.append(
                    _x(
                        "kernel",
                        "void at::native::vectorized_elementwise_kernel<4>",
                        t + 6,
                        9.0,
                        0,
                        7,
                        {"device": 0, "stream": 7, "correlation": corr},
                    )
                )
                t += 5.0
            for k in range(READS):
                lines.append(
                    _x(
                        "python_function",
                        "train.py(22): step",
                        t,
                        30.0,
                        PID,
                        PID,
                        {"Python id": pyid, "Python parent id": 0},
                    )
                )
                lines.append(
                    _x(
                        "python_function",
                        "<built-in method item of Tensor object at 0x7f00>",
                        t + 1,
                        28.0,
                        PID,
                        PID,
                        {"Python id": pyid + 1, "Python parent id": pyid},
                    )
                )
                pyid += 2
                corr += 1
                lines.append(_x("cuda_runtime", "cudaMemcpyAsync", t + 2, 20.0, PID, PID, {"correlation": corr}))
                lines.append(
                    _x(
                        "gpu_memcpy",
                        "Memcpy DtoH (Device -> Pageable)",
                        t + 15,
                        1.0,
                        0,
                        7,
                        {"device": 0, "stream": 7, "correlation": corr, "bytes": 4},
                    )
                )
                corr += 1
                lines.append(_x("cuda_runtime", "cudaStreamSynchronize", t + 23, 3.0, PID, PID, {"correlation": corr}))
                t += 31.0 + k % 3
            lines.append(_x("user_annotation", f"ProfilerStep#{step}", begin, t - begin, PID, PID, {}))
            out.write(",\n" + ",\n".join(lines))
            written += len(lines)
            step += 1
        out.write("\n]}\n")
    return written + 1


ANALYSE = """
import resource, sys, time
t = time.perf_counter()
import nsync
result = nsync.analyze(sys.argv[1], calibration=None)
print(round(time.perf_counter() - t, 2), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
      result.steps.count, result.callsites[0].line if result.callsites else None)
"""
HTA = """
import resource, sys, time, os
t = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
TraceAnalysis(trace_dir=os.path.dirname(sys.argv[1]))
print(round(time.perf_counter() - t, 2), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
"""


def _run(script: str, path: Path) -> str:
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else f"failed: {done.stderr.strip().splitlines()[-1:]}"


def main() -> None:
    wanted = int(sys.argv[1]) if len(sys.argv) > 1 else 5_000_000
    with tempfile.TemporaryDirectory(prefix="nsync-kineto-") as folder:
        path = Path(folder) / "rank0.pt.trace.json.gz"
        began = time.perf_counter()
        events = write_trace(path, wanted)
        print(
            f"kineto: {events:,} events, {path.stat().st_size / 1e6:.0f} MB gz, written in "
            f"{time.perf_counter() - began:.0f} s"
        )
        seconds, peak_mb, steps, line = (_run(ANALYSE, path).split() + ["?"] * 4)[:4]
        print(f"kineto: nsync analyze {seconds} s, peak {peak_mb} MB ({steps} steps, top line {line})")
        try:
            import hta  # noqa: F401
        except ImportError:
            print("kineto: HolisticTraceAnalysis not installed: its load not timed")
            return
        print(f"kineto: HTA TraceAnalysis load (seconds, peak MB): {_run(HTA, path)}")


if __name__ == "__main__":
    main()
