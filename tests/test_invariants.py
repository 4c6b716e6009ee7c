"""Figures that cannot be untrue: bounds every analysis must keep, on every real fixture, and two
hand-built traces whose answers are known by construction."""

from __future__ import annotations

import numpy as np
import pytest

from nsync.stages.report import analysis_result
from tests.tracebuilder import DTOH, PAGEABLE, TraceBuilder, ns

FIXTURES = [
    "p2",
    "p3",
    "p4",
    "print_deg",
    "print_ok",
    "w_item_degraded",
    "w_item_healthy",
    "w_mask_degraded",
    "w_mask_healthy",
]


def check_invariants(a) -> None:
    t = a.totals
    assert 0 <= t["exposed_idle_ns"] <= t["gpu_idle_ns"] <= t["span_ns"] * t["gpu_count"]
    assert t["gpu_busy_ns"] + t["gpu_idle_ns"] == t["span_ns"] * t["gpu_count"]
    assert sum(g["idle_ns"] for g in t["per_gpu"]) == t["gpu_idle_ns"]
    assert all(0 <= g["idle_ns"] <= t["span_ns"] for g in t["per_gpu"])
    s = a.syncs
    if len(s):
        assert (s["wait_ns"] >= 0).all() and (s["lead_before_ns"] >= 0).all() and (s["exposed_idle_ns"] >= 0).all()
        # the exposed window starts at s0 or later and ends at the rebuild point or sooner
        assert (s["exposed_idle_ns"] <= s["rebuild_ns"] - s["start"]).all()
        assert (s["rebuild_ns"] >= s["end"]).all()
    assert t["sync_count"] == len(s) == int(a.callsites["count"].sum())
    assert int(a.callsites["exposed_idle_ns"].sum()) == t["exposed_idle_ns"]
    if a.steps.count:
        stats = a.step_stats
        assert len(stats) == a.steps.count
        assert (stats["gpu_idle_ns"] <= stats["duration_ns"] * t["gpu_count"]).all()
        assert int(stats["gpu_idle_ns"].sum()) == t["gpu_idle_ns"]
        assert int(stats["exposed_idle_ns"].sum()) == t["exposed_idle_ns"]
        assert int(stats["sync_count"].sum()) == t["sync_count"]
    if a.what_if is not None:
        saving = a.callsites["predicted_saving_ns_per_step"].dropna()
        assert (saving >= -0.05 * a.what_if.unprofiled_step_ns).all()  # a fix never costs more than noise


@pytest.mark.slow
@pytest.mark.parametrize("name", FIXTURES)
def test_every_real_fixture_keeps_the_bounds(h200_stages, name: str) -> None:
    a = h200_stages(name)
    check_invariants(a)
    assert a.totals["gpu_count"] == 1


def test_a_copy_returning_after_the_last_gpu_op_exposes_no_idle_past_the_window(build) -> None:
    b = TraceBuilder()
    b.kernel(1, 0, 10, 1010, name="k1")
    # blocking device-to-host copy into pageable memory: the GPU part ends at 1100, the call returns 1160 µs
    # later, after the last GPU op (the window's end); no GPU idle lies inside the window after 1100
    b.memcpy(1, "cudaMemcpy_v3020", 20, 2260, 1010, 1100, copy_kind=DTOH, src_kind=1, dst_kind=PAGEABLE)
    a = build(b)
    check_invariants(a)
    assert a.window_ns[1] == ns(1100)
    assert a.totals["gpu_idle_ns"] == ns(10)  # [0, 10] before the first kernel
    assert a.totals["exposed_idle_ns"] == 0


def test_two_gpus_are_idle_each_over_the_same_span(build) -> None:
    b = TraceBuilder()
    b.kernel(1, 0, 10, 1010, device=0, name="a")
    b.kernel(1, 5, 10, 510, device=1, stream=9, name="b")  # device 1 idle over [510, 1010]
    b.stream_sync(1, 20, 1015)
    a = build(b)
    check_invariants(a)
    t = a.totals
    assert t["gpu_count"] == 2 and t["span_ns"] == ns(1010)
    assert sorted((g["device_id"], g["idle_ns"]) for g in t["per_gpu"]) == [(0, ns(10)), (1, ns(10 + 500))]
    assert t["gpu_busy_ns"] == 2 * ns(1010) - ns(520)


def test_the_terminal_and_json_give_two_gpus_share_of_their_idle(build) -> None:
    from nsync import render_terminal

    b = TraceBuilder()
    b.kernel(1, 1, 1, 1001, device=0, name="a")
    b.kernel(2, 1, 1, 501, device=1, stream=9, name="b")
    a = analysis_result(build(b))
    data = a.to_dict()
    assert data["totals"]["gpu_idle_pct"] == 25.0  # 500 of 2 x 1000 µs
    assert sorted(g["idle_pct"] for g in data["totals"]["per_gpu"]) == [0.0, 50.0]
    assert "GPU idle 0.50 ms (25.0% of 2 GPUs x 1.0 ms)" in render_terminal(a)
    assert np.isclose(100 - data["totals"]["gpu_idle_pct"], 75.0)


@pytest.mark.parametrize("threads", [4, 24])
def test_syncs_of_several_threads_count_each_idle_nanosecond_once(build, threads: int) -> None:
    """NVIDIA Fuser's public report1.sqlite, in small: cudaFree on pool threads after the GPU drained, each
    window running to the same rebuild point. The GPU works [10, 1000] and [5010, 6000] µs; thread k calls
    cudaFree at 1100 + 480k/threads µs for 10 µs. Before, each sync counted all the idle from its call to 6000 µs
    (4 threads: 15 340 µs, where the GPU idled 3910 in their union); now each idle microsecond goes to the
    sync whose window began last: every sync but the last gets the gap to the next call, the last the rest."""
    b = TraceBuilder()
    b.kernel(1, 0, 10, 1000, name="k1")
    spacing = 480 / threads  # 120 or 20 µs
    for k in range(threads):
        b.api(10 + k, "cudaFree", 1100 + k * spacing, 1110 + k * spacing)
    b.kernel(1, 5000, 5010, 6000, name="k2")
    a = build(b)
    exposed_us = a.syncs.sort_values("start")["exposed_idle_ns"].to_numpy() / 1e3
    assert exposed_us[:-1] == pytest.approx([spacing] * (threads - 1))
    assert exposed_us[-1] == pytest.approx(6000 - 1100 - 990 - (threads - 1) * spacing)
    assert a.totals["exposed_idle_ns"] == ns(3910)  # the idle in the union of the windows, once
    check_invariants(a)
