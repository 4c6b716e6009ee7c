"""Which calls count as syncs: by API name and by what their GPU row shows, never by syncType."""

from __future__ import annotations

import pytest

from tests.tracebuilder import DEVICE, DTOD, DTOH, HTOD, PAGEABLE, PINNED, TraceBuilder


def busy_gpu(b: TraceBuilder) -> None:
    b.kernel(1, 0, 10, 1010, name="k1")


def kinds(analysis) -> list[str]:
    return sorted(analysis.syncs["kind"])


def test_non_blocking_calls_are_not_syncs(build):
    b = TraceBuilder()
    busy_gpu(b)
    b.api(1, "cudaEventQuery_v3020", 20, 22)
    b.api(1, "cudaStreamQuery_v3020", 30, 32)
    b.api(1, "cudaStreamWaitEvent_v3020", 40, 42)
    b.memcpy(1, "cudaMemcpyAsync_v3020", 50, 54, 1010, 1011, DTOH, DEVICE, PINNED)  # pinned async copy
    b.memset(1, "cudaMemsetAsync_v3020", 60, 62, 1011, 1012, mem_kind=DEVICE)
    b.memset(1, "cudaMemset_v3020", 70, 72, 1012, 1013, mem_kind=DEVICE)  # device memset: async to the host
    assert kinds(build(b)) == []


def test_blocking_copies_memsets_and_frees_are_syncs(build):
    b = TraceBuilder()
    busy_gpu(b)
    b.memcpy(1, "cudaMemcpy_v3020", 20, 1020, 1010, 1015, DTOH, DEVICE, PINNED)
    b.memset(1, "cudaMemset_v3020", 1030, 1040, 1031, 1032, mem_kind=PINNED)
    b.api(1, "cudaFree_v3020", 1050, 1060)
    b.api(1, "cuMemFree_v2", 1070, 1080)
    b.kernel(1, 1090, 1100, 3000, name="k2")
    assert kinds(build(b)) == ["blocking-copy", "implicit-sync", "implicit-sync", "sync-memset"]


def test_device_to_device_copy_does_not_block(build):
    b = TraceBuilder()
    busy_gpu(b)
    b.memcpy(1, "cudaMemcpy_v3020", 20, 30, 1010, 1020, DTOD, DEVICE, DEVICE)
    assert kinds(build(b)) == []


@pytest.mark.parametrize(("gpu_start", "is_sync"), [(1010, True), (1200, False)])
def test_pageable_host_to_device_copy_blocks_only_if_the_gpu_reached_it_before_return(build, gpu_start, is_sync):
    # the driver stages a pageable copy and may return before the GPU starts it (then it did not wait)
    b = TraceBuilder()
    busy_gpu(b)
    b.memcpy(1, "cudaMemcpyAsync_v3020", 20, 1100, gpu_start, gpu_start + 80, HTOD, PAGEABLE, DEVICE)
    assert kinds(build(b)) == (["pageable-copy"] if is_sync else [])


def test_each_call_counts_once_despite_its_backtrace_twin(build):
    b = TraceBuilder()
    busy_gpu(b)
    corr = b.stream_sync(1, 20, 1015)
    b.python_stack(1, corr, [("step", "/home/u/train.py", 7)])
    a = build(b)
    assert len(a.syncs) == 1
    assert a.callsites.iloc[0]["count"] == 1


def test_per_thread_default_stream_and_driver_spellings(build):
    b = TraceBuilder()
    busy_gpu(b)
    b.stream_sync(1, 20, 1015, name="cudaStreamSynchronize_ptsz")
    b.kernel(1, 1100, 1110, 1200, name="k2")
    b.stream_sync(1, 1210, 1300, name="cuStreamSynchronize")
    b.kernel(1, 1310, 1320, 1400, name="k3")
    b.api(1, "cuEventSynchronize", 1410, 1420)
    b.kernel(1, 1430, 1440, 1500, name="k4")
    assert kinds(build(b)) == ["event-sync", "stream-sync", "stream-sync"]


def test_unknown_api_names_are_ignored(build):
    b = TraceBuilder()
    busy_gpu(b)
    b.api(1, "cudaSomethingFromTheFuture_v99000", 20, 30)
    b.api(1, "cuNewDriverCall_v7", 40, 50)
    assert kinds(build(b)) == []
