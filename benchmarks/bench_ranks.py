"""Time `nsync ranks` on RANKS per-rank copies of the 1 M-row tiled trace, on this machine's local Dask cluster.

Prints the wall time, the per-rank throughput, and the peak RSS of the command and of each Dask worker
(sampled from /proc every 0.25 s: the workers are the command's child processes). The copies are symbolic
links (rank0.sqlite ... in $NSYNC_BENCH_DIR/ranks-RANKS): a rank's export is opened read-only.

Usage: python -m benchmarks.bench_ranks [RANKS]
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.bench_scale import SOURCE
from benchmarks.tile_trace import tile

RANKS = 64


def _tree_rss_mib(root: int) -> dict[int, float]:
    """RSS of ``root`` and all its descendants, by pid (their /proc children lists: no scan of every process)."""
    tree, todo = {}, [root]
    while todo:
        pid = todo.pop()
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            tree[pid] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE") / 2**20
            for task in Path(f"/proc/{pid}/task").iterdir():
                todo += [int(child) for child in (task / "children").read_text().split()]
        except (OSError, IndexError, ValueError):
            continue
    return tree


def main(ranks: int) -> None:
    folder = Path(os.environ.get("NSYNC_BENCH_DIR", "/tmp/nsync-bench"))
    folder.mkdir(parents=True, exist_ok=True)
    trace = folder / "tiled-1m.sqlite"
    if not trace.exists():
        tile(SOURCE, trace, rows=1_000_000)
    run = folder / f"ranks-{ranks}"
    run.mkdir(exist_ok=True)
    for rank in range(ranks):
        link = run / f"rank{rank}.sqlite"
        if not link.exists():
            link.symlink_to(trace)
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "nsync", "ranks", str(run), "--json", str(folder / "ranks.json")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    peaks: dict[int, float] = {}
    while proc.poll() is None:
        for pid, mib in _tree_rss_mib(proc.pid).items():
            peaks[pid] = max(peaks.get(pid, 0.0), mib)
        time.sleep(0.25)
    wall = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"nsync ranks failed: {proc.stderr.read().decode() if proc.stderr else ''}")
    command = peaks.pop(proc.pid, 0.0)
    workers = sorted((mib for mib in peaks.values() if mib > 200), reverse=True)  # Dask's workers (not its helpers)
    print(f"{ranks} ranks of 1 M rows on {len(workers)} Dask workers: {wall:.1f} s ({ranks / wall:.2f} ranks/s)")
    print(f"peak RSS: command {command:.0f} MiB, each worker " + ", ".join(f"{mib:.0f}" for mib in workers) + " MiB")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else RANKS)
