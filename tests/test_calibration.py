"""The injected sitecustomize and the calibration run, with a stand-in torch (no GPU here) whose CUDA events
read a clock the program sets, so every timing is known by construction; and calibration files, good and bad."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import nsync
from nsync.analysis import run_stages
from nsync.capturing import inject
from nsync.capturing.calibrate import run_calibration
from nsync.capturing.inject import STEP_MARK
from nsync.errors import TraceError
from nsync.load.calibration import SCHEMA, Calibration, beside, read_calibration, write_calibration

FAKE_TORCH = {
    "torch/__init__.py": "import torch.cuda, torch.optim.optimizer\n",
    "torch/cuda/__init__.py": (
        "from torch.cuda import nvtx\n"
        "clock_ms = 0.0  # the GPU's clock, set by the program\n"
        "initialized = False\ncapturing = False\nsynchronized = []\n"
        "def is_initialized(): return initialized\n"
        "def is_current_stream_capturing(): return capturing\n"
        "def synchronize(): synchronized.append(True)\n"
        "class Event:\n"
        "    def __init__(self, enable_timing=False): self.at = None\n"
        "    def record(self): import torch.cuda as c; self.at = c.clock_ms\n"
        "    def elapsed_time(self, other): return other.at - self.at\n"
    ),
    "torch/cuda/nvtx.py": (
        "calls = []\ndef range_push(name): calls.append(('push', name))\ndef range_pop(): calls.append(('pop',))\n"
        "def range_start(name): calls.append(('start', name)); return len(calls)\n"
        "def range_end(handle): calls.append(('end',))\n"
    ),
    "torch/compiler.py": (  # torch.compile's switch: a function it must not trace runs through the wrapper
        "disabled = []\n"
        "def disable(fn):\n"
        "    def wrapper(*args, **kwargs): disabled.append(fn.__name__); return fn(*args, **kwargs)\n"
        "    return wrapper\n"
    ),
    "torch/version.py": "cuda = '12.8'  # a CUDA build\n",
    "torch/optim/__init__.py": "",
    "torch/optim/optimizer.py": (
        "pre, post = [], []\n"
        "def register_optimizer_step_pre_hook(h): pre.append(h)\n"
        "def register_optimizer_step_post_hook(h): post.append(h)\n"
        "class Optimizer:\n"
        "    def step(self):\n"
        "        for h in pre: h(self, (), {})\n"
        "        for h in post: h(self, (), {})\n"
    ),
}

# Steps of 2.5, 3.0, 2.5, 3.0 ms on the GPU clock, each in an NVTX range 'step N' closed by an optimizer step;
# one range pushed before CUDA starts and one during a CUDA graph capture are not timed.
PROGRAM = """
import torch, torch.cuda as cuda
from torch.cuda import nvtx
from torch.optim.optimizer import Optimizer
nvtx.range_push('before cuda'); nvtx.range_pop()
cuda.initialized = True
opt = Optimizer()
for i, ms in enumerate([2.5, 3.0, 2.5, 3.0, 2.5]):
    nvtx.range_push(f'step {i}')
    cuda.clock_ms += ms
    opt.step()
    nvtx.range_pop()
cuda.capturing = True
nvtx.range_push('step 99'); opt.step()
print(nvtx.calls)
"""


def fake_torch(root: Path) -> Path:
    for name, text in FAKE_TORCH.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_the_injected_sitecustomize_marks_optimizer_steps_and_runs_the_one_it_shadows(tmp_path: Path):
    """The hooks open and close a range around each step, and the program's own sitecustomize still runs."""
    fake = fake_torch(tmp_path / "fake")
    own = tmp_path / "own"
    own.mkdir()
    (own / "sitecustomize.py").write_text("import builtins\nbuiltins.OWN_SITECUSTOMIZE_RAN = True\n")
    program = (
        "import builtins, torch\nfrom torch.optim.optimizer import Optimizer\nfrom torch.cuda import nvtx\n"
        "Optimizer().step(); Optimizer().step()\nprint(nvtx.calls, getattr(builtins, 'OWN_SITECUSTOMIZE_RAN', False))\n"
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{inject.folder()}:{fake}:{own}"}
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    # each step's range holds the range naming its optimizer: two optimizers, numbered as they first stepped
    first, second = ([("push", STEP_MARK), ("push", f"nsync: optimizer {n}"), ("pop",), ("pop",)] for n in (1, 2))
    assert done.stdout.strip() == f"{first + second} True"


def test_a_torch_built_without_cuda_runs_its_optimizer_steps_unmarked_and_unharmed(tmp_path: Path):
    """A torch built without CUDA has NVTX functions that raise (torch.cuda.nvtx's stub): the step hooks must not
    call them, or a CPU program's optimizer step fails under nsync profile (seen with torch 2.13+cpu)."""
    fake = fake_torch(tmp_path / "fake")
    (fake / "torch/version.py").write_text("cuda = None\n")
    (fake / "torch/cuda/nvtx.py").write_text(
        "def range_push(name): raise RuntimeError('NVTX functions not installed')\nrange_pop = range_push\n"
    )
    program = (
        "import torch, nsync\nfrom torch.optim.optimizer import Optimizer\n"
        "Optimizer().step(); nsync.step()\nprint('ok')\n"
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{inject.folder()}:{fake}:{Path(nsync.__file__).parents[1]}"}
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "ok\n", "")


def test_the_calibration_run_times_each_step_between_optimizer_steps_and_nvtx_ranges(tmp_path: Path, monkeypatch):
    """The intervals are the GPU clock's steps (by construction); no NVTX mark is added in this run, and the
    program's own ranges still reach NVTX."""
    fake = fake_torch(tmp_path / "fake")
    monkeypatch.setenv("PYTHONPATH", str(fake))
    notes: list[str] = []
    target = tmp_path / "run.calibration.json"
    run = run_calibration([sys.executable, "-c", PROGRAM], target, notes.append)
    assert run is not None and notes == []
    calibration = run.calibration
    assert calibration is not None
    write_calibration(calibration, target)
    ms = 1e6
    # the optimizer steps end after each step's GPU time: intervals are steps 1.. (3.0, 2.5, 3.0, 2.5 ms)
    assert calibration.intervals_ns["marks"].tolist() == [3.0 * ms, 2.5 * ms, 3.0 * ms, 2.5 * ms]
    # range k is pushed before step k's work: interval k is step k (2.5, 3.0, 2.5, 3.0 ms)
    assert calibration.intervals_ns["nvtx:step N"].tolist() == [2.5 * ms, 3.0 * ms, 2.5 * ms, 3.0 * ms]
    assert "nvtx:before cuda" not in calibration.intervals_ns
    steps = calibration.steps_ns("nvtx:step N", warmup=1)
    assert steps is not None and steps.tolist() == [3.0 * ms, 2.5 * ms, 3.0 * ms]
    assert calibration.steps_ns("nvtx:step N", warmup=4) is None and calibration.steps_ns("marks", 0) is not None
    again = read_calibration(target)
    assert {k: v.tolist() for k, v in again.intervals_ns.items()} == {
        k: v.tolist() for k, v in calibration.intervals_ns.items()
    }
    assert json.loads(target.read_text())["schema"] == SCHEMA


def test_a_calibration_run_that_times_nothing_says_so(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(fake_torch(tmp_path / "fake")))
    notes: list[str] = []
    target = tmp_path / "run.calibration.json"
    program = "import torch; from torch.optim.optimizer import Optimizer; Optimizer().step(); raise SystemExit(3)"
    run = run_calibration([sys.executable, "-c", program], target, notes.append)
    assert run is not None and run.calibration is None and run.exit_code == 3
    assert not target.exists()
    assert notes[0] == "note: the calibration run exited with code 3"
    assert "timed no steps" in notes[1] and "uncalibrated" in notes[1]


def test_the_calibration_lies_beside_the_trace_whatever_its_suffix():
    for name in ("run.sqlite", "run.sqlite.xz", "run.nsys-rep"):
        assert beside(Path("/d") / name) == Path("/d/run.calibration.json")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", ": not an nsync calibration file (not JSON"),
        ('{"schema": "something/1"}', ": not an nsync calibration file (schema 'something/1'"),
        ('{"schema": "nsync.calibration/9"}', ": an nsync calibration file of another version (nsync.calibration/9)"),
        ('{"schema": "nsync.calibration/1", "intervals_ns": {"marks": [1, -5]}}', "are not a list of positive"),
        ('{"schema": "nsync.calibration/1", "intervals_ns": {"marks": [true]}}', "are not a list of positive"),
        ('{"schema": "nsync.calibration/1"}', "no intervals_ns table"),
    ],
)
def test_a_bad_calibration_file_is_a_one_line_error(tmp_path: Path, text: str, message: str):
    path = tmp_path / "x.calibration.json"
    path.write_text(text)
    with pytest.raises(TraceError) as caught:
        read_calibration(path)
    assert message in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.slow
def test_analyze_picks_up_the_calibration_beside_the_trace_and_a_bad_one_is_an_error(tmp_path: Path):
    import shutil

    nsync = str(Path(sys.executable).parent / "nsync")
    lab = Path(__file__).resolve().parents[1] / "fixtures" / "h200" / "cal"
    trace = tmp_path / "w_print_degraded.sqlite.xz"
    shutil.copy(lab / trace.name, trace)
    shutil.copy(lab / "w_print_degraded.calibration.json", beside(trace))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([nsync, "analyze", str(trace), "--json", "-", *args], capture_output=True, text=True)

    done = run()
    assert done.returncode == 0, done.stderr
    assert f"nsync: calibrated by {beside(trace)}" in done.stderr
    assert json.loads(done.stdout)["what_if"]["calibrated"] is True
    off = run("--no-calibrate")
    assert off.returncode == 0 and json.loads(off.stdout)["what_if"]["note"].startswith("uncalibrated: ")
    assert json.loads(off.stdout)["what_if"]["calibrated"] is False
    beside(trace).write_text('{"schema": "nsync.calibration/1", "intervals_ns": {"nvtx:step": "fast"}}')
    bad = run()
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr.strip().splitlines()[-1].startswith("nsync: error: ") and "Traceback" not in bad.stderr
    both = run("--calibration", str(beside(trace)), "--no-calibrate")
    assert both.returncode == 2 and "contradict" in both.stderr


def test_calibration_runs_pool_their_steps_keep_each_median_and_give_their_spread(tmp_path: Path):
    """Two runs of 4 steps, at 10 and 15 ms (a slow moment of the host in the second): pooled, the median step
    is 12.5 ms, 1.25 times the faster run's (and the slower's 1.2 times it); a source only one run timed is left
    out."""
    import numpy as np

    from nsync.load.calibration import Calibration, pooled

    ms = 1e6
    first = Calibration(tmp_path / "a.calibration.json", {"marks": np.full(4, 10 * ms), "nvtx:x": np.ones(4)})
    second = Calibration(None, {"marks": np.full(4, 15 * ms)}, wall_s=2.0)
    both = pooled([first, second])
    assert both.runs == 2 and both.path == first.path and list(both.intervals_ns) == ["marks"]
    assert both.intervals_ns["marks"].tolist() == [10 * ms] * 4 + [15 * ms] * 4
    assert both.run_medians_ns == {"marks": (10 * ms, 15 * ms)}
    assert both.spread("marks") == pytest.approx(1.25) and first.spread("marks") == 1.0
    target = tmp_path / "both.calibration.json"
    write_calibration(both, target)
    again = read_calibration(target)
    assert again.runs == 2 and again.run_medians_ns == both.run_medians_ns


def test_pooled_whole_runs_leave_out_each_run_s_warm_up_steps(tmp_path: Path) -> None:
    """Two whole runs (a program that ends before its window), each a cold 50 ms step and then five of 10 ms:
    pooled, the steps after one warm-up step are the ten of 10 ms, not the second run's cold step among them (it
    raised the mean step 40 % and the host scale fitted to it), also once written and read back."""
    from nsync.load.calibration import pooled

    ms = 1e6
    run = Calibration(None, {"marks": np.array([50 * ms] + [10 * ms] * 5)})
    both = pooled([run, run])
    assert both.steps_ns("marks", 1).tolist() == [10 * ms] * 10
    assert both.steps_ns("marks", 6) is None
    target = tmp_path / "whole.calibration.json"
    write_calibration(both, target)
    assert read_calibration(target).steps_ns("marks", 1).tolist() == [10 * ms] * 10


def test_the_spread_of_runs_of_a_two_optimizer_loop_compares_whole_iterations(tmp_path: Path) -> None:
    """A GAN's intervals alternate 5 and 10 ms; one run stopped after a generator step (9 intervals), the other
    after a whole iteration (10): their interval medians are 5 and 7.5 ms (a spread of 1.5), their iterations
    15 ms each (no spread), and the spread of their iterations survives writing and reading the file."""
    from nsync.load.calibration import pooled

    ms = 1e6
    cut_short = Calibration(None, {"marks": np.array([5 * ms, 10 * ms] * 4 + [5 * ms])})
    whole = Calibration(None, {"marks": np.array([5 * ms, 10 * ms] * 5)})
    both = pooled([cut_short, whole])
    assert both.spread("marks") == pytest.approx(1.5)
    assert both.spread("marks", per_step=2) == 1.0
    target = tmp_path / "gan.calibration.json"
    write_calibration(both, target)
    assert read_calibration(target).spread("marks", per_step=2) == 1.0


@pytest.mark.slow
def test_the_likely_range_of_several_calibration_runs_holds_what_each_run_alone_predicts():
    """w_print (fixtures/h200/cal-pinned) with its own calibration run, and as if two more runs had timed its
    steps 1.1 times slower: the saving each run alone predicts (0.45 and 0.54 ms) lies in the likely range of
    the three pooled."""
    import dataclasses

    from nsync.load.calibration import pooled

    trace = Path(__file__).resolve().parents[1] / "fixtures/h200/cal-pinned/w_print_degraded.sqlite.xz"
    one = read_calibration(beside(trace))
    slow = dataclasses.replace(one, intervals_ns={k: v * 1.1 for k, v in one.intervals_ns.items()})
    alone = [run_stages(trace, calibration=c).what_if.all_syncs_saving_ns for c in (one, slow)]
    assert alone[1] > 1.15 * alone[0]  # the slower host leaves the GPU idle longer at the sync
    low, high = run_stages(trace, calibration=pooled([one, slow, slow])).what_if.all_syncs_range_ns
    assert all(low <= saving <= high for saving in alone)


def test_a_step_of_several_optimizer_steps_is_the_sum_of_as_many_calibrated_intervals():
    """A GAN's iteration is two optimizer steps: its unprofiled step is each pair of intervals summed, after the
    warm-up iterations."""
    calibration = Calibration(path=None, intervals_ns={"marks": np.array([1.0, 2.0, 10.0, 20.0, 100.0, 200.0, 5.0])})
    assert calibration.steps_ns("marks", 1, per_step=2).tolist() == [30.0, 300.0]
    assert calibration.steps_ns("marks", 3, per_step=2) is None
    assert calibration.steps_ns("marks", 1).tolist() == [2.0, 10.0, 20.0, 100.0, 200.0, 5.0]
