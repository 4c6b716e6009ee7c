"""Known-answer tests of lead, drain, rebuild and exposed idle on hand-built timelines.

Base timeline (µs), one thread, stream 7 (every test states what it changes)::

    host  K1@0  K2@10  [sync 20 ........................ 1115]  py  K3@1215  K4@1300
    GPU        K1 10─────────1010 K2 1010──1110                     K3 1225-1235   K4 1310──2310

Lead at each launch end: K1 1006, K2 1096, K3 16, K4 1006 -> median 1006 -> rebuild threshold 503 µs.
The sync drains at D = 1110; the lead is rebuilt at K4's launch end, R = 1304; GPU idle in
[1110, 1304] is 194 - 10 (K3) = 184 µs.
"""

from __future__ import annotations

import pytest

from tests.tracebuilder import DEVICE, DTOH, PAGEABLE, PINNED, TraceBuilder, ns


def base(b: TraceBuilder, tid: int = 1, pid: int | None = None, sync: bool = True) -> None:
    b.kernel(tid, 0, 10, 1010, name="k1", pid=pid)
    b.kernel(tid, 10, 1010, 1110, name="k2", pid=pid)
    if sync:
        b.stream_sync(tid, 20, 1115, pid=pid)
    b.kernel(tid, 1215, 1225, 1235, name="k3", pid=pid)
    b.kernel(tid, 1300, 1310, 2310, name="k4", pid=pid)


def only_sync(analysis):
    assert len(analysis.syncs) == 1
    return analysis.syncs.iloc[0]


def test_stream_sync_costs_the_idle_until_the_lead_is_rebuilt(build):
    b = TraceBuilder()
    base(b)
    s = only_sync(build(b))
    assert s["kind"] == "stream-sync"
    assert s["wait_ns"] == ns(1095)
    assert s["lead_before_ns"] == ns(1090)  # K2 ends at 1110, seen from t = 20
    assert s["drain_ns"] == ns(1110)
    assert s["rebuild_ns"] == ns(1304)
    assert s["exposed_idle_ns"] == ns(184)


def test_totals_and_call_site_sum_the_syncs(build):
    b = TraceBuilder()
    base(b)
    a = build(b)
    assert a.totals["gpu_idle_ns"] == ns(10 + 115 + 75)  # [0,10], [1110,1225], [1235,1310]
    assert a.totals["exposed_idle_ns"] == ns(184)
    assert a.totals["host_wait_ns"] == ns(1095)
    assert a.callsites.iloc[0]["count"] == 1


def test_sync_on_one_stream_leaves_the_other_streams_work_out_of_the_drain(build):
    b = TraceBuilder()
    base(b)
    b.kernel(1, 15, 1000, 1200, stream=8, name="k5")  # still running on stream 8 when stream 7 drains
    s = only_sync(build(b))
    assert s["drain_ns"] == ns(1110)
    assert s["lead_before_ns"] == ns(1180)
    # idle in [1110, 1304] minus k5 until 1200 and k3
    assert s["exposed_idle_ns"] == ns(194 - 90 - 10)


def test_device_sync_waits_for_every_stream(build):
    b = TraceBuilder()
    b.kernel(1, 0, 10, 1010, name="k1")
    b.kernel(1, 10, 1010, 1110, name="k2")
    b.kernel(1, 15, 1000, 1200, stream=8, name="k5")
    b.api(1, "cudaDeviceSynchronize_v3020", 20, 1205)  # no SYNCHRONIZATION row, as on CUDA 13
    b.kernel(1, 1215, 1225, 1235, name="k3")
    b.kernel(1, 1300, 1310, 2310, name="k4")
    s = only_sync(build(b))
    assert (s["kind"], s["scope_stream_id"]) == ("device-sync", -1)
    assert s["drain_ns"] == ns(1200)
    assert s["exposed_idle_ns"] == ns(104 - 10)


def test_driver_spelling_of_a_context_sync_is_a_device_sync(build):
    b = TraceBuilder()
    b.kernel(1, 0, 10, 1010, name="k1")
    b.api(1, "cuCtxSynchronize", 20, 1015)
    b.kernel(1, 1100, 1110, 3000, name="k2")
    s = only_sync(build(b))
    # the lead is rebuilt when k2's launch returns (1104): 1896 µs ahead, above half the median lead
    assert (s["kind"], s["drain_ns"], s["rebuild_ns"]) == ("device-sync", ns(1010), ns(1104))
    assert s["exposed_idle_ns"] == ns(1104 - 1010)


def test_event_sync_waits_only_for_work_before_the_record(build):
    b = TraceBuilder()
    b.kernel(1, 0, 10, 1010, name="k1")
    b.event_record(1, 5, event_id=19)  # after k1, before k2
    b.kernel(1, 10, 1010, 1110, name="k2")
    b.kernel(1, 15, 1000, 1200, stream=8, name="k5")
    b.event_sync(1, 20, 1015, event_id=19)
    b.kernel(1, 1215, 1225, 1235, name="k3")
    b.kernel(1, 1300, 1310, 2310, name="k4")
    s = only_sync(build(b))
    assert (s["kind"], s["scope_stream_id"]) == ("event-sync", 7)
    assert s["drain_ns"] == ns(1010)
    # idle in [1010, 1304]: k2 to 1110, k5 to 1200, k3 10 µs -> 294 - 190 - 10
    assert s["exposed_idle_ns"] == ns(94)


@pytest.mark.parametrize("schema", ["2022.4", "2025.3"])
def test_event_sync_is_resolved_in_old_and_new_schemas(build, schema):
    b = TraceBuilder(schema=schema)
    b.kernel(1, 0, 10, 1010, name="k1")
    b.event_record(1, 5, event_id=3)
    b.kernel(1, 10, 1010, 1110, name="k2")
    b.event_sync(1, 20, 1015, event_id=3)
    b.kernel(1, 1300, 1310, 2310, name="k4")
    s = only_sync(build(b))
    assert s["drain_ns"] == ns(1010)


def test_item_read_is_a_stream_sync_after_a_pinned_device_to_host_copy(build):
    b = TraceBuilder()
    b.kernel(1, 0, 10, 1010, name="k1")
    b.kernel(1, 10, 1010, 1110, name="k2")
    b.memcpy(1, "cudaMemcpyAsync_v3020", 20, 24, 1110, 1111, DTOH, DEVICE, PINNED)
    b.stream_sync(1, 25, 1115)
    b.kernel(1, 1215, 1225, 1235, name="k3")
    b.kernel(1, 1300, 1310, 2310, name="k4")
    s = only_sync(build(b))  # the pinned copy itself does not block
    assert s["kind"] == "dtoh-read"
    assert s["drain_ns"] == ns(1111)
    assert s["exposed_idle_ns"] == ns(193 - 10)


def test_pageable_device_to_host_copy_blocks_until_its_own_copy_ends(build):
    b = TraceBuilder()
    b.kernel(1, 0, 10, 1010, name="k1")
    b.kernel(1, 10, 1010, 1110, name="k2")
    b.memcpy(1, "cudaMemcpyAsync_v3020", 20, 1200, 1110, 1195, DTOH, DEVICE, PAGEABLE, nbytes=1 << 24)
    b.kernel(1, 1215, 1225, 1235, name="k3")
    b.kernel(1, 1300, 1310, 2310, name="k4")
    s = only_sync(build(b))
    assert (s["kind"], s["copy_direction"], s["copy_bytes"]) == ("pageable-copy", "DtoH", 1 << 24)
    assert s["drain_ns"] == ns(1195)
    assert s["exposed_idle_ns"] == ns(109 - 10)


def test_consecutive_syncs_split_the_idle_without_counting_it_twice(build):
    b = TraceBuilder()
    base(b)
    b.stream_sync(1, 1150, 1160)  # nothing left to wait for
    a = build(b)
    first, second = a.syncs.sort_values("start").itertuples()
    assert first.rebuild_ns == ns(1150)
    assert first.exposed_idle_ns == ns(40)
    assert second.exposed_idle_ns == ns(1304 - 1150 - 10)
    assert a.totals["exposed_idle_ns"] == ns(184)


def test_another_threads_work_fills_the_idle(build):
    b = TraceBuilder()
    base(b, tid=1)
    b.kernel(2, 1150, 1160, 1260, stream=9, name="other")
    s = only_sync(build(b))
    assert s["rebuild_ns"] == ns(1304)  # thread 2's launches do not rebuild thread 1's lead
    assert s["exposed_idle_ns"] == ns(194 - 100)


def test_processes_are_attributed_separately(build):
    b = TraceBuilder(pid=100)
    base(b, tid=1, pid=100)
    base(b, tid=1, pid=200, sync=False)
    b.kernel(1, 1150, 1160, 1260, pid=200, name="other-process")
    a = build(b)
    s = only_sync(a)
    assert s["global_pid"] == b.gpid(100)
    assert s["exposed_idle_ns"] == ns(184)  # per (process, device), as nsys's own gap rules key it


def test_profiler_overhead_counts_as_busy(build):
    b = TraceBuilder()
    base(b)
    b.profiler_overhead(1, 1120, 1140)
    assert only_sync(build(b))["exposed_idle_ns"] == ns(184 - 20)


def test_lead_floor_and_fraction_are_configurable(build):
    b = TraceBuilder()
    base(b)
    # threshold 10 µs: K3's 16 µs lead counts as rebuilt at its launch end (1219)
    s = only_sync(build(b, lead_fraction=0.0, lead_floor_ns=10_000))
    assert s["rebuild_ns"] == ns(1219)
    assert s["exposed_idle_ns"] == ns(1219 - 1110)


def test_gpu_work_without_traced_calls_counts_as_launched_when_it_started(build):
    b = TraceBuilder()
    base(b)
    b.rows["CUPTI_ACTIVITY_KIND_RUNTIME"] = [
        r for r in b.rows["CUPTI_ACTIVITY_KIND_RUNTIME"] if r["nameId"] != b.string("cudaLaunchKernel_v7000")
    ]
    s = only_sync(build(b))  # the sync is all that is left on the host
    # only k1 started on the GPU before the sync (at 10); k2 started at 1010, so it is not known to be waited for
    assert s["drain_ns"] == ns(1010)
    assert s["lead_before_ns"] == 0  # no launch is known on this thread
