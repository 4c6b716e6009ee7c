"""Time `nsync analyze --json` end to end on 1 M, 5 M and 10 M-row traces (tiled from a real H200 export).

Prints wall time (the median of RUNS runs, and their range: these machines vary by 10-20 % from run to
run), the highest peak RSS and rows per second for each size, the 10M/1M ratio, and beside them the pandas
read floor (pandas.read_sql_query of the runtime and kernel columns, merged and sorted) and `nsys analyze`,
run once each. Traces are cached in $NSYNC_BENCH_DIR (default /tmp/nsync-bench): the 10 M one is about
1 GB.

Usage: python benchmarks/bench_scale.py [ROWS ...]
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.tile_trace import tile

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "fixtures" / "h200" / "print_deg.sqlite.xz"
SIZES = (1_000_000, 5_000_000, 10_000_000)
RUNS = 3


def measure(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in MiB) of one child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {proc.stderr.read().decode() if proc.stderr else ''}")
    return wall, usage.ru_maxrss / 1024


PANDAS_FLOOR = """
import sqlite3, sys, pandas as pd
c = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
r = pd.read_sql_query("SELECT start, end, globalTid, correlationId, nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME", c)
k = pd.read_sql_query("SELECT start, end, globalPid, correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL", c)
r["globalPid"] = r["globalTid"] - r["globalTid"] % 0x1000000
k.merge(r, on=["globalPid", "correlationId"], how="left").sort_values("start_x")
"""


def nsys_anchor(trace: Path) -> float | None:
    """Wall time of `nsys analyze`'s gap rule (gpu_gaps, called gpu-starv before 2023) on the same file."""
    nsys = shutil.which("nsys")
    if nsys is None:
        return None
    for rule in ("gpu_gaps", "gpu-starv"):
        start = time.perf_counter()
        done = subprocess.run([nsys, "analyze", "--rule", rule, str(trace)], capture_output=True, timeout=600)
        if done.returncode == 0 and b"ERROR" not in done.stderr:  # an unknown rule still exits 0
            return time.perf_counter() - start
    return None


def main(sizes: tuple[int, ...]) -> None:
    folder = Path(os.environ.get("NSYNC_BENCH_DIR", "/tmp/nsync-bench"))
    folder.mkdir(parents=True, exist_ok=True)
    nsync = [sys.executable, "-m", "nsync", "analyze"]
    results = {}
    print(
        f"{'rows':>12} {'file MiB':>9} {'nsync s':>8} {'(range)':>11} {'nsync MiB':>10} {'M rows/s':>9} "
        f"{'pandas floor s':>15} {'nsys analyze s':>15}"
    )
    for rows in sizes:
        trace = folder / f"tiled-{rows // 1_000_000}m.sqlite"
        if not trace.exists():
            tile(SOURCE, trace, rows=rows)
        with sqlite3.connect(f"file:{trace}?mode=ro", uri=True) as conn:
            counted = sum(
                conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]
                for t in (
                    "CUPTI_ACTIVITY_KIND_RUNTIME",
                    "CUPTI_ACTIVITY_KIND_KERNEL",
                    "CUPTI_ACTIVITY_KIND_MEMCPY",
                    "NVTX_EVENTS",
                )
            )
        runs = [measure([*nsync, str(trace), "--json", str(folder / f"{trace.stem}.json")]) for _ in range(RUNS)]
        walls = sorted(wall for wall, _rss in runs)
        wall, rss = statistics.median(walls), max(rss for _wall, rss in runs)
        floor, _ = measure([sys.executable, "-c", PANDAS_FLOOR, str(trace)])
        anchor = nsys_anchor(trace)
        anchor_text = "-" if anchor is None else f"{anchor:.2f}"
        results[rows] = wall
        print(
            f"{counted:>12,} {trace.stat().st_size / 2**20:>9.0f} {wall:>8.2f} {walls[0]:>5.2f}-{walls[-1]:<5.2f} "
            f"{rss:>10.0f} "
            f"{counted / wall / 1e6:>9.2f} {floor:>15.2f} {anchor_text:>15}"
        )
    if 1_000_000 in results and 10_000_000 in results:
        print(f"10M / 1M wall time: {results[10_000_000] / results[1_000_000]:.1f}x (linear would be 10x)")


if __name__ == "__main__":
    main(tuple(int(a) for a in sys.argv[1:]) or SIZES)
