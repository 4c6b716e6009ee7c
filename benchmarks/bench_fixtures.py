"""Time `nsync.analyze` on the bundled real traces (fixtures/h200 and fixtures/real; after start-up), best
of N runs.

Usage: python benchmarks/bench_fixtures.py [N]
"""

from __future__ import annotations

import lzma
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import nsync

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def main(repeats: int = 5) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for xz in [*sorted(FIXTURES.glob("h200/*.sqlite.xz")), *sorted(FIXTURES.glob("real/*.sqlite.xz"))]:
            path = Path(tmp) / xz.stem
            with lzma.open(xz) as src, path.open("wb") as dst:
                shutil.copyfileobj(src, dst)
            with sqlite3.connect(path) as conn:
                tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
                rows = sum(conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables)
            best = float("inf")
            for _ in range(repeats):
                start = time.perf_counter()
                nsync.analyze(path)
                best = min(best, time.perf_counter() - start)
            rate = rows / best / 1e6
            print(f"{xz.stem:32s} {rows / 1e6:6.3f} M rows  analyze {best * 1e3:7.1f} ms  ({rate:.2f} M rows/s)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
