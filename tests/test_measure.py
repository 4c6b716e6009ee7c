"""`nsync measure`: two commands timed without the profiler in alternate runs, and the change told from the
runs' noise. The interval's arithmetic against Student's t computed here by integration and against
simulated runs whose true change is known; the command end to end with a stand-in torch whose GPU clock each
program sets (tests/test_calibration.py), so that every run's step is known by construction; and what the
H200 measured (fixtures/h200/measure) against the fixes' savings measured in one process (fixtures/fresh*)."""

from __future__ import annotations

import itertools
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from nsync.measuring import run_order
from nsync.measuring.change import change_between, t975
from tests.conftest import interruptible
from tests.test_calibration import fake_torch

NSYNC = str(Path(sys.executable).parent / "nsync")
MEASURED = Path(__file__).parent.parent / "fixtures" / "h200" / "measure"
FIXTURES = Path(__file__).parent.parent / "fixtures"

# argv: the step's GPU time in ms and a counter file: run k of this command takes its steps at FACTORS[k] times
# that (one run's host luck), each step 1 % longer or shorter than the next; 30 optimizer steps.
PROGRAM = """import os, sys, torch, torch.cuda as cuda
from torch.optim.optimizer import Optimizer
step_ms, counter, factors = float(sys.argv[1]), sys.argv[2], [float(f) for f in sys.argv[3].split(",")]
k = int(open(counter).read()) if os.path.exists(counter) else 0
open(counter, "w").write(str(k + 1))
print(f"run {k + 1}: {step_ms * factors[k]} ms steps")  # (to stderr: nsync's stdout is its result's)
cuda.initialized = True
optimizer = Optimizer()
for i in range(30):
    cuda.clock_ms += step_ms * factors[k] * (1 + 0.01 * (i % 3 - 1))
    optimizer.step()
"""
STEADY = "1.00,1.02,0.98,1.01"  # runs of one command differ by at most 4 %


def _student_t_cdf(x: float, df: int) -> float:
    """P(T <= x) for Student's t with ``df`` degrees of freedom, by integrating its density."""
    grid = np.linspace(0.0, x, 200_001)
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    density = np.exp(log_norm - (df + 1) / 2 * np.log1p(grid**2 / df))
    return 0.5 + float(np.sum((density[1:] + density[:-1]) / 2 * np.diff(grid)))


@pytest.mark.parametrize("df", [1, 2, 3, 4, 5, 8, 10, 17, 30, 31, 45, 60, 120, 1000])
def test_t975_is_the_975_quantile_of_student_t(df: int):
    assert _student_t_cdf(t975(df), df) == pytest.approx(0.975, abs=2e-4)


def test_the_interval_holds_the_true_change_95_times_in_100_and_same_code_is_rarely_called_faster_or_slower():
    """Simulated runs: each run's median step is the true step times a host luck of 8 % (log-normal, the H200's
    calmer programs), five runs a side, 4000 pairs: Welch's interval covers the true change about 95 % of
    the time, and same code is called faster or slower about 5 % of the time."""
    rng = np.random.default_rng(26)
    covered, false_calls = 0, 0
    trials = 4000
    for _ in range(trials):
        a = 12.0 * np.exp(rng.normal(0, 0.08, 5))
        b = 12.0 * 0.9 * np.exp(rng.normal(0, 0.08, 5))
        change, _ = change_between(list(a), list(b))
        covered += change.low_pct <= -10.0 <= change.high_pct
        _, verdict = change_between(list(a), list(12.0 * np.exp(rng.normal(0, 0.08, 5))))
        false_calls += verdict in ("faster", "slower")
    assert 0.935 <= covered / trials <= 0.965
    assert false_calls / trials <= 0.065


runs_ms = st.lists(st.floats(1.0, 100.0), min_size=2, max_size=10)


@settings(max_examples=200, deadline=None)
@given(runs_ms, runs_ms, st.floats(0.01, 100.0))
def test_the_change_mirrors_when_the_commands_swap_and_ignores_the_unit(a: list[float], b: list[float], k: float):
    forward, verdict = change_between(a, b)
    backward, _ = change_between(b, a)
    assume(min(forward.low_pct, backward.low_pct) > -99)  # (a percentage kept to 2 decimals says little there)

    def same_log(x_pct: float, y_pct: float) -> None:  # log(1 + x) = -log(1 + y), up to the figures' rounding
        rounding = 0.005 / (100 + x_pct) + 0.005 / (100 + y_pct)
        assert math.log1p(x_pct / 100) == pytest.approx(-math.log1p(y_pct / 100), abs=rounding + 1e-9)

    # B against A is the inverse ratio of A against B: the interval's ends swap
    same_log(forward.pct, backward.pct)
    same_log(forward.low_pct, backward.high_pct)
    scaled, _ = change_between([k * v for v in a], [k * v for v in b])
    assert scaled.pct == pytest.approx(forward.pct, abs=0.02)
    assert forward.low_pct <= forward.pct <= forward.high_pct
    expected = (
        "faster" if forward.high_pct < 0 else "slower" if forward.low_pct > 0 else verdict
    )  # (same/unclear: by the threshold)
    assert verdict == expected
    if verdict == "same":
        assert forward.low_pct > -5 and forward.high_pct < 5


def test_each_command_runs_first_as_often_as_second():
    assert run_order(3) == ["A", "B", "B", "A", "A", "B"]
    assert run_order(4).count("A") == 4


def assert_one_line_error(result: subprocess.CompletedProcess[str], code: int, fragment: str) -> None:
    """Exit ``code``, no traceback, and the error in one last line (after the runs' progress)."""
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.splitlines()
    assert lines[-1].startswith("nsync: error: ") and fragment in lines[-1], result.stderr
    assert all(line.startswith(("nsync: run ", "nsync: note: ", "run ")) for line in lines[:-1]), result.stderr


def _verdict(stdout: str) -> str:
    """The printed verdict, its wrapped lines joined."""
    return " ".join(stdout.strip().split("\n\n")[-1].split())


def run_measure(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`nsync measure ARGS` in ``tmp_path``, its programs importing the stand-in torch."""
    fake = fake_torch(tmp_path / "fake")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(fake)}
    return subprocess.run(
        [NSYNC, "measure", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
        preexec_fn=interruptible,  # a Ctrl-C reaches it even where the suite runs in the background
    )


def _measure(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "train.py").write_text(PROGRAM)
    return run_measure(tmp_path, "--warmup-steps", "2", "--steps", "20", *args)


@pytest.mark.slow
def test_measure_tells_a_fix_that_saves_a_fifth_of_the_step(tmp_path: Path):
    """A's steps take 10 ms, B's 8 ms, each run at the same four host speeds: B is 20 % faster, exactly."""
    done = _measure(tmp_path, "--runs", "4", "--json", "m.json", f"train.py 10 a {STEADY}", f"train.py 8 b {STEADY}")
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "m.json").read_text())
    assert result["schema"] == "nsync.measure/1" and result["verdict"] == "faster"
    assert result["order"] == ["A", "B", "B", "A", "A", "B", "B", "A"]
    factors = [float(f) for f in STEADY.split(",")]
    assert result["baseline"]["run_median_step_ms"] == pytest.approx([10 * f for f in factors])
    assert result["candidate"]["run_median_step_ms"] == pytest.approx([8 * f for f in factors])
    assert result["baseline"]["steps_per_run"] == [20] * 4  # the window's steps only
    assert result["change"]["pct"] == pytest.approx(-20.0, abs=0.01)
    assert result["change"]["low_pct"] < -20.0 < result["change"]["high_pct"] < 0
    lines = done.stdout.splitlines()
    assert lines[0].startswith("4 runs each, alternated, without the profiler")
    base_ms = 10 * math.exp(np.mean(np.log(factors)))  # A's geometric mean of run medians
    assert _verdict(done.stdout).startswith(
        f"B is faster than A: -{0.2 * base_ms:.3f} ms per step (-20.0 %; 95 % interval -2"
    )
    assert all(len(line) <= 80 for line in lines)
    assert len(re.findall(r"nsync: run \d of 8: [AB] ", done.stderr)) == 8


@pytest.mark.slow
def test_measure_says_the_same_code_runs_the_same_and_a_noisy_pair_needs_more_runs(tmp_path: Path):
    same = _measure(tmp_path, "--runs", "4", f"train.py 10 a {STEADY}", f"train.py 10 b {STEADY}")
    assert same.returncode == 0, same.stderr
    assert _verdict(same.stdout).startswith("B runs as fast as A, within 5 % either way: +0.000 ms per step")
    # runs 10 % apart, B 6 % faster: not told in three runs; the count that would tell is said
    noisy = "1.00,1.10,0.91"
    done = _measure(tmp_path, "--runs", "3", "--json", "-", f"train.py 10 c {noisy}", f"train.py 9.4 d {noisy}")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["verdict"] == "unclear" and result["change"]["pct"] == pytest.approx(-6.0, abs=0.01)
    runs = result["change"]["runs_to_tell"]
    # by the arithmetic: the half-width falls under the 6 % change at that many runs, and not one fewer
    spread = float(np.std(np.log([1.0, 1.10, 0.91]), ddof=1))
    width = lambda n: t975(2 * n - 2) * spread * math.sqrt(2 / n)  # noqa: E731
    assert width(runs) < -math.log(0.94) <= width(runs - 1)


@pytest.mark.slow
def test_the_measure_gate_fails_a_slower_candidate_and_cannot_judge_a_noisy_one(tmp_path: Path):
    slower = _measure(
        tmp_path, "--runs", "2", "--fail-on-regression", "5", f"train.py 8 a {STEADY}", f"train.py 10 b {STEADY}"
    )
    assert slower.returncode == 3
    assert slower.stderr.splitlines()[-1].startswith("nsync: B is slower by 25.0 % (> 5 %; 95 % interval")
    noisy = "1.00,1.25"
    args = ("--runs", "2", "--fail-on-regression", "5", f"train.py 10 c {noisy}", f"train.py 10 d {noisy}")
    assert_one_line_error(_measure(tmp_path, *args), 1, "--fail-on-regression cannot judge these runs")
    passed = _measure(tmp_path, *args[:4], "--pass-inconclusive", f"train.py 10 e {noisy}", f"train.py 10 f {noisy}")
    assert passed.returncode == 0 and "passing, as --pass-inconclusive asks" in passed.stderr


@pytest.mark.slow
def test_measure_refuses_what_it_cannot_run_or_compare_in_one_line(tmp_path: Path):
    assert_one_line_error(_measure(tmp_path, "missing.py", "train.py 8 b 1,1"), 2, "script not found: missing.py")
    assert_one_line_error(_measure(tmp_path, "train.py 'unclosed", "train.py"), 2, 'A "train.py \'unclosed"')
    (tmp_path / "idle.py").write_text("import torch\n")  # no optimizer step, no NVTX range: times nothing
    done = _measure(tmp_path, "--runs", "2", "idle.py", f"train.py 8 b {STEADY}")
    assert_one_line_error(done, 1, "nsync measure cannot compare the commands: A's first run timed no steps: ")
    assert "nsync: run" not in done.stderr  # stopped there, not after every run
    (tmp_path / "crash.py").write_text("import torch\nraise SystemExit(7)\n")
    done = _measure(tmp_path, "--runs", "2", f"train.py 8 g {STEADY}", "crash.py")
    assert_one_line_error(done, 1, "B's first run timed no steps (it exited with code 7): ")


def test_what_the_h200_measured_same_code_never_reads_as_a_change():
    """fixtures/h200/measure, the same code on both sides (lightning_mlp's fix measured nothing, in one process
    too: its two modes count as one): each side's six runs split into halves (140 splits), and the sides of one
    program and mode from different measures (10 pairs, the same-code measure among them). None of the 150 says
    faster or slower: the 95 % interval would miss about 5 % of them if the runs' noise were as modelled."""
    sides: dict[tuple[str, str], list[list[float]]] = {}
    for path in sorted(MEASURED.glob("measure-*.json")):
        result = json.loads(path.read_text())
        program, mode_a, mode_b = path.stem.removeprefix("measure-").split("-")[:3]
        for side, mode in (("baseline", mode_a), ("candidate", mode_b)):
            runs = result[side]["run_median_step_ms"]
            if len(runs) == 6:
                sides.setdefault((program, "either" if program == "lightning_mlp" else mode), []).append(runs)
    calls = []
    for runs in (r for same in sides.values() for r in same):
        halves = [half for half in itertools.combinations(range(6), 3) if 0 in half]  # each split once
        calls += [
            change_between([runs[i] for i in h], [v for i, v in enumerate(runs) if i not in h])[1] for h in halves
        ]
    for same in sides.values():
        calls += [change_between(a, b)[1] for a, b in itertools.combinations(same, 2)]
    assert len(calls) == 150
    assert "faster" not in calls and "slower" not in calls


def _in_process_saving_pct(log: Path, program: str) -> list[float]:
    """Each in-process (ab mode) run's saving, as a percentage of its degraded step."""
    found = []
    for line in log.read_text().splitlines():
        if line.startswith("RESULT ") and f'"program": "{program}"' in line:
            run = json.loads(line.removeprefix("RESULT "))
            found.append(100 * (run["healthy_median_ms"] / run["degraded_median_ms"] - 1))
    return found


def test_what_the_h200_measured_holds_the_fixes_measured_in_one_process():
    """timm_perclass's fix (-52 to -59 % in one process, ten runs in five sessions) is told faster, its interval around
    them; pyg_collate's (-28 % in one process the same session) is not told in six runs, but its intervals hold
    it; six separate runs of one program spread 6-22 % (the standard deviation of their logarithms)."""
    timm = json.loads((MEASURED / "measure-timm_perclass-degraded-healthy.json").read_text())
    sessions = [
        p
        for d in sorted(FIXTURES.glob("fresh*"))
        if (d / "ab-timings.log").exists()
        for p in _in_process_saving_pct(d / "ab-timings.log", "timm_perclass")
    ]
    assert len(sessions) >= 10 and timm["verdict"] == "faster"
    assert timm["change"]["low_pct"] < min(sessions) and max(sessions) < timm["change"]["high_pct"]
    same_session = _in_process_saving_pct(MEASURED / "ab-timings.log", "pyg_collate")
    assert same_session == [pytest.approx(-26.9, abs=0.1)]
    for name in ("pyg_collate-degraded-healthy", "pyg_collate-degraded-healthy-cpus"):
        result = json.loads((MEASURED / f"measure-{name}.json").read_text())
        assert result["verdict"] == "unclear"
        assert result["change"]["low_pct"] < same_session[0] < result["change"]["high_pct"]
    spreads = [
        json.loads(p.read_text())[side]["run_spread_pct"]
        for p in MEASURED.glob("measure-*.json")
        for side in ("baseline", "candidate")
        if len(json.loads(p.read_text())[side]["run_median_step_ms"]) == 6
    ]
    assert len(spreads) == 14 and (round(min(spreads)), round(max(spreads))) == (6, 22)


def test_a_hostile_command_is_inert_in_the_text_and_the_markdown():
    """A command line is the user's, but may carry a file's name from anywhere: no terminal escape, no HTML,
    no table broken by a pipe or a backtick."""
    from nsync import render_markdown
    from nsync.measuring.change import measured_command
    from nsync.render.measurement import measurement_text
    from nsync.report.measurement import SCHEMA, Measurement

    hostile = ["python3", "x.py", "`a|b`<script>alert(1)</script>\x1b[2J\n| c |"]
    a = measured_command("A", hostile, [np.array([10.0, 10.2]), np.array([9.9, 10.1])])
    b = measured_command("B", ["python3", "y.py"], [np.array([8.0, 8.1]), np.array([8.2, 8.0])])
    change, verdict = change_between(a.run_median_step_ms, b.run_median_step_ms)
    m = Measurement(SCHEMA, verdict, "marks", ["A", "B", "B", "A"], a, b, change, notes=["run 1 (A) <b>x</b>"])
    text = measurement_text(m)
    assert "\x1b" not in text and "\\x1b[2J" in text
    markdown = render_markdown(m)
    assert "\x1b" not in markdown and "<b>" not in markdown
    rows = [line for line in markdown.splitlines() if line.startswith("| ")]
    command_cell = rows[2].split(" | ")[1]  # HTML inside a code span is shown as text
    assert command_cell.startswith("`x.py ") and command_cell.endswith("`") and command_cell.count("`") == 2
    assert len(rows) == 4  # header, rule, A, B: the newline inside the command ends no row
    assert all(len(re.findall(r"(?<!\\)\|", row)) == 6 for row in rows)
    assert markdown.splitlines()[2].startswith("B is faster than A: ")


def test_five_runs_a_side_tell_timm_perclass_s_fix_and_two_do_not():
    """The default of five runs: every choice of four or five of the H200's six runs a side reads faster; the
    last check's two runs a side read unclear (fixtures/h200/measure/README.md)."""
    measured = json.loads((MEASURED / "measure-timm_perclass-degraded-healthy.json").read_text())
    a, b = measured["baseline"]["run_median_step_ms"], measured["candidate"]["run_median_step_ms"]
    for runs in (4, 5):
        verdicts = {
            change_between([a[i] for i in pick_a], [b[i] for i in pick_b])[1]
            for pick_a in itertools.combinations(range(6), runs)
            for pick_b in itertools.combinations(range(6), runs)
        }
        assert verdicts == {"faster"}
    check = json.loads((MEASURED / "final-check.json").read_text())
    assert check["verdict"] == "unclear" and check["change"]["runs_to_tell"] == 3
    assert len(check["baseline"]["run_median_step_ms"]) == 2


# No optimizer: NVTX ranges of argv[1] ms on the GPU clock, 2 ms apart on the host, until nsync ends it.
SERVE = """import sys, time
import torch, torch.cuda as cuda
from torch.cuda import nvtx
cuda.initialized = True
for i in range(1_000_000):
    nvtx.range_push(f"batch {i}"); time.sleep(0.002); cuda.clock_ms += float(sys.argv[1]); nvtx.range_pop()
"""


@pytest.mark.slow
def test_measure_times_the_nvtx_ranges_of_a_program_without_optimizer_steps(tmp_path: Path):
    """A server loop: each run waits 1 s of CUDA use, times its ranges for 1 s by the clock, and is ended."""
    (tmp_path / "serve.py").write_text(SERVE)
    done = _measure(
        tmp_path, "--runs", "2", "--wait-for-steps", "1", "--duration", "1", "--json", "-", "serve.py 10", "serve.py 8"
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["step_source"] == "nvtx:batch N" and result["verdict"] == "faster"
    assert result["baseline"]["run_median_step_ms"] == [10.0, 10.0]
    assert result["change"]["pct"] == -20.0
    assert all(50 < n < 600 for n in result["baseline"]["steps_per_run"])  # about 1 s of 2 ms batches
    text = _measure(tmp_path, "--runs", "2", "--wait-for-steps", "1", "--duration", "1", "serve.py 9", "serve.py 9")
    assert "a run's step is its median over its NVTX ranges 'batch N'" in " ".join(text.stdout.split())


def test_one_run_against_its_siblings_strays_past_the_calibration_spread_one_time_in_eight():
    """fixtures/h200/measure/README.md: each six-run side's run over the median of its five others."""
    from nsync.config import AnalysisConfig

    ratios = []
    for path in MEASURED.glob("measure-*.json"):
        for side in ("baseline", "candidate"):
            runs = json.loads(path.read_text())[side]["run_median_step_ms"]
            if len(runs) == 6:
                ratios += [v / float(np.median(runs[:i] + runs[i + 1 :])) for i, v in enumerate(runs)]
    ratios_arr = np.array(ratios)
    spread, host = AnalysisConfig().calibration_spread, 1 + AnalysisConfig().host_speed_spread
    assert len(ratios) == 84 and (round(ratios_arr.min(), 2), round(ratios_arr.max(), 2)) == (0.62, 1.42)
    assert np.sum((ratios_arr < 1 / spread) | (ratios_arr > spread)) == 11
    assert np.sum((ratios_arr < 1 / host) | (ratios_arr > host)) == 24


def test_runs_too_noisy_for_a_hundred_runs_are_said_so_without_advice_the_h200_refuted():
    """lightning_mlp's measure (fixtures/h200/measure): its runs spread 12-16 % around a 2 % change; pinning
    them to CPUs did not narrow such spreads there, so the text advises nothing."""
    from nsync.render.measurement import measurement_text
    from nsync.report.measurement import SCHEMA, MeasuredChange, MeasuredCommand, Measurement

    saved = json.loads((MEASURED / "measure-lightning_mlp-degraded-healthy.json").read_text())
    sides = [MeasuredCommand(**saved[side]) for side in ("baseline", "candidate")]
    change, verdict = change_between(sides[0].run_median_step_ms, sides[1].run_median_step_ms)
    assert verdict == "unclear" and change.runs_to_tell is None and change == MeasuredChange(**saved["change"])
    text = " ".join(measurement_text(Measurement(SCHEMA, verdict, "marks", saved["order"], *sides, change)).split())
    assert text.endswith("not told from the runs' noise; runs this noisy would take over 100 of each to tell")


@pytest.mark.slow
def test_a_ctrl_c_after_two_runs_of_each_still_says_what_they_tell(tmp_path: Path):
    """The fifth run's program sends nsync the SIGINT a Ctrl-C would (run 1 A, 2-3 B, 4 A: two of each done):
    the result of those four is printed with a note, then nsync ends with 130. One sent in run 3 (A has one
    run) ends it with 130 and no result."""
    (tmp_path / "stop.py").write_text(
        "import os, signal, sys, time\n"
        "count = int(open('calls').read()) + 1 if os.path.exists('calls') else 1\n"
        "open('calls', 'w').write(str(count))\n"
        "if count == int(sys.argv[1]):\n"
        "    os.kill(os.getppid(), signal.SIGINT); time.sleep(30)\n"
        f"sys.argv = ['train.py', sys.argv[2], sys.argv[3], '{STEADY}']\n"
        f"exec(compile(open('train.py').read(), 'train.py', 'exec'))\n"
    )
    done = _measure(tmp_path, "--runs", "3", "stop.py 5 10 a", "stop.py 5 8 b")
    assert done.returncode == 130, done.stderr
    assert done.stderr.splitlines()[-1] == "nsync: interrupted"
    assert done.stdout.splitlines()[-1] == "note: interrupted in run 5 of 6: the figures are of the 4 runs before it"
    assert "note:" not in done.stderr  # (said once, with the result)
    assert "B is faster than A: " in done.stdout and done.stdout.startswith("2 runs each")
    (tmp_path / "calls").unlink()
    early = _measure(tmp_path, "--runs", "3", "stop.py 3 10 c", "stop.py 3 8 d")
    assert early.returncode == 130 and early.stdout == ""
    assert early.stderr.splitlines()[-1] == "nsync: interrupted"


def test_the_docs_name_every_field_of_the_measure_json():
    from dataclasses import fields

    from nsync.report.measurement import MeasuredChange, MeasuredCommand, Measurement

    docs = (Path(__file__).parent.parent / "docs/json.md").read_text()
    block = docs[docs.index("JSON (`nsync.measure/1`") :][:900]
    for kind in (Measurement, MeasuredCommand, MeasuredChange):
        assert {f.name for f in fields(kind) if f'"{f.name}"' not in block} == set(), kind.__name__
