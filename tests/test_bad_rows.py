"""Rows that cannot be true, in copies of a real export (fixtures/h200/print_deg): set aside, counted and
named, or the whole trace refused; never a figure that cannot be (issue: GPU idle 112 % of the span, host
wait -97 ms, a 3.5 ms step replayed as 3914 ms). The unedited export's own figures are the reference."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsync import TraceError
from nsync.analysis import Analysis, run_stages
from tests.test_invariants import check_invariants

KERNEL, MEMCPY, RUNTIME = "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_RUNTIME"
SYNC_CALLS = "nameId IN (SELECT id FROM StringIds WHERE value LIKE 'cudaStreamSynchronize%')"


@pytest.fixture(scope="module")
def reference(h200: Callable[[str], Path]) -> Analysis:
    return run_stages(h200("print_deg"))


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
    return [w.message for w in a.warnings if w.code == "rows-set-aside"]


def test_every_kernel_ending_before_it_starts_is_refused(edited) -> None:
    with pytest.raises(TraceError, match=r"7213 of 7773 GPU ops cannot be true \(7213 end before they start\)"):
        run_stages(edited(f"UPDATE {KERNEL} SET start = end, end = start"))


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
    a = run_stages(edited(change))
    (said,) = _aside(a)
    assert warning in said and "GPU busy and idle, exposed idle and the what-if leave them out" in said
    check_invariants(a)
    # what is left is the trace less a few kernels: its step stays the real one, within 5 %
    median = a.step_stats["duration_ns"].median()
    assert median == pytest.approx(reference.step_stats["duration_ns"].median(), rel=0.05)
    if a.what_if is not None:
        assert a.what_if.replayed_step_ns == pytest.approx(reference.what_if.replayed_step_ns, rel=0.05)


def test_calls_that_end_before_they_start_are_set_aside_not_a_negative_wait(edited, reference) -> None:
    a = run_stages(edited(f"UPDATE {RUNTIME} SET start = end, end = start WHERE {SYNC_CALLS} AND rowid % 2 = 0"))
    (said,) = _aside(a)
    assert "CUDA calls that end before they start" in said and "their syncs are not counted" in said
    assert (a.syncs["wait_ns"] >= 0).all()
    check_invariants(a)


def test_every_call_written_twice_is_set_aside(edited, reference) -> None:
    a = run_stages(edited(f"INSERT INTO {RUNTIME} SELECT * FROM {RUNTIME}"))
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
        run_stages(edited(change))


ESCAPES = "char(27) || '[2J' || char(27) || ']0;pwned' || char(7) || char(13) || char(8) || char(0x202e)"


@pytest.mark.slow
def test_no_control_character_of_a_trace_reaches_the_terminal_the_markdown_or_an_error(edited, tmp_path) -> None:
    """Names holding ESC[2J (clear the screen), ESC]0;...BEL (set the window's title), CR, BS and a right-to-left
    override, in the file names of the Python frames, the GPU's name, a thread's and the NVTX step ranges'."""
    from tests.test_cli import run

    trace = edited(
        f"UPDATE StringIds SET value = value || {ESCAPES} WHERE value LIKE '%.py' OR value = 'step'",
        f"UPDATE NVTX_EVENTS SET text = text || {ESCAPES} WHERE text = 'step'",
        f"UPDATE TARGET_INFO_GPU SET name = name || {ESCAPES}",
        f"UPDATE StringIds SET value = value || {ESCAPES} WHERE id IN (SELECT nameId FROM ThreadNames)",
    )
    markdown = tmp_path / "r.md"
    shown = run("analyze", trace, "--markdown", markdown)
    assert shown.returncode == 0, shown.stderr
    wrong = run("analyze", trace, "--step-range", "nosuch")  # an error that lists the trace's range names
    assert wrong.returncode == 2 and "step\\x1b[" in wrong.stderr
    for text in (shown.stdout, shown.stderr, markdown.read_text(), wrong.stdout, wrong.stderr):
        assert not any(ch in text for ch in "\x1b\x07\x08\r\u202e"), text[:300]
    assert "w_print.py\\x1b[2J\\x1b]0;pwned\\x07\\x0d\\x08\\u202e:19" in shown.stdout.replace("\n", "")


def test_a_string_that_is_not_utf8_is_shown_with_a_replacement_and_noted(edited) -> None:
    """A thread's name is the kernel's comm, which is bytes: one byte that is no UTF-8 refused the whole file."""
    a = run_stages(edited("UPDATE StringIds SET value = CAST(X'776f726bff6572' AS TEXT) WHERE id IN "
                       "(SELECT nameId FROM ThreadNames LIMIT 1)"))  # fmt: skip
    assert "1 strings of the export are not valid UTF-8" in " ".join(
        w.message for w in a.warnings if w.code == "not-utf8"
    )
    assert "work\ufffder" in set(a.thread_names.values()) or any("work\ufffder" in n for n in a.thread_names.values())


@settings(max_examples=300, deadline=None)
@given(blob=st.binary(max_size=200), offset=st.integers(0, 2**64 - 1))
def test_python_frame_blobs_of_any_bytes_decode_or_are_left_out(blob: bytes, offset: int) -> None:
    """An offset of 2**63 and more raised OverflowError (an internal error in analyze and diff)."""
    import struct

    from nsync.load.nsys.pyframes import decode_frames

    header = struct.pack("<QQQQ", 1, 0, 0, offset)
    for data in (blob, header + blob):
        decoded = decode_frames(data, {})
        assert decoded is None or isinstance(decoded, tuple)


def test_a_python_frame_pointing_past_its_blob_is_left_out(edited, reference) -> None:
    """The offset bytes of every frame blob set to 0xFF..FF: the calls lose their Python lines, nothing more."""
    a = run_stages(edited("UPDATE NVTX_EVENTS SET binaryData = substr(binaryData, 1, 24) || X'FFFFFFFFFFFFFFFF' || "
                       "substr(binaryData, 33) WHERE binaryData IS NOT NULL"))  # fmt: skip
    assert a.totals["sync_count"] == reference.totals["sync_count"]
    assert "w_print.py" not in set(a.callsites["file"])  # native backtraces name the sites instead


@pytest.mark.slow  # (nsync or pytest subprocesses)
def test_odd_files_and_paths_are_one_line_errors(tmp_path, h200) -> None:
    import lzma
    import os

    from tests.test_cli import assert_one_line_error, run

    loop = tmp_path / "loop.json"
    loop.symlink_to(tmp_path / "loop.json")
    assert_one_line_error(run("analyze", h200("p4"), "--json", loop), 2, "loop.json: cannot be resolved")
    fifo = tmp_path / "trace.sqlite"
    os.mkfifo(fifo)
    assert_one_line_error(run("analyze", fifo), 2, "trace.sqlite: not a regular file")
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    packed = tmp_path / "other.sqlite.xz"
    packed.write_bytes(lzma.compress(other.read_bytes()))
    assert_one_line_error(run("analyze", packed), 1, f"{packed}: a SQLite file, but not an nsys export")


@pytest.mark.slow
def test_a_locked_export_is_said_to_be_locked_not_damaged(edited) -> None:
    trace = edited()
    writer = sqlite3.connect(trace, isolation_level=None)
    writer.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(TraceError, match="locked by another program"):
            run_stages(trace)
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_a_2022_4_export_names_its_gpu_by_its_cuda_ordinal(tmp_path) -> None:
    """2022.4 has no TARGET_INFO_CUDA_DEVICE: its GPU's row holds the CUDA ordinal (cuDevice) that the
    activity tables call deviceId, which need not be the row's id."""
    from tests.tracebuilder import TraceBuilder

    b = TraceBuilder(schema="2022.4")
    b.kernel(1, 0, 10, 1010, name="k1")
    path = b.write(tmp_path / "old.sqlite")
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE TARGET_INFO_GPU SET id = 1, cuDevice = 0, name = 'NVIDIA Legacy'")
    assert run_stages(path).gpus == ["NVIDIA Legacy"]


def test_syncs_on_a_device_with_no_gpu_work_are_named_not_nothing_to_fix(edited) -> None:
    """The kernels and copies moved to device 5 while the syncs wait on device 0: before, exposed idle 0 and
    'nothing to fix' with no word said."""
    a = run_stages(edited(f"UPDATE {KERNEL} SET deviceId = 5", f"UPDATE {MEMCPY} SET deviceId = 5"))
    (said,) = [w.message for w in a.warnings if w.code == "devices-disagree"]
    assert "(device id 0)" in said and "reads 0" in said
