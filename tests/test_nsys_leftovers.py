"""An nsys killed earlier leaves its session state in /dev/shm, and later nsys can fail to start ("Agent launcher
failed.", exit 1, no report: seen in this project's CI). nsync names the leftover and the command that removes it,
only while no nsys runs, and never removes it itself."""

from __future__ import annotations

import contextlib
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nsync.capturing.nsys import leftovers
from nsync.capturing.nsys.capture import CaptureOptions, run_capture
from nsync.errors import NsysError
from nsync.load.nsys.locate import describe

FAILS_TO_START = """#!PYTHON
import sys
if sys.argv[1:] == ["--version"]:
    print("NVIDIA Nsight Systems version 2022.4.2.1-df9881f"); sys.exit(0)
if sys.argv[2:] == ["--help"]:
    print("--env-var --sample --backtrace --cudabacktrace --include-blobs"); sys.exit(0)
print("Agent launcher failed.", file=sys.stderr)
sys.exit(1)
"""


OURS: list[int] = []  # the stand-in nsys a test started: the only ones its checks see


@pytest.fixture
def shared_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A /dev/shm of the test's own, and a machine where the only nsys running are those the test started (an
    nsys of another job on the machine, as CI's floor run beside the suite, must not change what it sees)."""
    folder = tmp_path / "shm"
    folder.mkdir()
    monkeypatch.setattr(leftovers, "SHARED_MEMORY", folder)
    every = leftovers.running_nsys
    monkeypatch.setattr(leftovers, "running_nsys", lambda: [pid for pid in every() if pid in OURS])
    OURS.clear()
    return folder


def _stand_in(tmp_path: Path) -> Path:
    nsys = tmp_path / "bin" / "nsys"
    nsys.parent.mkdir()
    nsys.write_text(FAILS_TO_START.replace("PYTHON", sys.executable))
    nsys.chmod(nsys.stat().st_mode | stat.S_IEXEC)
    return nsys


@contextlib.contextmanager
def another_nsys(folder: Path) -> Iterator[int]:
    """A process named nsys running in ``folder`` (one of the test's: OURS), seen in /proc before it yields."""
    folder.mkdir(exist_ok=True)
    sleeper = folder / "nsys"
    sleeper.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(30)\n")
    sleeper.chmod(0o755)
    running = subprocess.Popen([str(sleeper)])
    OURS.append(running.pid)
    try:
        deadline = time.monotonic() + 10
        while running.pid not in leftovers.running_nsys():  # /proc/PID/cmdline is empty for a moment after exec
            assert time.monotonic() < deadline, "the stand-in nsys was never seen running"
            time.sleep(0.01)
        yield running.pid
    finally:
        running.kill()
        running.wait()


def test_a_failed_start_with_state_left_behind_names_it_and_how_to_remove_it(
    tmp_path: Path, shared_memory: Path
) -> None:
    state = shared_memory / "NSys-2022.4.2.1"
    state.write_bytes(b"\0" * 64)
    options = CaptureOptions(out_dir=tmp_path, name="job")
    with pytest.raises(NsysError) as raised:
        run_capture(describe(_stand_in(tmp_path)), [sys.executable, "-c", "pass"], options, lambda _: None)
    assert str(raised.value) == (
        f"nsys exited with code 1 and wrote no report ({tmp_path}/job.nsys-rep); nsys's session state is left in "
        f"{state} and no nsys that this user can see runs now: an nsys killed earlier left it, and it can stop every "
        "nsys from starting ('Agent launcher failed.'). Unless another user's nsys runs (which /proc may hide), "
        f"remove it and run again: rm {state}"
    )
    assert state.exists()  # nsync never removes it


def test_a_failed_start_without_state_left_behind_says_only_what_nsys_did(tmp_path: Path, shared_memory: Path) -> None:
    options = CaptureOptions(out_dir=tmp_path, name="job")
    with pytest.raises(NsysError, match=r"^nsys exited with code 1 and wrote no report \([^)]*job.nsys-rep\)$"):
        run_capture(describe(_stand_in(tmp_path)), [sys.executable, "-c", "pass"], options, lambda _: None)


def test_the_state_of_a_running_nsys_is_not_called_stale(tmp_path: Path, shared_memory: Path) -> None:
    (shared_memory / "NSys-2022.4.2.1").write_bytes(b"")
    assert leftovers.stale_session_state() == [shared_memory / "NSys-2022.4.2.1"]
    with another_nsys(tmp_path):
        assert leftovers.stale_session_state() == []
    assert leftovers.stale_session_state() == [shared_memory / "NSys-2022.4.2.1"]


def test_a_failed_capture_is_never_answered_with_an_earlier_runs_report(tmp_path: Path, shared_memory: Path) -> None:
    """Seen in a run of the suite: a second capture to the same name whose nsys failed was "analysed" from the
    first capture's report (exit 0, 6 steps where the second run had 60)."""
    earlier = tmp_path / "job.nsys-rep"
    earlier.write_bytes(b"an earlier capture")
    options = CaptureOptions(out_dir=tmp_path, name="job")
    with pytest.raises(NsysError, match=r"^nsys exited with code 1 and wrote no report"):
        run_capture(describe(_stand_in(tmp_path)), [sys.executable, "-c", "pass"], options, lambda _: None)
    assert not earlier.exists()


def test_a_failed_start_beside_a_running_nsys_says_it_runs_and_not_that_its_state_is_stale(
    tmp_path: Path, shared_memory: Path
) -> None:
    """issue 47: beside another user's suite, the failure was blamed on state "left behind" while "no nsys runs
    now": whether one runs is checked when the failure is said."""
    (shared_memory / "NSys-2022.4.2.1").write_bytes(b"")
    with another_nsys(tmp_path / "other") as pid:
        options = CaptureOptions(out_dir=tmp_path, name="job")
        with pytest.raises(NsysError) as raised:
            run_capture(describe(_stand_in(tmp_path)), [sys.executable, "-c", "pass"], options, lambda _: None)
    said = str(raised.value)
    assert f"another nsys runs now on this machine (pid {pid}" in said and "rm " not in said
