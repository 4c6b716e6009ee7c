"""Time `nsync.analyze` on the bundled real traces (fixtures/h200 and fixtures/real; after start-up), best
of N runs, and what the HTML report adds to it (building the report and rendering the page), with its size.

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
            best = html_best = float("inf")
            for _ in range(repeats):
                start = time.perf_counter()
                analysis = nsync.analyze(path)
                best = min(best, time.perf_counter() - start)
                start = time.perf_counter()
                page = nsync.render_html(analysis)
                html_best = min(html_best, time.perf_counter() - start)
            rate = rows / best / 1e6
            print(
                f"{xz.stem:32s} {rows / 1e6:6.3f} M rows  analyze {best * 1e3:7.1f} ms  ({rate:.2f} M rows/s)  "
                f"html +{html_best * 1e3:6.1f} ms (+{100 * html_best / best:3.0f} %), {len(page.encode()) / 1e6:.2f} MB"
            )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
