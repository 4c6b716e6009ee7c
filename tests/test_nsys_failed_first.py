"""nsys that fails before the program starts (exit 1, no report: seen with Debian's nsys 2022.4, two captures at
a time, "sem_open" and "Connection reset by peer" in its output), or never starts it (its agent waits forever).
nsync's sitecustomize says when the program has started; where it has not, nothing of it ran, and ``nsync
profile`` tries once more. Where it has, nsync never runs the program twice. The stand-in nsys below plays each
(no real nsys needed)."""

from __future__ import annotations

import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nsync.capturing.nsys import leftovers
from nsync.capturing.nsys.capture import CaptureOptions, NsysFailedFirst, run_capture
from nsync.capturing.profile import _capture as capture_tried_twice
from nsync.capturing.window import CaptureWindow
from nsync.errors import NsysError
from nsync.load.nsys.locate import describe

STAND_IN = """#!PYTHON -S
import os, subprocess, sys
args = sys.argv[1:]
if args == ["--version"]:
    print("NVIDIA Nsight Systems version 2022.4.2.1-df9881f"); sys.exit(0)
if args[1:] == ["--help"]:
    print("--env-var --sample --backtrace --cudabacktrace --include-blobs"); sys.exit(0)
calls = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls")
with open(calls, "a") as handle:
    handle.write("profile\\n")
if os.environ.get("STAND_IN_NEVER_STARTS"):  # its agent waits forever for a session broken by another nsys
    import signal, time
    signal.signal(signal.SIGINT, lambda *_: sys.exit(1))
    while True:
        time.sleep(1)
if os.environ.get("STAND_IN_RUNS_PROGRAM"):  # the program starts, then nsys fails
    first = next(k for k, a in enumerate(args) if os.path.basename(a).startswith("python"))
    subprocess.run(args[first:])
print("[sem_open] failed: Connection reset by peer", file=sys.stderr)
sys.exit(1)
"""
PROGRAM = "with open('ran.txt', 'a') as f:\n    f.write('ran\\n')\n"


def _stand_in(tmp_path: Path) -> Path:
    nsys = tmp_path / "bin" / "nsys"
    nsys.parent.mkdir()
    nsys.write_text(STAND_IN.replace("PYTHON", sys.executable))
    nsys.chmod(nsys.stat().st_mode | stat.S_IEXEC)
    (tmp_path / "job.py").write_text(PROGRAM)
    return nsys


def _profile(tmp_path: Path, more: list[str]) -> subprocess.CompletedProcess[str]:
    nsys = _stand_in(tmp_path)
    env = {"PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [str(Path(sys.executable).parent / "nsync"), "profile", "--nsys", str(nsys), "--no-calibrate",
         "--python", sys.executable, *more, "job.py"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("whole_run", [False, True], ids=["window", "whole-run"])
def test_nsys_that_fails_before_the_program_starts_is_tried_once_more(tmp_path: Path, whole_run: bool) -> None:
    """With a window of steps, and capturing the whole run (seen: "Local Endpoint is not available", a whole-run
    capture after the calibration run found no steps)."""
    done = _profile(tmp_path, ["--whole-run"] if whole_run else [])
    assert done.returncode == 4, done.stderr
    assert (tmp_path / "bin/calls").read_text().splitlines() == ["profile", "profile"]
    assert not (tmp_path / "ran.txt").exists()  # nothing of the program ran, either time
    assert "before the program started: trying once more" in done.stderr
    last = done.stderr.rstrip().splitlines()[-1]
    assert last.startswith(
        "nsync: error: nsys exited with code 1 and wrote no report (nsync-out/job.nsys-rep) before the program started"
    )
    # (what follows says whether another nsys runs: one of another job on this machine may)
    assert last.endswith(("started (tried twice): run again", "then run again"))
    assert "started (tried twice)" in last


def test_a_state_left_in_shared_memory_does_not_stop_the_second_try(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CI, 2026-12-06: of two captures at a time, one nsys failed at start ("Connection reset by peer") while the
    other's state was in /dev/shm and, for a moment, no nsys ran; that state was called the cause and nothing was
    tried again. The second try comes first; the state is named only where that try fails too."""
    shared_memory = tmp_path / "shm"
    shared_memory.mkdir()
    (shared_memory / "NSys-2022.4.2.1").write_bytes(b"")
    monkeypatch.setattr(leftovers, "SHARED_MEMORY", shared_memory)
    monkeypatch.setattr(leftovers, "running_nsys", list)  # (another job's nsys on this machine must not count)
    nsys = describe(_stand_in(tmp_path))
    options = CaptureOptions(out_dir=tmp_path, name="job", window=CaptureWindow())
    told: list[str] = []
    with pytest.raises(NsysError) as raised:
        capture_tried_twice(nsys, [sys.executable, str(tmp_path / "job.py")], options, told.append)
    assert (tmp_path / "bin/calls").read_text().splitlines() == ["profile", "profile"]
    tried = [m for m in told if m.endswith(f"({tmp_path}/job.nsys-rep) before the program started: trying once more")]
    assert len(tried) == 1, told
    assert str(raised.value).startswith(
        f"nsys exited with code 1 and wrote no report ({tmp_path}/job.nsys-rep) before the program started "
        f"(tried twice); nsys's session state is left in {shared_memory}/NSys-2022.4.2.1 and no nsys"
    )


def test_nsys_that_fails_once_the_program_has_started_is_not_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The program ran (nsync's sitecustomize said so): the failure is not one to try again, whatever else
    nsync makes of it (here: the program ended before its window opened)."""
    _stand_in(tmp_path)
    monkeypatch.setenv("STAND_IN_RUNS_PROGRAM", "1")
    monkeypatch.chdir(tmp_path)
    options = CaptureOptions(out_dir=tmp_path / "out", name="job", window=CaptureWindow())
    options.out_dir.mkdir()
    with pytest.raises(NsysError) as raised:
        run_capture(
            describe(tmp_path / "bin/nsys"), [sys.executable, str(tmp_path / "job.py")], options, lambda _: None
        )
    assert not isinstance(raised.value, NsysFailedFirst)
    assert (tmp_path / "ran.txt").read_text() == "ran\n"


def _capture(tmp_path: Path, program: str, start_s: float) -> None:
    """run_capture of ``program`` under the stand-in, which ends in an error each way it is played."""
    _stand_in(tmp_path)
    (tmp_path / "job.py").write_text(program)
    options = CaptureOptions(out_dir=tmp_path / "out", name="job", start_s=start_s, window=CaptureWindow())
    options.out_dir.mkdir()
    run_capture(describe(tmp_path / "bin/nsys"), [sys.executable, str(tmp_path / "job.py")], options, print)


@pytest.mark.slow
@pytest.mark.usefixtures("no_capture_hangs_forever")
def test_nsys_that_never_starts_the_program_is_stopped_and_may_be_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seen with two nsys 2022.4 that broke their shared session state: one waited forever for its agent, and
    every nsys after it failed while it waited."""
    monkeypatch.setenv("STAND_IN_NEVER_STARTS", "1")
    monkeypatch.chdir(tmp_path)
    started = time.monotonic()
    with pytest.raises(NsysFailedFirst, match=r"nsys had not started the program 2 s after it was started itself"):
        _capture(tmp_path, PROGRAM, start_s=2)
    assert time.monotonic() - started < 30
    assert not (tmp_path / "ran.txt").exists()
    assert not subprocess.run(["pgrep", "-f", str(tmp_path / "bin/nsys")], capture_output=True).stdout  # stopped


@pytest.mark.slow
def test_a_program_that_started_is_never_cut_for_running_longer_than_nsys_takes_to_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STAND_IN_RUNS_PROGRAM", "1")
    monkeypatch.chdir(tmp_path)
    slow = "import time\ntime.sleep(3)\n" + PROGRAM
    with pytest.raises(NsysError) as raised:  # the stand-in fails once the program ended: not a hang at start
        _capture(tmp_path, slow, start_s=1)
    assert not isinstance(raised.value, NsysFailedFirst)
    assert (tmp_path / "ran.txt").read_text() == "ran\n"
