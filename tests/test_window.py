"""`nsync profile` captures a window of optimizer steps of a long job, then ends it.

The programs use a stand-in torch (tests/test_calibration.py) whose NVTX calls are real (the `nvtx` package),
so that Debian's nsys 2022.4 really opens and closes its capture on them without a GPU; its CUDA events read a
clock the program sets, so the calibration's step times are known by construction.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nsync.capturing.calibrate import run_calibration
from nsync.capturing.run import Injection
from nsync.capturing.window import CaptureWindow, is_python
from nsync.marks import OPTIMIZER_MARK, STEP_MARK, WINDOW_RANGE
from tests.conftest import run_contained
from tests.test_calibration import fake_torch
from tests.test_cli import assert_one_line_error
from tests.test_real_nsys import needs_nsys

NSYNC = str(Path(sys.executable).parent / "nsync")
REAL_NVTX = (
    "import nvtx as _real\ncalls = []\n"
    "def range_push(name): calls.append(('push', name)); _real.push_range(name)\n"
    "def range_pop(): calls.append(('pop',)); _real.pop_range()\n"
    "def range_start(name): calls.append(('start', name)); return _real.start_range(name)\n"
    "def range_end(handle): calls.append(('end',)); _real.end_range(handle)\n"
)
# A training loop of argv[1] steps: step i (1-based) takes 2.0 ms on the GPU clock when i is odd, 2.5 when even,
# and 2 ms of the host's; 'finished' is written only if the loop runs to its end.
TRAIN = """import pathlib, sys, time
import torch, torch.cuda as cuda
from torch.optim.optimizer import Optimizer
cuda.initialized = True
optimizer = Optimizer()
for i in range(int(sys.argv[1])):
    time.sleep(0.002)
    cuda.clock_ms += 2.0 + (i % 2) * 0.5
    optimizer.step()
pathlib.Path("finished").write_text(sys.argv[1])
"""
# No optimizer: batches of 10 ms in NVTX ranges, for 100 s if nothing stops it.
INFER = """import pathlib, time
import torch, torch.cuda as cuda
from torch.cuda import nvtx
cuda.initialized = True
for i in range(10_000):
    nvtx.range_push(f"batch {i}"); time.sleep(0.01); cuda.clock_ms += 10.0; nvtx.range_pop()
pathlib.Path("finished").write_text("yes")
"""


@pytest.fixture
def job(tmp_path: Path) -> Path:
    """A folder with the stand-in torch (real NVTX) and the two programs."""
    fake = fake_torch(tmp_path / "fake")
    (fake / "torch/cuda/nvtx.py").write_text(REAL_NVTX)
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "infer.py").write_text(INFER)
    return tmp_path


def profile(job: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(job / "fake")}
    return run_contained([NSYNC, "profile", "--python", sys.executable, "-o", "out", *args], 300, cwd=job, env=env)


def ranges(trace: Path) -> dict[str, list[tuple[int, int]]]:
    """The NVTX ranges nsys captured, by name: [(start, end)]."""
    with sqlite3.connect(trace) as db:
        rows = db.execute(
            "SELECT coalesce(e.text, s.value), e.start, e.end FROM NVTX_EVENTS e "
            "LEFT JOIN StringIds s ON s.id = e.textId WHERE e.end IS NOT NULL ORDER BY e.start"
        ).fetchall()
    found: dict[str, list[tuple[int, int]]] = {}
    for name, start, end in rows:
        found.setdefault(name, []).append((start, end))
    return found


@pytest.mark.slow
@needs_nsys
def test_a_job_of_20000_steps_is_captured_for_its_window_and_ended(job: Path) -> None:
    """The whole run would take 2 x 20 000 x >= 2 ms (calibration run and capture): at least 80 s."""
    started = time.monotonic()
    done = profile(job, "train.py", "20000")
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert elapsed < 40, elapsed
    assert not (job / "finished").exists()  # ended after the window, in both runs
    captured = ranges(job / "out/train.sqlite")
    assert len(captured[STEP_MARK]) == 41  # optimizer steps 10..50 bound the 40 steps 11..50
    (window,) = captured[WINDOW_RANGE]
    assert window[0] <= captured[STEP_MARK][0][0] and captured[STEP_MARK][-1][1] <= window[1]
    calibration = json.loads((job / "out/train.calibration.json").read_text())
    assert calibration["intervals_ns"] == {"marks": [2_000_000, 2_500_000] * 20}  # steps 11..50, by construction
    assert "capturing optimizer steps 11-50 of the program (after 10 of warm-up)" in done.stderr
    assert "the program was ended after the capture window (--run-to-end lets it finish)" in done.stderr


@pytest.mark.slow
@needs_nsys
def test_run_to_end_lets_the_program_finish_and_whole_run_captures_every_step(job: Path) -> None:
    done = profile(job, "--run-to-end", "--steps", "5", "--warmup-steps", "3", "train.py", "80")
    assert done.returncode == 0, done.stderr
    assert (job / "finished").read_text() == "80"
    assert len(ranges(job / "out/train.sqlite")[STEP_MARK]) == 6
    (job / "finished").unlink()
    whole = profile(job, "--whole-run", "train.py", "60")
    assert whole.returncode == 0, whole.stderr
    assert (job / "finished").read_text() == "60"
    captured = ranges(job / "out/train.sqlite")
    assert len(captured[STEP_MARK]) == 60 and WINDOW_RANGE not in captured


@pytest.mark.slow
@needs_nsys
def test_a_program_shorter_than_its_window_is_captured_whole_and_without_calibration_says_nothing_was(
    job: Path,
) -> None:
    done = profile(job, "train.py", "30")
    assert done.returncode == 0, done.stderr
    assert "ended on its own after 30 optimizer steps" in done.stderr and "capturing its whole run" in done.stderr
    assert len(ranges(job / "out/train.sqlite")[STEP_MARK]) == 30
    blind = profile(job, "--no-calibrate", "train.py", "5")  # no calibration run to tell: a short run is redone
    assert blind.returncode == 0, blind.stderr
    assert "the program ended after 5 optimizer steps in " in blind.stderr
    assert "before its capture window opened: capturing its whole run instead" in blind.stderr
    assert len(ranges(job / "out/train.sqlite")[STEP_MARK]) == 5


@pytest.mark.slow
@needs_nsys
def test_a_long_run_that_ends_before_its_window_says_nothing_was_captured(job: Path, monkeypatch) -> None:
    from nsync import NsysError, ProfileOptions
    from nsync.capturing.profile import profile as profile_run

    monkeypatch.chdir(job)
    monkeypatch.setenv("PYTHONPATH", str(job / "fake"))
    long = {"rerun_whole_s": 0}  # every run counts as long
    options = ProfileOptions(out_dir=job / "out", base_name="train", calibrate=False, python=sys.executable, **long)
    with pytest.raises(NsysError) as caught:
        profile_run(["train.py", "5"], options)
    assert str(caught.value) == (
        "nothing was captured: the program ended after 5 optimizer steps, before the capture window opened at "
        "step 10 (ProfileOptions.warmup_steps): capture fewer warm-up steps, or the whole run "
        "(ProfileOptions.whole_run=True)"
    )
    assert not (job / "out/train.nsys-rep").exists()  # the empty report nsys 2022.4 wrote is not kept


@pytest.mark.slow
@needs_nsys
def test_a_program_without_optimizer_steps_is_captured_by_the_clock_then_ended(job: Path) -> None:
    done = profile(job, "--wait-for-steps", "1", "--duration", "1", "infer.py")
    assert done.returncode == 0, done.stderr  # the SIGTERM that ended it was nsync's
    assert not (job / "finished").exists()
    assert "the program made no optimizer step within 1 s of using CUDA: captured 1 s of it by the clock" in done.stderr
    (window,) = ranges(job / "out/infer.sqlite")[WINDOW_RANGE]
    assert 0.9e9 < window[1] - window[0] < 3e9  # a 1 s sleep, and a loaded machine's scheduling


@pytest.mark.slow
def test_window_flags_need_a_window(tmp_path: Path) -> None:
    script = tmp_path / "t.py"
    script.write_text("pass\n")
    argv = [NSYNC, "profile", "--whole-run", "--steps", "5", str(script)]
    done = subprocess.run(argv, capture_output=True, text=True)
    assert_one_line_error(done, 2, "--steps choose a window of steps: not with --whole-run or --capture-range")


def test_only_python_programs_get_a_window(tmp_path: Path) -> None:
    launcher = tmp_path / "launch"
    launcher.write_text("#!/usr/bin/env python3\nprint('torchrun-like')\n")
    assert is_python([sys.executable, "x.py"]) and is_python([str(launcher)]) and is_python(["python3"])
    assert not is_python(["/bin/sh", "-c", "true"]) and not is_python(["no-such-program"])


def test_the_window_opens_at_step_w_closes_after_w_plus_k_and_ends_the_program(tmp_path: Path) -> None:
    """Without nsys: the sitecustomize's calls, in order. A program that catches the SystemExit and goes on is
    ended at its next step."""
    fake = fake_torch(tmp_path / "fake")
    program = (
        "import sys, torch\nfrom torch.cuda import nvtx\nfrom torch.optim.optimizer import Optimizer\n"
        "torch.cuda.initialized = True  # a GPU program (one on the CPU is refused: test_torch_backend.py)\n"
        "opt = Optimizer()\nfor i in range(20):\n"
        "    try:\n        opt.step()\n    except SystemExit:\n"
        "        print(nvtx.calls, flush=True)\n        if sys.argv[1] == 'exit': raise\n"
        "print('ran to the end')\n"
    )
    env = Injection("nsys", tmp_path, CaptureWindow(warmup_steps=2, steps=3)).env(
        {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(fake)}
    )
    mark = [("push", STEP_MARK), ("push", OPTIMIZER_MARK.format(1)), ("pop",), ("pop",)]
    for how in ("exit", "swallow"):
        done = subprocess.run([sys.executable, "-c", program, how], capture_output=True, text=True, env=env, timeout=60)
        assert done.returncode == 0, done.stderr
        expected = mark + [("start", WINDOW_RANGE)] + mark * 4 + [("end",)]  # opened at step 2, closed after 5
        assert done.stdout == f"{expected}\n"  # never 'ran to the end'
        state = json.loads(next(tmp_path.glob("window-*.json")).read_text())
        assert (state["optimizer_steps"], state["opened_by"], state["ended_program"]) == (5, "steps", True)


def test_a_loop_without_an_optimizer_is_windowed_by_its_nsync_step_calls(tmp_path: Path) -> None:
    """nsync.step() at the end of each step does what an optimizer step's hooks do: the same marks, the window
    opened at step 2 and closed after step 5, the program ended there."""
    fake = fake_torch(tmp_path / "fake")
    program = (
        "import nsync, torch.cuda\nfrom torch.cuda import nvtx\ntorch.cuda.initialized = True\nfor i in range(20):\n"
        "    try:\n        nsync.step()\n    except SystemExit:\n        print(nvtx.calls, flush=True)\n        raise\n"
        "print('ran to the end')\n"
    )
    env = Injection("nsys", tmp_path, CaptureWindow(warmup_steps=2, steps=3)).env(
        {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(fake)}
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    mark = [("push", STEP_MARK), ("push", OPTIMIZER_MARK.format(0)), ("pop",), ("pop",)]
    assert done.stdout == f"{mark + [('start', WINDOW_RANGE)] + mark * 4 + [('end',)]}\n"
    state = json.loads(next(tmp_path.glob("window-*.json")).read_text())
    assert (state["optimizer_steps"], state["opened_by"], state["ended_program"]) == (5, "steps", True)


def test_the_calibration_run_is_ended_after_the_window_and_knows_where_it_began(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(fake_torch(tmp_path / "fake")))
    (tmp_path / "train.py").write_text(TRAIN)
    monkeypatch.chdir(tmp_path)
    run = run_calibration(
        [sys.executable, "train.py", "1000"], tmp_path / "c.json", print, CaptureWindow(warmup_steps=4, steps=6)
    )
    assert run is not None and run.calibration is not None and run.window is not None
    assert (run.window.optimizer_steps, run.window.ended_program) == (10, True)
    assert not (tmp_path / "finished").exists()
    assert run.calibration.window_from == {"marks": 3}
    ms = 1e6
    assert run.calibration.of_window().intervals_ns["marks"].tolist() == [2.0 * ms, 2.5 * ms] * 3  # steps 5..10


def test_a_torch_cuda_still_importing_neither_prints_a_traceback_nor_stops_the_window_by_the_clock(tmp_path: Path):
    """The window's clock thread looks for torch.cuda every 0.25 s; torch's import takes seconds, during which
    torch.cuda is in sys.modules without its functions. The H200 showed the thread's AttributeError on the
    program's stderr (and the thread dead: no window by the clock). Here the stand-in torch.cuda takes 1 s to
    import (within the 1.5 s a program may take to use CUDA at all); the window opens by the clock and ends the
    program."""
    fake = fake_torch(tmp_path / "fake")
    slow = fake / "torch" / "cuda" / "__init__.py"
    slow.write_text("import time\ntime.sleep(1.0)\n" + slow.read_text())
    env = Injection("nsys", tmp_path, CaptureWindow(wait_s=1.5, seconds=0.5)).env(
        {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(fake)}
    )
    (tmp_path / "infer.py").write_text(INFER)
    done = subprocess.run(
        [sys.executable, "infer.py"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
    )
    assert "Traceback" not in done.stderr and "could not" not in done.stderr, done.stderr
    state = json.loads(next(tmp_path.glob("window-*.json")).read_text())
    assert (state["opened_by"], state["ended_program"]) == ("time", True)
    assert not (tmp_path / "finished").exists()


def last_error(stderr: str) -> str:
    """The one error line, the last of stderr, without its prefix (no traceback before it)."""
    assert "Traceback" not in stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("nsync: error: "), stderr
    return last.removeprefix("nsync: error: ")


@pytest.mark.slow
@needs_nsys
@pytest.mark.parametrize("calibrate", [True, False], ids=["calibrated", "uncalibrated"])
def test_a_program_that_never_uses_cuda_is_ended_after_the_wait_saying_why(tmp_path: Path, calibrate: bool):
    """A sleep loop of 1000 s with no CUDA (issue 47: it ran unbounded twice): ended 2 s after its start, in
    the calibration run or under nsys, with exit code 2 and one line that says why and what to change."""
    (tmp_path / "f.py").write_text("import time\nfor i in range(100000): time.sleep(0.01)\n")
    flags = [] if calibrate else ["--no-calibrate"]
    began = time.monotonic()
    done = run_contained([NSYNC, "profile", "-o", "out", "--wait-for-steps", "2", *flags, "f.py"], 300, cwd=tmp_path)
    assert time.monotonic() - began < 120
    assert done.returncode == 2
    run = "its calibration run" if calibrate else "under nsys"
    assert last_error(done.stderr).startswith(f"the program used no CUDA in its first 2 s ({run}), so nsync ended it")
    assert "--wait-for-steps with more seconds" in done.stderr
    assert ("capturing with nsys" in done.stderr) is not calibrate  # calibrated: nsys never ran


@pytest.mark.slow
@needs_nsys
def test_a_program_that_fails_at_once_is_run_once_and_stops_with_its_exit_code(tmp_path: Path):
    """A SyntaxError: the calibration run fails before its first step; nsys never runs, nothing is written."""
    (tmp_path / "s.py").write_text('print("x"\n')
    done = run_contained([NSYNC, "profile", "-o", "out", "s.py"], 300, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.count("SyntaxError:") == 1 and "capturing with nsys" not in done.stderr
    said = "the program ended on SyntaxError in its calibration run, before its first step (exit code 1)"
    assert last_error(done.stderr).startswith(said)
    assert list((tmp_path / "out").iterdir()) == []


@pytest.mark.slow
@needs_nsys
def test_a_program_that_exits_with_an_error_code_before_its_first_step_stops_as_an_exception_does(tmp_path: Path):
    """issue 64: `raise SystemExit(3)` before any step was captured anyway (a second run under nsys, an HTML)."""
    (tmp_path / "e.py").write_text('print("starting")\nraise SystemExit(3)\n')
    done = run_contained([NSYNC, "profile", "--python", sys.executable, "-o", "out", "e.py"], 300, cwd=tmp_path)
    assert done.returncode == 3
    said = "the program ended with exit code 3 in its calibration run, before its first step: nothing to capture"
    assert last_error(done.stderr).startswith(said) and "capturing with nsys" not in done.stderr
    assert done.stdout.count("starting") == 1 and list((tmp_path / "out").iterdir()) == []


@pytest.mark.slow
@needs_nsys
@pytest.mark.parametrize("calibrate", [True, False], ids=["calibrated", "uncalibrated"])
def test_nsync_step_in_a_program_without_torch_says_so_and_blames_no_nsys(tmp_path: Path, calibrate: bool):
    (tmp_path / "st.py").write_text(
        "import nsync, time\nfor i in range(200):\n    time.sleep(0.01)\n    nsync.step()\n"
    )
    flags = [] if calibrate else ["--no-calibrate"]
    argv = [NSYNC, "profile", "--python", sys.executable, "-o", "out", "--warmup-steps", "2", "--steps", "5"]
    done = run_contained([*argv, *flags, "st.py"], 300, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "No module named" not in done.stderr and "nsys exited" not in done.stderr
    run = "its calibration run" if calibrate else "under nsys"
    assert last_error(done.stderr).startswith(f"the program never imported torch ({run})")
