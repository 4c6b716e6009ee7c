"""Speed must not change the answer: a trace tiled N times gives N times the answer of its source."""

from __future__ import annotations

import pytest

from benchmarks.tile_trace import tile
from nsync import AnalysisConfig
from nsync.analysis import run_stages


@pytest.mark.slow
def test_tiled_trace_gives_n_times_the_source_answer(h200, tmp_path):
    source = h200("print_deg")
    copies, rows = tile(source, tmp_path / "tiled.sqlite", copies=3)
    assert (copies, rows) == (3, 3 * 25_602)
    config = AnalysisConfig(warmup_steps=0)  # the default would skip only the first copy's first step
    one, three = run_stages(source, config), run_stages(tmp_path / "tiled.sqlite", config)
    assert three.steps.count == 3 * one.steps.count
    keys = ["file", "line", "function"]
    a = one.callsites.set_index(keys)[["count", "exposed_idle_ns", "host_wait_ns"]]
    b = three.callsites.set_index(keys)[["count", "exposed_idle_ns", "host_wait_ns"]]
    assert b.index.equals(a.index)
    assert (b == 3 * a).all().all()
    assert three.totals["exposed_idle_ns"] == 3 * one.totals["exposed_idle_ns"]
    assert three.totals["gpu_idle_ns"] == 3 * one.totals["gpu_idle_ns"]
