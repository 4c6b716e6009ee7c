"""Steps from NVTX ranges (or detected), warm-up skipping, and per-step figures."""

from __future__ import annotations

import pytest

from nsync import UsageError
from tests.tracebuilder import TraceBuilder, ns

STEP_US = 1000


def looping(b: TraceBuilder, steps: int, nvtx: str | None = "step", sync: bool = True) -> None:
    """Each step: a 600 µs matmul launched at the step start, a sync at +100 returning at +610, then a
    tail kernel launched at +700 (GPU 700-900). Exposed idle per step = [610, 700] = 90 µs."""
    for i in range(steps):
        t0 = i * STEP_US
        if nvtx:
            b.nvtx_range(1, nvtx if "N" not in nvtx else nvtx.replace("N", str(i)), t0, t0 + STEP_US - 1)
        b.kernel(1, t0, t0 + 10, t0 + 610, name="matmul")
        if sync:
            b.stream_sync(1, t0 + 100, t0 + 612)
        b.kernel(1, t0 + 700, t0 + 700, t0 + 900, name="tail")


def test_nvtx_steps_skip_the_first_as_warm_up_and_give_per_step_figures(build):
    b = TraceBuilder()
    looping(b, 6)
    a = build(b)
    assert (a.steps.source, len(a.steps.table), a.steps.count) == ("nvtx:step", 6, 5)
    site = a.callsites.iloc[0]
    assert site["count"] == 5
    assert site["syncs_per_step"] == 1.0
    # The lead is rebuilt only when the next step's matmul launch returns (t0 + 1004): the tail kernel's
    # 196 µs lead stays under half the median lead (401 µs). So each sync costs [610, 700] + [900, 1004];
    # the last one [610, 700] + [900, 999]: nothing is launched after it, and the analysed steps end at 999.
    per_sync = [ns(90 + 104)] * 4 + [ns(90 + 99)]
    assert list(a.syncs["exposed_idle_ns"]) == per_sync
    assert site["exposed_idle_ns_per_step"] == sum(per_sync) / 5
    assert list(a.step_stats["sync_count"]) == [1, 1, 1, 1, 1]
    assert list(a.step_stats["exposed_idle_ns"]) == per_sync


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ProfilerStep#N", "iterN", "train_step"])
def test_common_step_range_names_are_recognised(build, name):
    b = TraceBuilder()
    looping(b, 4, nvtx=name)
    a = build(b)
    assert a.steps.source.startswith("nvtx:") and len(a.steps.table) == 4


def test_step_range_option_picks_a_range_and_rejects_an_unknown_one(build):
    b = TraceBuilder()
    looping(b, 4, nvtx="fwd")
    assert build(b, step_range="fwd").steps.count == 3
    with pytest.raises(UsageError, match="no NVTX range named 'bwd'"):
        build(b, step_range="bwd")


def test_warm_up_can_be_set(build):
    b = TraceBuilder()
    looping(b, 6)
    assert build(b, warmup_steps=0).steps.count == 6
    assert build(b, warmup_steps=2).steps.count == 4


def test_steps_are_detected_from_the_kernel_pattern_without_nvtx(build):
    b = TraceBuilder()
    looping(b, 8, nvtx=None)
    a = build(b)
    assert a.steps.source == "kernel:matmul"
    assert len(a.steps.table) == 7  # between 8 matmul launches
    assert a.steps.table["start"].iloc[0] == 0 and a.steps.table["end"].iloc[0] == ns(STEP_US)
    assert a.callsites.iloc[0]["syncs_per_step"] == 1.0


def test_without_steps_figures_cover_the_whole_trace(build):
    b = TraceBuilder()
    b.kernel(1, 0, 10, 1010, name="k1")
    b.stream_sync(1, 20, 1015)
    b.kernel(1, 1100, 1110, 3000, name="k2")
    a = build(b)
    assert (a.steps.source, a.steps.count) == ("none", 0)
    assert a.window_ns == (0, ns(3000))
    assert a.callsites.iloc[0]["count"] == 1


def test_gpu_step_time_is_the_throughput_when_the_host_runs_ahead(build):
    # the host enqueues a step in 100 µs, the GPU needs 1000 µs for it: NVTX ranges time the host only
    b = TraceBuilder()
    for i in range(6):
        t0 = i * 100
        b.nvtx_range(1, "step", t0, t0 + 99)
        b.kernel(1, t0, 10 + i * 1000, 10 + (i + 1) * 1000, name="matmul")
    a = build(b)
    assert list(a.step_stats["duration_ns"]) == [ns(99)] * 5
    assert list(a.step_stats["gpu_duration_ns"]) == [ns(1000)] * 5
