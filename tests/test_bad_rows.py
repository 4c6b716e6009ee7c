"""Rows that cannot be true, in copies of a real export (fixtures/h200/print_deg): set aside, counted and
named, or the whole trace refused; never a figure that cannot be (issue: GPU idle 112 % of the span, host
wait -97 ms, a 3.5 ms step replayed as 3914 ms). The unedited export's own figures are the reference."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from nsync import TraceError, analyze
from nsync.analysis import Analysis
from tests.test_invariants import check_invariants

KERNEL, MEMCPY, RUNTIME = "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_RUNTIME"
SYNC_CALLS = "nameId IN (SELECT id FROM StringIds WHERE value LIKE 'cudaStreamSynchronize%')"


@pytest.fixture(scope="module")
def reference(h200: Callable[[str], Path]) -> Analysis:
    return analyze(h200("print_deg"))


@pytest.fixture
def edited(tmp_path: Path, h200: Callable[[str], Path]) -> Callable[..., Path]:
    def edit(*statements: str) -> Path:
        copy = tmp_path / "P.sqlite"
        shutil.copy(h200("print_deg"), copy)
        with sqlite3.connect(copy) as conn:
            for sql in statements:
                conn.execute(sql)
        return copy

    return edit


def _aside(a: Analysis) -> list[str]:
    return [w for w in a.warnings if w.startswith("set aside ")]


def test_every_kernel_ending_before_it_starts_is_refused(edited) -> None:
    with pytest.raises(TraceError, match=r"7213 of 7773 GPU ops cannot be true \(7213 end before they start\)"):
        analyze(edited(f"UPDATE {KERNEL} SET start = end, end = start"))


@pytest.mark.parametrize(
    ("change", "warning"),
    [
        (f"UPDATE {KERNEL} SET end = 9000000000000000000 WHERE rowid = 100", "1 of 7773 GPU ops that lie outside"),
        (f"UPDATE {KERNEL} SET end = start + 3600000000000 WHERE rowid = 100", "1 of 7773 GPU ops that lie outside"),
        (f"UPDATE {KERNEL} SET start = 'abc' WHERE rowid % 100 = 0", "72 of 7773 GPU ops that have no time"),
        (f"UPDATE {KERNEL} SET start = start - 50000000, end = end - 50000000 WHERE rowid % 100 = 0",
         "72 of 7773 GPU ops that start before the call that launched them"),
        (f"INSERT INTO {KERNEL} SELECT * FROM {KERNEL}", "7213 of 14986 GPU ops that are written twice"),
        (f"UPDATE {MEMCPY} SET start = 0 WHERE rowid % 10 = 0", "56 of 7773 GPU ops that have no time"),
        (f"UPDATE {KERNEL} SET deviceId = -7 WHERE rowid % 100 = 0", "72 of 7773 GPU ops that run on no device"),
    ],
)  # fmt: skip
def test_impossible_gpu_ops_are_set_aside_and_named(edited, reference: Analysis, change: str, warning: str) -> None:
    a = analyze(edited(change))
    (said,) = _aside(a)
    assert warning in said and "GPU busy and idle, exposed idle and the what-if leave them out" in said
    check_invariants(a)
    # what is left is the trace less a few kernels: its step stays the real one, within 5 %
    median = a.step_stats["duration_ns"].median()
    assert median == pytest.approx(reference.step_stats["duration_ns"].median(), rel=0.05)
    if a.what_if is not None:
        assert a.what_if.replayed_step_ns == pytest.approx(reference.what_if.replayed_step_ns, rel=0.05)


def test_calls_that_end_before_they_start_are_set_aside_not_a_negative_wait(edited, reference) -> None:
    a = analyze(edited(f"UPDATE {RUNTIME} SET start = end, end = start WHERE {SYNC_CALLS} AND rowid % 2 = 0"))
    (said,) = _aside(a)
    assert "CUDA calls that end before they start" in said and "their syncs are not counted" in said
    assert (a.syncs["wait_ns"] >= 0).all()
    check_invariants(a)


def test_every_call_written_twice_is_set_aside(edited, reference) -> None:
    a = analyze(edited(f"INSERT INTO {RUNTIME} SELECT * FROM {RUNTIME}"))
    assert any("CUDA calls that are written twice" in w for w in _aside(a))
    assert a.totals["sync_count"] == reference.totals["sync_count"]
    assert a.totals["exposed_idle_ns"] == reference.totals["exposed_idle_ns"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("DELETE FROM StringIds", "holds none of the CUDA calls' names"),
        (f"DELETE FROM {RUNTIME}", rf"GPU activity but no CUDA calls \({RUNTIME} is empty\)"),
        (f"UPDATE {KERNEL} SET deviceId = -7", "cannot be true"),
    ],
)
def test_names_or_calls_gone_are_an_error_not_nothing_to_fix(edited, change: str, message: str) -> None:
    with pytest.raises(TraceError, match=message):
        analyze(edited(change))
