"""Clear errors and honest messages: each case printed a box, a traceback, a wrong word, or nothing."""

from __future__ import annotations

import json
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nsync.errors import NsysError
from nsync.load.model import Frame
from nsync.load.nsys.export import export_sqlite
from nsync.load.nsys.locate import describe, find_nsys
from nsync.stages.callsites import hint_for
from nsync.stages.detect import SyncKind
from tests.conftest import interruptible
from tests.test_cli import NSYNC, ROOT, assert_one_line_error, run
from tests.test_real_nsys import needs_nsys
from tests.tracebuilder import TraceBuilder

P4 = ROOT / "fixtures/h200/p4.sqlite.xz"


@pytest.mark.slow
def test_a_folder_is_named_as_a_folder(tmp_path: Path) -> None:
    assert_one_line_error(run("analyze", tmp_path), 2, "is a folder, not a trace")


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["analyze", P4, "--top", "0"], "Invalid value for '--top'"),
        (["analyze", P4, "--no-such-option"], "No such option"),  # click words it differently over versions
        (["analyze"], "Missing argument"),
        (["frobnicate"], "No such command 'frobnicate'"),
    ],
)
def test_usage_errors_are_one_line_not_a_box(args: list[object], fragment: str) -> None:
    result = run(*args)
    assert_one_line_error(result, 2, fragment)
    assert "╭" not in result.stderr + result.stdout


@pytest.mark.slow
def test_more_warm_up_steps_than_steps_is_an_error() -> None:
    result = run("analyze", ROOT / "fixtures/h200/print_deg.sqlite.xz", "--warmup-steps", "1000")
    assert_one_line_error(result, 2, "cannot skip 1000 warm-up steps (--warmup-steps): the trace has 60 steps")


@pytest.mark.slow
def test_a_window_without_gpu_work_names_the_capture_span() -> None:
    inside = run("analyze", P4, "--window", "0.1:0.2")  # in the capture, before any GPU work
    assert inside.returncode == 0, inside.stderr
    text = " ".join(inside.stderr.split())  # notes go to stderr, with the warnings
    assert "the chosen window (0.100-0.200 s) holds no GPU work: the capture spans 0.000-10.270 s" in text
    assert "whole trace" not in text and "was the program run on a GPU" not in text
    # past the capture's end: a usage error, not a success (exit 0 before)
    after = run("analyze", P4, "--window", "999:")
    assert_one_line_error(after, 2, "--window START:END starts at 999.000 s, after the capture's end: it spans 0.000")


@pytest.mark.slow
def test_syncs_left_out_of_the_steps_are_counted_in_the_summary_and_markdown(tmp_path: Path) -> None:
    # probe.py makes 7 syncs per step; p4 has 4 steps, the first skipped as warm-up: 21 are analysed, and the
    # phases account for every other sync of the capture
    result = run("analyze", P4, "--markdown", tmp_path / "r.md", "--json", tmp_path / "r.json")
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["totals"]["sync_count"] == 21
    phases = {phase["phase"]: phase["sync_count"] for phase in data["phases"]}
    assert phases["main loop"] == 21
    assert sum(phases.values()) - 21 == data["totals"]["syncs_outside_window"] > 0
    said = " · ".join(f"{name} " for name in phases)
    assert all(f"{name} " in " ".join(result.stdout.split()) for name in phases), said
    markdown = (tmp_path / "r.md").read_text()
    assert all(f"| {name} |" in markdown for name in phases)
    assert "Syncs outside the main loop" in markdown


@pytest.mark.slow
def test_diff_of_a_trace_with_cuda_against_one_without_is_inconclusive(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.api(1, "cudaGetDeviceProperties_v12000", 0, 5)
    result = run("diff", P4, b.write(tmp_path / "nogpu.sqlite"), "--json", "-")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["verdict"] == "inconclusive" and any("candidate has no GPU work" in r for r in data["reasons"])


@pytest.mark.slow
def test_a_reader_that_goes_away_ends_the_command_quietly() -> None:
    for args in (["--json", "-"], []):
        proc = subprocess.Popen(
            [*NSYNC, "analyze", str(P4), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        proc.stdout.close()  # like `| true`: the reader is gone before a byte is written
        _, errors = proc.communicate(timeout=120)
        assert proc.returncode == 0 and "Error" not in errors and "Traceback" not in errors


def test_a_ctrl_c_python_cannot_raise_ends_the_command_too() -> None:
    """A SIGINT that lands in a compiled module's import (pandas' Cython, seen once in 4 Ctrl-Cs at 50 ms) is
    an "unraisable" KeyboardInterrupt: Python prints it with a traceback and goes on. A finaliser raising
    KeyboardInterrupt takes the same path."""
    program = (
        "import sys\nfrom nsync.__main__ import _interrupted_or_default\n{hook}"
        "class Interrupted:\n    def __del__(self):\n        raise KeyboardInterrupt\n"
        "Interrupted()\nprint('went on')\n"
    )
    plain = subprocess.run([sys.executable, "-c", program.format(hook="")], capture_output=True, text=True)
    assert "went on" in plain.stdout and "Traceback" in plain.stderr  # the premise: Python alone goes on
    hooked = subprocess.run(
        [sys.executable, "-c", program.format(hook="sys.unraisablehook = _interrupted_or_default\n")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert (hooked.returncode, hooked.stdout, hooked.stderr) == (130, "", "nsync: interrupted\n")


def test_a_ctrl_c_while_a_class_is_created_ends_the_command_too() -> None:
    """A SIGINT inside a descriptor's ``__set_name__`` (the stdlib's ipaddress, imported at start-up; seen once
    in CI at 50 ms) reaches the entry point as a RuntimeError caused by the KeyboardInterrupt (Python 3.11;
    3.12 raises the KeyboardInterrupt itself). Here the command's module does exactly that."""
    program = (
        "import sys, types\nfrom nsync.__main__ import main\n"
        "class Descriptor:\n    def __set_name__(self, owner, name):\n        raise KeyboardInterrupt\n"
        "def run(argv):\n    class Interface:\n        hostmask = Descriptor()\n    return 0\n"
        "sys.modules['nsync.cli'] = types.SimpleNamespace(run=run)\nmain()\n"
    )
    ended = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert (ended.returncode, ended.stdout, ended.stderr) == (130, "", "nsync: interrupted\n")
    other = program.replace("raise KeyboardInterrupt", "raise ValueError('not a Ctrl-C')")
    failed = subprocess.run([sys.executable, "-c", other], capture_output=True, text=True)
    assert failed.returncode == 1 and "not a Ctrl-C" in failed.stderr  # anything else is not hidden


def test_a_ctrl_c_a_library_swallows_still_ends_the_command() -> None:
    """Seen in 3 runs of 148 on a busy machine: a SIGINT landing while an import registers a class with an ABC
    raised KeyboardInterrupt there, which the importing code swallowed, and the analysis ran to its end (exit
    0). Here the command swallows it on purpose: it ends with 130 all the same, at its next stage (nothing
    written) or, past the last one, as it returns."""
    program = (
        "import os, signal, sys, time\nfrom nsync.__main__ import main\nimport nsync.cli as cli\n"
        "from nsync.cli.output import spinning\n"
        "def run(argv):\n    try:\n        os.kill(os.getpid(), signal.SIGINT); time.sleep(1)\n"
        "    except BaseException:\n        pass  # a library swallows it\n"
        "    if argv:\n        with spinning('') as progress:\n            progress()('loading')\n"
        "    print('report')\n    return 0\n"
        "cli.run = run\nmain()\n"
    )
    for argv, out in (["stage"], ""), ([], "report\n"):
        ended = subprocess.run(
            [sys.executable, "-c", program, *argv], capture_output=True, text=True, preexec_fn=interruptible
        )
        assert (ended.returncode, ended.stderr, ended.stdout) == (130, "nsync: interrupted\n", out)


def _started(proc: subprocess.Popen[str], seconds: float = 60) -> None:
    """Return once ``proc`` runs nsync's own code: numpy is mapped only once ``nsync.__main__.main`` imports the
    command (interpreter start-up and the console script's own imports come before it)."""
    deadline = time.monotonic() + seconds
    while b"_multiarray_umath" not in Path(f"/proc/{proc.pid}/maps").read_bytes():
        assert proc.poll() is None and time.monotonic() < deadline, "nsync never started"
        time.sleep(0.005)


@pytest.mark.slow
@pytest.mark.parametrize("delay_s", [0, 0.02, 0.1, 0.3, 0.8])
def test_ctrl_c_once_the_command_runs_ends_it_with_one_line_and_130(delay_s: float) -> None:
    """From the entry point on, a Ctrl-C always ends the command the same way, whatever typer does with a
    KeyboardInterrupt (0.29 turns it into a silent exit 130). The analysis of this trace takes 2-5 s here."""
    proc = subprocess.Popen(
        [*NSYNC, "analyze", str(ROOT / "fixtures/real/timm_gradnorm.sqlite.xz"), "--no-calibrate"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=interruptible,
    )  # fmt: skip
    _started(proc)
    time.sleep(delay_s)
    assert proc.poll() is None, "the analysis ended before the Ctrl-C: this test needs a longer one"
    proc.send_signal(signal.SIGINT)
    out, errors = proc.communicate(timeout=120)
    assert (proc.returncode, errors, out) == (130, "nsync: interrupted\n", "")


def test_ctrl_c_while_python_itself_starts_ends_the_command_and_writes_nothing(tmp_path: Path) -> None:
    """Before nsync's entry point runs (the interpreter's start-up and the console script's own imports, the
    first 20-50 ms here), a Ctrl-C is Python's to handle: it may print its own traceback or "Fatal Python
    error". What holds is that the command ends at once, not with success, and has written nothing."""
    for _ in range(5):
        result = tmp_path / "r.json"
        proc = subprocess.Popen(
            [*NSYNC, "analyze", str(ROOT / "fixtures/h200/p4.sqlite.xz"), "--json", str(result)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=interruptible,
        )  # fmt: skip
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
        assert proc.returncode != 0 and not result.exists()


@pytest.mark.slow
@needs_nsys
def test_a_report_of_a_newer_nsys_says_so(tmp_path: Path, cpu_only_export: Path) -> None:
    # The header of a report written by nsys 2025.3 (seen on the H200), in front of a 2022.4 report: the
    # installed 2022.4 rejects it as it rejects the real one ("Version not supported: 36398880").
    report = cpu_only_export.with_suffix(".nsys-rep").read_bytes()
    header = b"NVIDIA Tegra Profiler Report 1.\n"
    assert report.startswith(header)
    newer = tmp_path / "newer.nsys-rep"
    newer.write_bytes(b"NVIDIA Tegra Profiler Report 36398880.\n" + report[len(header) :])
    result = run("analyze", newer)
    assert_one_line_error(result, 4, "was written by a newer nsys than this one (2022.4.2.1")


def _stand_in_nsys(folder: Path, export: str) -> Path:
    """An executable that answers like nsys 2025.3 to --version and --help, and runs ``export`` for export."""
    script = folder / "nsys"
    script.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        "  --version) echo 'NVIDIA Nsight Systems version 2025.3.1.90-253135822126v0' ;;\n"
        f"  export) [ \"$2\" = --help ] && echo '--include-blobs' || {{ {export}; }} ;;\n"
        "  *) echo '--python-backtrace --cudabacktrace' ;;\n"
        "esac\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


@pytest.mark.slow
def test_a_hung_export_is_stopped_with_advice(tmp_path: Path) -> None:
    nsys = describe(_stand_in_nsys(tmp_path, "sleep 30"))
    (tmp_path / "r.nsys-rep").write_bytes(b"x")
    started = time.monotonic()
    with pytest.raises(NsysError, match="did not finish in 1 s; export it by hand"):
        export_sqlite(nsys, tmp_path / "r.nsys-rep", print, timeout_s=1)
    assert time.monotonic() - started < 10


def test_nsys_env_pointing_nowhere_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NSYS", str(tmp_path / "no-nsys-here"))
    with pytest.raises(NsysError, match=r"\$NSYS is set to .*no-nsys-here, which is not an nsys executable"):
        find_nsys()


def test_pytorch_fixes_only_for_pytorch_programs() -> None:
    user = (Frame("step", "/home/u/train.py", 7),)
    assert hint_for([SyncKind.MEMCPY_BLOCKING], user, pytorch=True)[0] == "copy with non_blocking=True"
    assert hint_for([SyncKind.MEMCPY_BLOCKING], user, pytorch=False)[0] == "use cudaMemcpyAsync"
    assert "torch" not in " ".join(hint_for([SyncKind.DEVICE], user, pytorch=False))
    assert "step" not in hint_for([SyncKind.STREAM], user, pytorch=False)[0]  # said also where no steps exist


def test_a_cuda_c_trace_gets_cuda_hints(build) -> None:
    b = TraceBuilder()
    b.kernel(1, 0, 10, 1010, name="k1")
    b.stream_sync(1, 20, 1015)
    b.kernel(1, 1100, 1110, 3000, name="k2")
    b.memcpy(1, "cudaMemcpy_v3020", 3010, 3100, 3000, 3050, copy_kind=2, src_kind=2, dst_kind=1)
    hints = set(build(b).callsites["short_hint"])
    assert hints == {"wait later, on an event", "use cudaMemcpyAsync"}


@pytest.mark.slow
def test_fail_above_gates_on_the_largest_predicted_saving(tmp_path: Path) -> None:
    # print_deg: fixing the print saves 0.39 of 3.18 ms a step (12 %), measured 0.39 of 3.22 unprofiled
    failed = run("analyze", ROOT / "fixtures/h200/print_deg.sqlite.xz", "--fail-above", "5")
    assert failed.returncode == 3
    assert "fixing w_print.py:19 is predicted to save 13.3 % of a step (> 5 %)" in failed.stderr  # as the verdict
    assert run("analyze", ROOT / "fixtures/h200/print_deg.sqlite.xz", "--fail-above", "15").returncode == 0
    # one kernel and one sync: no steps, no prediction, so the gate cannot pass
    b = TraceBuilder()
    b.kernel(1, 0, 10, 1010, name="k1")
    b.stream_sync(1, 20, 1015)
    unknown = run("analyze", b.write(tmp_path / "once.sqlite"), "--fail-above", "5")
    assert_one_line_error(unknown, 1, "--fail-above cannot gate this trace: what-if replay needs steps")
    assert "--pass-inconclusive lets it pass" in unknown.stderr
    allowed = run("analyze", tmp_path / "once.sqlite", "--fail-above", "5", "--pass-inconclusive")
    assert allowed.returncode == 0 and "passing, as --pass-inconclusive asks" in allowed.stderr


@pytest.mark.slow
def test_a_diff_gate_that_cannot_judge_fails_unless_told_to_pass() -> None:
    """Two different programs (step +1045 %): the diff is inconclusive, and the gate said nothing and passed."""
    pair = (ROOT / "fixtures/h200/print_ok.sqlite.xz", ROOT / "fixtures/real/resnet_train.sqlite.xz")
    gate = run("diff", *pair, "--fail-on-regression", "5", "--no-calibrate")
    assert_one_line_error(gate, 1, "--fail-on-regression cannot judge these runs: different programs")
    passed = run("diff", *pair, "--fail-on-regression", "5", "--no-calibrate", "--pass-inconclusive")
    assert passed.returncode == 0 and "passing, as --pass-inconclusive asks" in passed.stderr


@pytest.mark.slow
def test_smaller_things_a_new_user_met(tmp_path: Path) -> None:
    # two outputs in one file: the second overwrote the first, and both were said to be written
    same = run("analyze", P4, "--html", tmp_path / "x", "--markdown", tmp_path / "x")
    assert_one_line_error(same, 2, f"--html and --markdown both name {tmp_path / 'x'}: give each output its own file")
    assert not (tmp_path / "x").exists()
    # a missing calibration file: the error alone, not first 'calibrated by' it
    missing = run("analyze", P4, "--calibration", tmp_path / "nosuch.json")
    assert_one_line_error(missing, 2, "nosuch.json: no such file")
    assert "calibrated by" not in missing.stderr
    # an executable that is no nsys: what it printed, on one line, in whole words
    fake = tmp_path / "fake-nsys"
    fake.write_text("#!/bin/sh\necho 'usage: something else entirely\\nwith a second line of words that goes on'\n")
    fake.chmod(0o755)
    (tmp_path / "t.py").write_text("pass\n")
    wrong = run("profile", "--nsys", fake, tmp_path / "t.py")
    assert_one_line_error(wrong, 4, "does not look like nsys ('--version' printed: usage: something else entirely")
    assert "\\n" not in wrong.stderr
    # the diff's table quotes an added site's line (read beside the trace), as the report's does
    pair = (ROOT / "fixtures/h200/print_ok.sqlite.xz", ROOT / "fixtures/h200/print_deg.sqlite.xz")
    assert run("diff", *pair, "--html", tmp_path / "d.html").returncode == 0
    assert '<code class="src">print(y.sum())' in (tmp_path / "d.html").read_text()
    # 'needs', for one flag
    given = run("analyze", "--from", tmp_path / "r.json", "--db", tmp_path / "r.db")
    assert_one_line_error(given, 2, "--db needs a trace to analyse")
