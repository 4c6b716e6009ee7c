"""nsys that hangs after the program ended (seen here: Debian's 2022.4 with CPU sampling, 3 captures in 17).

nsync shuts the session down, stops its agent, imports what was written if it can, and says honestly what
was saved. The stand-in below behaves as the real hang was seen to: the program ends, nsys stays up with
its session in "Generation", an agent spins detached, the .qdstrm in TMPDIR is incomplete, and
`nsys shutdown --session=NAME` makes `nsys profile` exit 0 while the agent spins on.
"""

from __future__ import annotations

import shutil
import stat
import sys
import tempfile
import time
from pathlib import Path

import pytest

from nsync.capturing.nsys.capture import CaptureOptions, run_capture, session_agents
from nsync.errors import NsysError
from nsync.load.nsys.locate import describe
from tests.conftest import _nsys_agents

pytestmark = pytest.mark.usefixtures("no_capture_hangs_forever")  # a regression would hang the suite

STAND_IN = r'''#!PYTHON
"""nsys 2022.4 as it hangs: see tests/test_nsys_hang.py."""
import os, signal, subprocess, sys, time
args = sys.argv[1:]
if args == ["--version"]:
    print("NVIDIA Nsight Systems version 2022.4.2.1-df9881f"); sys.exit(0)
if args[:1] in (["profile"], ["export"]) and args[1:] == ["--help"]:
    print("--env-var --sample --backtrace --cudabacktrace --include-blobs"); sys.exit(0)
if args[:1] == ["shutdown"]:
    session = args[1].split("=", 1)[1]
    os.kill(int(session.rsplit("-", 1)[1]), signal.SIGTERM); sys.exit(0)
if args[:1] == ["profile"]:
    command = [a for a in args[1:] if not a.startswith("-") and a not in ("cuda,nvtx,osrt",)]
    out = args[args.index("-o") + 1]
    program = command[command.index(next(a for a in command if a.endswith("python") or "python3" in a)):]
    # the real nsys leaves its launcher, which exits with the program's status, unreaped: a zombie
    launched = subprocess.Popen(program)
    os.waitid(os.P_PID, launched.pid, os.WEXITED | os.WNOWAIT)
    if os.environ.get("STAND_IN_FINISHES"):  # a working nsys: writes its capture for 3 s, then its report
        with open(os.path.join(os.environ["TMPDIR"], "nsys-report-1b2c.qdstrm"), "wb") as raw:
            for _ in range(12):
                raw.write(b"x" * 1000); raw.flush(); time.sleep(0.25)
        with open(os.environ["STAND_IN_FINISHES"], "rb") as real, open(out + ".nsys-rep", "wb") as rep:
            rep.write(real.read())
        sys.exit(launched.wait())
    agent = [sys.executable, "-c", "import time\nwhile True: time.sleep(0.05)", "--start-agent",
             f"--session-name=profile-python3-{os.getpid()}"]
    # detached like the real agent: started through a parent that exits at once
    subprocess.run([sys.executable, "-c", "import subprocess, sys; subprocess.Popen(sys.argv[1:], "
                    "start_new_session=True)", *agent])
    with open(os.path.join(os.environ["TMPDIR"], "nsys-report-1b2c.qdstrm"), "wb") as raw:
        raw.write(b"QDSTRM" + b"\0" * 100)  # cut short: the agent never delivered the rest
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(0))
    while True:
        time.sleep(1)
'''
IMPORTER_FAILS = """#!/bin/sh
echo 'Qdstrm file is incomplete or invalid. Please ensure that the CLI ran to completion and provide a valid' \\
  'qdstrm file.'
exit 1
"""
IMPORTER_WORKS = """#!/bin/sh
cp "REPORT" "${2%.qdstrm}.nsys-rep"
"""


def _executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def _capture(tmp_path: Path, importer: str) -> tuple[Path, CaptureOptions, list[str]]:
    bin_dir = tmp_path / "nsys-bin"
    bin_dir.mkdir()
    nsys = _executable(bin_dir / "nsys", STAND_IN.replace("PYTHON", sys.executable))
    _executable(bin_dir / "QdstrmImporter", importer)
    script = tmp_path / "job.py"
    script.write_text("import pathlib, sys\npathlib.Path('ran.txt').write_text('yes')\nsys.exit(5)\n")
    options = CaptureOptions(out_dir=tmp_path / "out", name="job", hang_s=1)
    options.out_dir.mkdir()
    return nsys, options, [sys.executable, str(script)]


@pytest.mark.slow
def test_a_hang_with_an_incomplete_capture_says_nothing_was_saved_and_leaves_nothing(
    tmp_path: Path, private_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    nsys, options, command = _capture(tmp_path, IMPORTER_FAILS)
    said: list[str] = []
    started, agents_before = time.monotonic(), _nsys_agents()
    with pytest.raises(
        NsysError, match=r"nsys hung after the program ended \(the program exited with code 5\) and what"
    ):
        run_capture(describe(nsys), command, options, said.append)
    assert time.monotonic() - started < 30
    assert (tmp_path / "ran.txt").read_text() == "yes"
    assert any("shutting it down" in s for s in said)
    assert any("could not be imported: Qdstrm file is incomplete" in s for s in said)
    time.sleep(0.5)
    assert _nsys_agents() - agents_before == set()  # the agent was stopped
    # no .qdstrm, no scratch folder left behind: only the sessions' folder every nsys shares, and none in it
    assert [p.name for p in private_tmp.iterdir()] == ["nvidia"] and not any((private_tmp / "nvidia").iterdir())


@pytest.mark.slow
def test_a_hang_whose_capture_can_be_imported_is_analysed(
    tmp_path: Path, private_tmp: Path, cpu_only_export: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    real_report = tmp_path / "real.nsys-rep"
    shutil.copy(cpu_only_export.with_suffix(".nsys-rep"), real_report)
    nsys, options, command = _capture(tmp_path, IMPORTER_WORKS.replace("REPORT", str(real_report)))
    said: list[str] = []
    started = time.monotonic()
    result = run_capture(describe(nsys), command, options, said.append)
    assert time.monotonic() - started < 15  # noticed 1 s (hang_s) after the program's end, not minutes
    assert result.report == options.base.with_suffix(".nsys-rep") and result.report.is_file()
    assert result.exit_code == 5  # the program's, read from the zombie nsys left
    assert any("made no progress for 1 s after the program ended" in s for s in said)
    assert not any("exit code is unknown" in s for s in said)
    assert [p.name for p in private_tmp.iterdir()] == ["nvidia"] and not any((private_tmp / "nvidia").iterdir())


@pytest.mark.slow
def test_an_nsys_still_writing_its_capture_is_not_taken_for_hung(
    tmp_path: Path, private_tmp: Path, cpu_only_export: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It writes for 3 s after the program ended, three times the quiet time that marks a hang."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("STAND_IN_FINISHES", str(cpu_only_export.with_suffix(".nsys-rep")))
    nsys, options, command = _capture(tmp_path, IMPORTER_FAILS)
    said: list[str] = []
    result = run_capture(describe(nsys), command, options, said.append)
    assert result.exit_code == 5 and result.report is not None and result.report.is_file()
    assert not any("shutting it down" in s for s in said), said


def test_session_agents_are_found_by_their_nsys_pid() -> None:
    import subprocess

    agent = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)", "--start-agent", "--session-name=profile-python3-424242"]
    )
    try:
        time.sleep(0.3)
        assert session_agents(424242) == [(agent.pid, "profile-python3-424242")]
        assert session_agents(42424) == []  # a pid that is only a suffix of the other's
    finally:
        agent.kill()
        agent.wait()


@pytest.mark.slow
def test_hang_watch_tells_a_running_program_from_one_that_left_only_a_zombie() -> None:
    import subprocess

    from nsync.capturing.nsys.hang import HangWatch, program_running

    running = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, time; subprocess.Popen(['sleep', '30']); time.sleep(30)"]
    )
    zombie = subprocess.Popen([sys.executable, "-c", "import os, time\nif os.fork() == 0: os._exit(3)\ntime.sleep(30)"])
    try:
        time.sleep(1)
        assert program_running(running.pid)
        assert not program_running(zombie.pid)  # like nsys whose launched program has exited
        watch = HangWatch(zombie.pid, lambda: [], quiet_s=0)
        assert [watch.hung(), watch.hung()] == [False, True]  # progress noted, then none since
        assert watch.program_exit_code == 3  # read from the zombie
        still = HangWatch(running.pid, lambda: [], quiet_s=0)
        assert [still.hung(), still.hung()] == [False, False]
    finally:
        subprocess.run(["pkill", "-P", str(running.pid)], check=False)  # its sleep
        for proc in (running, zombie):
            proc.kill()
            proc.wait()
