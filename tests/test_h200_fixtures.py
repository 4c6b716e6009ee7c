"""The real H200 exports (fixtures/h200, ground truth in its README) give the answers we know are true."""

from __future__ import annotations

import sqlite3

import pytest

from nsync.load import load_trace
from nsync.stages.detect import SyncKind
from tests.conftest import PROBE_LINES


def test_print_deg_top_call_site_is_the_print(h200_stages):
    a = h200_stages("print_deg")
    top = a.callsites.iloc[0]
    assert (top["file"].rsplit("/", 1)[-1], top["line"], top["function"]) == ("w_print.py", 19, "step")
    assert top["callsite_source"] == "python-backtrace"
    assert a.steps.source == "nvtx:step" and len(a.steps.table) == 60 and a.steps.count == 59
    # print(t) formats the tensor with 8 .item()-style reads: 8 sync calls, one execution of the line per step
    assert top["syncs_per_step"] == 8.0
    assert top["executions_per_step"] == 1.0
    assert top["kinds"] == [SyncKind.READ]
    # profiled: degraded 3.49 ms/step vs healthy 2.81 (README): the print costs a few tenths of a ms of GPU
    assert 0.3e6 < top["exposed_idle_ns_per_step"] < 0.7e6
    assert a.totals["exposed_idle_ns"] <= a.totals["gpu_idle_ns"]
    assert len(a.callsites) == 1


def test_print_ok_has_no_costly_call_site(h200_stages):
    a = h200_stages("print_ok")
    assert a.steps.count == 59
    assert 2.7e6 < a.step_stats["duration_ns"].median() < 2.9e6
    # the healthy twin has no print: no sync inside its steps (the harness's three sit before and after them)
    assert a.totals["sync_count"] == 0 and a.callsites.empty
    assert sum(a.phases["sync_count"]) == 3
    assert a.verdict is not None and not a.verdict.worth_fixing and a.verdict.largest_saving_ms_per_step == 0


@pytest.mark.parametrize("name", ["p4", "p3"])
def test_probe_sync_kinds_land_on_their_own_lines(h200_stages, name):
    a = h200_stages(name)
    sites = a.callsites.loc[a.callsites["file"].str.endswith("probe.py")]
    assert dict(zip(sites["line"], sites["function"])) == PROBE_LINES
    kinds = {line: set(k) for line, k in zip(sites["line"], sites["kinds"])}
    assert kinds == {
        11: {SyncKind.READ},
        13: {SyncKind.DEVICE},
        15: {SyncKind.EVENT},
        17: {SyncKind.STREAM},
        19: {SyncKind.MEMCPY_PAGEABLE},
        21: {SyncKind.MEMCPY_PAGEABLE, SyncKind.READ},
    }
    assert (sites["syncs_per_step"] == [2.0 if line == 21 else 1.0 for line in sites["line"]]).all()
    expected = "python-backtrace" if name == "p4" else "python-sampling"
    assert set(sites["callsite_source"]) == {expected}


def test_p2_without_exported_frames_detects_every_kind_and_says_why_lines_are_missing(h200_stages):
    a = h200_stages("p2")
    assert a.syncs.groupby("kind", observed=True).size().to_dict() == {
        SyncKind.DEVICE: 3,
        SyncKind.READ: 6,
        SyncKind.EVENT: 3,
        SyncKind.MEMCPY_PAGEABLE: 6,
        SyncKind.STREAM: 3,
    }
    assert any(w.code == "python-frames" and "--include-blobs=true" in w.message for w in a.warnings)
    native = a.callsites.loc[a.callsites["callsite_source"] == "cuda-callchain", "function"]
    assert "at::native::_local_scalar_dense_cuda(at::Tensor const&)::{lambda()#1}::operator()() const" in set(native)
    assert "c10::cuda::device_synchronize()" in set(native)


def test_event_sync_in_p2_waits_on_the_recorded_stream_before_the_record(h200_stages):
    syncs = h200_stages("p2").syncs
    event = syncs.loc[syncs["kind"] == SyncKind.EVENT]
    assert (event["scope_stream_id"] == 7).all()
    assert (event["cutoff_ns"] < event["start"]).all()


def test_gpu_ops_are_merged_into_start_order_row_by_row(h200):
    """The loader merges the kernel, memcpy and memset tables into one start-ordered table; every op keeps
    its own columns (compared with the tables read by SQL)."""
    path = h200("p2")
    ops = load_trace(path).gpu_ops
    assert ops["start"].is_monotonic_increasing
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        expected = sorted(
            row
            for kind, table in [("kernel", "KERNEL"), ("memcpy", "MEMCPY"), ("memset", "MEMSET")]
            for row in db.execute(
                f"SELECT start, end, correlationId, streamId, '{kind}' FROM CUPTI_ACTIVITY_KIND_{table}"
            )
        )
    assert {"kernel", "memcpy", "memset"} <= {row[-1] for row in expected}
    columns = ["start", "end", "correlation_id", "stream_id", "op"]
    assert sorted(zip(*(ops[c].astype(object).tolist() for c in columns))) == expected
