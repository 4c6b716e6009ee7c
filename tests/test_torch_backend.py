"""nsync profile --backend torch and nsync.capture(): the capture under torch.profiler, with a real CPU build of
torch (CI installs torch 2.13.0+cpu; make test). A CPU loop has no CUDA to price: what is checked is the capture
itself (bounded by its window, its step marks, its trace read back) and the notebook display."""

from __future__ import annotations

import html
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import nsync
from nsync.load import load_trace
from tests.test_real_nsys import needs_nsys

torch = pytest.importorskip("torch", reason="a CPU build of torch (make test installs it)")
pytestmark = pytest.mark.slow

LOOP = """import torch
model = torch.nn.Linear(32, 4)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 32), torch.randn(64, 4)
for step in range(100_000):  # far longer than any window: only nsync's window ends it
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    loss.item()
print("RAN TO THE END")
"""


def _profile(tmp_path: Path, *flags: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "loop.py").write_text(LOOP)
    argv = [sys.executable, "-m", "nsync", "profile", "--python", sys.executable, *flags, "loop.py"]
    return subprocess.run(
        argv, cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env or dict(os.environ), check=False
    )


def test_backend_torch_captures_the_window_of_a_cpu_loop_and_ends_it(tmp_path: Path) -> None:
    done = _profile(tmp_path, "--backend", "torch", "--steps", "5", "--warmup-steps", "3")
    assert done.returncode == 0, done.stderr
    assert "RAN TO THE END" not in done.stdout  # ended after its window, as under nsys
    assert "capturing with torch.profiler" in done.stderr
    trace = tmp_path / "nsync-out" / "loop.pt.trace.json.gz"
    loaded = load_trace(trace)
    # the window opens before step 3 and closes after step 3 + 5: six optimizer steps, each marked
    assert loaded.nvtx_ranges["name"].tolist().count("nsync: optimizer step") == 6
    assert loaded.profiler == "torch.profiler" and not loaded.has_cuda
    assert (tmp_path / "nsync-out" / "loop.html").is_file()


@pytest.mark.parametrize(("steps", "marks"), [(12, 10), (6, 6)])
def test_a_program_ending_inside_its_window_is_captured_from_its_warm_up_s_end_where_it_makes_enough_steps(
    tmp_path: Path, steps: int, marks: int
) -> None:
    """Its whole run under torch.profiler would hold every Python call of its start-up (pyg_collate's 2,000 graphs
    built in Python: 73 MB of xz for 30 steps on the H100, 2026-12-07). 12 steps with 3 of warm-up: the marks of
    steps 3-12 bound the nine captured; 6 steps leave too few after the warm-up (5 at least): the whole run's 6."""
    (tmp_path / "short.py").write_text(LOOP.replace("range(100_000)", "range(int(__import__('sys').argv[1]))"))
    argv = [sys.executable, "-m", "nsync", "profile", "--python", sys.executable, "--backend", "torch",
            "--warmup-steps", "3", "--steps", "20", "short.py", str(steps)]  # fmt: skip
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    said = "capturing its steps 4-12" if steps == 12 else "capturing its whole run"
    assert f"the program ended on its own after {steps} optimizer steps" in done.stderr and said in done.stderr
    loaded = load_trace(tmp_path / "nsync-out" / "short.pt.trace.json.gz")
    assert loaded.nvtx_ranges["name"].tolist().count("nsync: optimizer step") == marks


CPU_LOOP = """import torch
m = torch.nn.Linear(8, 1); o = torch.optim.SGD(m.parameters(), lr=.1)
for _ in range(80):
    l = m(torch.randn(4, 8)).sum(); o.zero_grad(); l.backward(); o.step()
"""


@needs_nsys
@pytest.mark.parametrize("calibrate", [True, False])
def test_a_cpu_loop_under_nsys_is_refused_with_the_reason_and_the_torch_backend(tmp_path: Path, calibrate: bool):
    """issue 64: a CPU-torch loop under nsys failed with an internal error ('_NVTXStub' object has no attribute
    'rangeStartA') and rc 4 after the whole calibration run; it uses no CUDA, so rc 2 and why, either run."""
    (tmp_path / "t.py").write_text(CPU_LOOP)
    flags = [] if calibrate else ["--no-calibrate"]
    argv = [sys.executable, "-m", "nsync", "profile", "--python", sys.executable, *flags, "t.py"]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 2, done.stderr
    run = "its calibration run" if calibrate else "under nsys"
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"nsync: error: the program made 50 optimizer steps without using CUDA ({run})")
    assert "--backend torch captures its steps" in last and "could not open" not in done.stderr


def test_a_pipe_closed_downstream_reaches_neither_the_program_nor_the_capture(tmp_path: Path) -> None:
    """issue 64: `nsync profile tiny.py | head -1`: the program printed into the closed pipe, died of
    BrokenPipeError, and nsync blamed it (rc 1) and captured nothing. nsync now reads the program's output and
    passes it on while the pipe is open; the capture is made and written."""
    (tmp_path / "tiny.py").write_text(LOOP.replace("    loss.item()\n", "    print(f'step {step} {loss.item()}')\n"))
    command = f"{sys.executable} -m nsync profile --backend torch --python {sys.executable} tiny.py | head -1"
    done = subprocess.run(
        ["bash", "-c", f"{command}; echo rc=${{PIPESTATUS[0]}}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.stdout.splitlines() == [
        "-- nsync: the program's output in the calibration run (without the profiler) --",
        "rc=0",
    ]
    assert "BrokenPipeError" not in done.stderr and "exited with code" not in done.stderr
    assert (tmp_path / "nsync-out/tiny.pt.trace.json.gz").is_file() and (tmp_path / "nsync-out/tiny.html").is_file()


def test_backend_auto_without_nsys_captures_with_torch_profiler_and_says_why(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(Path(sys.executable).parent), "NSYS": str(tmp_path / "no-nsys")}
    done = _profile(tmp_path, "--backend", "auto", "--steps", "4", "--warmup-steps", "2", "--no-calibrate", env=env)
    assert done.returncode == 0, done.stderr
    assert "capturing with torch.profiler instead" in done.stderr
    assert (tmp_path / "nsync-out" / "loop.pt.trace.json.gz").is_file()


def test_an_nsys_flag_with_backend_torch_is_a_usage_error(tmp_path: Path) -> None:
    done = _profile(tmp_path, "--backend", "torch", "--capture-range", "nvtx")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == "nsync: error: --capture-range: nsys's, not with --backend torch"


def _train(steps: int) -> None:
    model = torch.nn.Linear(32, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 32), torch.randn(64, 4)
    for _ in range(steps):
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def test_capture_in_process_analyses_its_window_and_shows_the_report_inline(tmp_path: Path) -> None:
    from IPython.core.formatters import DisplayFormatter

    with nsync.capture(steps=4, warmup_steps=2, out_dir=tmp_path) as run:
        _train(12)
    assert run.optimizer_steps == 12 and run.trace == tmp_path / "capture.pt.trace.json.gz"
    assert run.analysis is not None and run.analysis.trace.profiler == "torch.profiler"
    assert load_trace(run.trace).nvtx_ranges["name"].tolist().count("nsync: optimizer step") == 4
    bundle, _ = DisplayFormatter().format(run)
    frame = bundle["text/html"]
    assert frame.startswith("<iframe") and "<script" not in frame.split("srcdoc=")[0]
    page = html.unescape(frame.split('srcdoc="', 1)[1].split('"', 1)[0])
    assert page.startswith("<!DOCTYPE html>") and "torch.profiler" in page
    # one line as its plain text (issue 64: not the summary, which str() and print() give)
    assert bundle["text/plain"].startswith("<nsync.CapturedRun: <nsync.Analysis of capture.pt.trace.json.gz: ")
    assert "\n" not in bundle["text/plain"] and str(run).startswith("trace: ")


def test_capture_whose_window_never_opened_says_so(tmp_path: Path) -> None:
    with nsync.capture(steps=4, warmup_steps=10, out_dir=tmp_path) as run:
        _train(3)
    assert run.trace is None and run.analysis is None
    assert "3 optimizer steps" in run.note and "<p>nsync: " in run._repr_html_()


def test_capture_in_a_notebook_run_headless_displays_the_report(tmp_path: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    from nbclient import NotebookClient

    cells = [
        "import nsync, torch\n"
        "model = torch.nn.Linear(8, 2); optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "x = torch.randn(16, 8)",
        f"with nsync.capture(steps=3, warmup_steps=2, out_dir={str(tmp_path)!r}) as run:\n"
        "    for _ in range(8):\n"
        "        loss = model(x).square().mean(); optimizer.zero_grad(); loss.backward(); optimizer.step()",
        "run",
        "text = str(run); line = repr(run)",
        "print(line)",
    ]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    NotebookClient(
        notebook, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    run_cell, str_cell, print_cell = (cell.outputs for cell in notebook.cells[-3:])
    (shown,) = run_cell  # the report once: no summary displayed beside it as a side effect (issue 64)
    assert shown.output_type == "execute_result"
    assert shown.data["text/html"].startswith('<iframe title="nsync report"')
    assert str_cell == []  # str() and repr() display nothing
    (printed,) = print_cell
    assert printed.text.startswith("<nsync.CapturedRun: <nsync.Analysis of ") and printed.text.count("\n") == 1


GAN = """import time
import torch
from torch.utils.data import DataLoader, Dataset


class Slow(Dataset):
    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        time.sleep(0.0025)  # 8 a batch: one worker makes a batch in at least 20 ms
        return torch.randn(16)


if __name__ == "__main__":
    disc, gen = torch.nn.Linear(16, 1), torch.nn.Linear(8, 16)
    opt_d = torch.optim.SGD(disc.parameters(), lr=0.01)
    opt_g = torch.optim.SGD(gen.parameters(), lr=0.01)
    for real in DataLoader(Slow(), batch_size=8, num_workers=1):  # each iteration: the discriminator, the generator
        loss_d = disc(real).mean() - disc(gen(torch.randn(8, 8)).detach()).mean()
        opt_d.zero_grad(); loss_d.backward(); opt_d.step()
        loss_g = -disc(gen(torch.randn(8, 8))).mean()
        opt_g.zero_grad(); loss_g.backward(); opt_g.step()
    print("RAN TO THE END")
"""


def test_a_loop_of_two_optimizers_is_timed_by_its_iterations_and_its_data_waits_are_marked(tmp_path: Path) -> None:
    """Each iteration steps two optimizers; the window counts optimizer steps (4 of warm-up, 12 captured: 13 marks,
    the generator's first as the window opens after the 4th). Its steps are the 6 iterations between the
    generator's 7 steps, each said to be one; each waits on its one DataLoader batch, which the worker needs at
    least 20 ms to make while the loop's own work takes a few: most of the step is the wait."""
    from nsync.config import AnalysisConfig
    from nsync.stages.steps import bound_by_data, data_waits_ns, find_steps

    (tmp_path / "gan.py").write_text(GAN)
    argv = [sys.executable, "-m", "nsync", "profile", "--python", sys.executable, "--backend", "torch"]
    argv += ["--steps", "12", "--warmup-steps", "4", "--no-calibrate", "gan.py"]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    trace = load_trace(tmp_path / "nsync-out" / "gan.pt.trace.json.gz")
    names = trace.nvtx_ranges["name"].tolist()
    assert (names.count("nsync: optimizer 1"), names.count("nsync: optimizer 2")) == (6, 7)
    steps = find_steps(trace, trace.gpu_ops, AnalysisConfig())
    assert (steps.source, steps.optimizer_steps, len(steps.table)) == ("marks", 2, 6)
    assert steps.each == "one iteration of 2 optimizer steps"
    waits_ms = data_waits_ns(steps, trace.nvtx_ranges) / 1e6
    lengths_ms = (steps.analysed["end"] - steps.analysed["start"]).to_numpy() / 1e6
    assert len(waits_ms) == steps.count == 5 and (waits_ms > 0).all()
    assert float(np.median(lengths_ms)) >= 20 and float(np.median(waits_ms / lengths_ms)) > 0.5
    assert bound_by_data(steps, trace.nvtx_ranges)
