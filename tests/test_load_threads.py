"""The loader reads tables on several threads: no shared pandas object may be touched from two of them.

pandas 2.0-2.2 failed ``Series.reindex`` on the shared string table about 1 load in 8 ("cannot reindex on
an axis with duplicate labels"); the dependency-floor job runs this file on those versions.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from nsync.load import load_trace
from nsync.load.nsys.db import StringTable
from nsync.load.nsys.readers import names_for

REPEATS = 16


def _names(trace) -> tuple[list[str], list[str], list[str]]:
    return (
        trace.api["api"].astype(str).tolist(),
        trace.gpu_ops["name"].astype(str).tolist(),
        trace.nvtx_ranges["name"].astype(str).tolist(),
    )


@pytest.mark.slow
def test_the_parallel_load_gives_the_same_trace_every_time(h200: Callable[[str], Path]) -> None:
    path = h200("p4")
    first = load_trace(path)
    expected = _names(first)
    assert len(expected[0]) > 1000 and len(expected[1]) > 50
    for _ in range(REPEATS):
        again = load_trace(path)
        assert _names(again) == expected
        assert again.stacks == first.stacks


@pytest.mark.slow
def test_string_lookups_from_many_threads_agree_with_a_plain_dict() -> None:
    rng = np.random.default_rng(7)
    ids = rng.permutation(np.arange(1, 50_001) * 3)  # sparse, unsorted ids as StringIds stores them
    table = StringTable.of(ids, np.array([f"s{i}" for i in ids], dtype=object))
    queries = [rng.integers(0, 160_000, 20_000) for _ in range(32)]

    def resolve(q: np.ndarray) -> list[str]:
        return list(np.asarray(names_for(q, table), dtype=object))

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(resolve, queries))
    for q, got in zip(queries, results):
        assert got == [f"s{i}" if i % 3 == 0 and 3 <= i <= 150_000 else f"<string {i}>" for i in q.tolist()]
    assert table.get(9) == "s9" and table.get(10) is None and len(table) == 50_000
