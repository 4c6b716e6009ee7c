"""The noise a diff counts a change beyond. Two runs on one machine: another run's host may be 15 % faster or
slower (AnalysisConfig.host_speed_spread), which moves a host-bound step and not a GPU-bound one
(WhatIf.between_runs_pct); fixtures/h200/README.md, "One machine". Runs on two machines: the same code's step
differs between two H200 machines by more than that, so a diff of runs on two physical GPUs counts only a change
beyond BETWEEN_MACHINES_PCT, derived from the same-code captures of fixtures/fresh-fresh4 (each session on its
own machine) and scored on those of fresh5-fresh7; fixtures/h200/README.md, "Two machines"."""

from __future__ import annotations

import itertools
import json
import lzma
import shutil
import sqlite3
import statistics
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from nsync.comparison import (
    BETWEEN_MACHINES_PCT,
    NOISE_FLOOR_PCT,
    NOISE_SOURCES,
    noise_pct,
    on_two_machines,
    step_times_ns,
)
from nsync.render.text import NOISE_FROM, diff_headline
from nsync.stages.report import StageOutputs, analysis_result
from tests.conftest import compared
from tests.test_fresh import logged_runs
from tests.test_intervals import FIXTURES, calibrated, uncalibrated

TUNED_ON = ("fresh", "fresh2", "fresh3", "fresh4")
HELD_OUT = ("fresh5", "fresh6", "fresh7")


def same_code_pairs(sessions_in: tuple[str, ...], sessions_out: tuple[str, ...] = ()) -> list[tuple[Path, Path]]:
    """Pairs of captures of one program (the same code and mode) from two sessions: both in ``sessions_in``,
    or one there and one in ``sessions_out``."""
    by_program: dict[str, list[Path]] = {}
    for session in (*sessions_in, *sessions_out):
        for trace in sorted((FIXTURES / session).glob("*.sqlite.xz")):
            if (trace.with_name(trace.name.removesuffix(".sqlite.xz") + ".calibration.json")).exists():
                by_program.setdefault(trace.name, []).append(trace)
    pairs = []
    for traces in by_program.values():
        for a, b in itertools.combinations(traces, 2):
            if sessions_out and {a.parent.name, b.parent.name} <= set(sessions_in):
                continue  # (held out: one of the two from sessions_out)
            pairs.append((a, b))
    return pairs


def test_the_gpu_uuid_is_the_exports_own(tmp_path: Path):
    trace = FIXTURES / "fresh2/hf_gpt2_perseq.sqlite.xz"
    plain = tmp_path / "t.sqlite"
    with lzma.open(trace) as source, plain.open("wb") as target:
        shutil.copyfileobj(source, target)
    with sqlite3.connect(plain) as db:
        (uuid,) = db.execute("SELECT uuid FROM TARGET_INFO_GPU").fetchone()
    assert uncalibrated(trace).gpu_uuids == [uuid] == ["a5a8e690-e62d-3222-10db-3698f4210469"]


def test_a_run_against_itself_on_another_machine_counts_only_a_change_beyond_the_machines():
    """By construction: one capture, and the same capture said to be from another GPU."""
    run = calibrated(FIXTURES / "fresh2/hf_gpt2_perseq.sqlite.xz")
    elsewhere = replace(run, gpu_uuids=["another-gpu"])
    unknown = replace(run, gpu_uuids=[])
    run_, elsewhere_, unknown_ = (analysis_result(a) for a in (run, elsewhere, unknown))
    assert on_two_machines(run_, elsewhere_) and not on_two_machines(run_, run_)
    assert not on_two_machines(run_, unknown_)
    here, there = compared(run, run), compared(run, elsewhere)
    assert not here.step_ms.two_machines and here.step_ms.unprofiled.noise_pct < 10
    assert there.step_ms.two_machines and there.verdict == "no-change"
    assert there.step_ms.unprofiled.noise_pct == BETWEEN_MACHINES_PCT["unprofiled"]
    assert there.step_ms.noise_pct == BETWEEN_MACHINES_PCT["profiled"]


@pytest.mark.slow
def test_the_noise_between_machines_is_the_largest_same_code_change_of_the_sessions_it_was_taken_from():
    pairs = same_code_pairs(TUNED_ON)
    assert len(pairs) == 25
    unprofiled, profiled = [], []
    for a, b in pairs:
        assert on_two_machines(*(analysis_result(calibrated(t)) for t in (a, b)))  # every session had its own machine
        unprofiled.append(abs(compared(calibrated(a), calibrated(b)).step_ms.unprofiled.delta_pct))
        profiled.append(abs(compared(uncalibrated(a), uncalibrated(b)).step_ms.delta_pct))
    assert (round(max(unprofiled), 1), round(max(profiled), 1)) == (28.2, 40.3)  # the README's figures
    assert BETWEEN_MACHINES_PCT == {"unprofiled": 29.0, "profiled": 41.0}  # rounded up


def flagged_on_their_steps_alone(base: StageOutputs, cand: StageOutputs) -> bool:
    """The rule before (issue 26's first diff): a change beyond half the interquartile range of either run's
    steps (of the calibration runs where both are calibrated), at least 2 %."""
    result = compared(base, cand)
    if result.reasons:  # runs that cannot be compared: inconclusive either way
        return False
    if result.step_ms.verdict_basis == "profiled":
        times = [step_times_ns(analysis_result(a))[0] for a in (base, cand)]
        delta = result.step_ms.delta_pct
    else:
        times = [a.what_if.calibrated_steps_ns for a in (base, cand)]
        delta = result.step_ms.unprofiled.delta_pct
    return abs(delta) > max(NOISE_FLOOR_PCT, *(noise_pct(t) for t in times))


@pytest.mark.slow
@pytest.mark.parametrize("calibrate", [True, False], ids=["calibrated", "uncalibrated"])
def test_held_out_same_code_on_two_machines_reads_as_no_change(calibrate: bool):
    """27 pairs with a capture of fresh5-fresh7: all no-change, where the rule before flagged 16 calibrated and 20
    uncalibrated, and the runs' own noise on one machine (calibrated only) 11."""
    analysis = calibrated if calibrate else uncalibrated
    pairs = same_code_pairs(TUNED_ON, HELD_OUT)
    assert len(pairs) == 27
    assert {compared(analysis(a), analysis(b)).verdict for a, b in pairs} == {"no-change"}
    before = sum(flagged_on_their_steps_alone(analysis(a), analysis(b)) for a, b in pairs)
    one_machine = [compared(replace(analysis(a), gpu_uuids=[]), analysis(b)).verdict for a, b in pairs]
    assert before == (16 if calibrate else 20)
    assert sum(v in ("regression", "improvement") for v in one_machine) == (11 if calibrate else 20)


@pytest.mark.slow
def test_before_the_machines_counted_28_and_34_of_the_52_same_code_pairs_read_as_a_change():
    pairs = same_code_pairs((*TUNED_ON, *HELD_OUT))
    assert len(pairs) == 52
    for analysis, flagged in ((calibrated, 28), (uncalibrated, 34)):
        assert sum(flagged_on_their_steps_alone(analysis(a), analysis(b)) for a, b in pairs) == flagged


LAB = ("w_print", "w_item", "w_mask", "w_list", "w_two", "w_param", "w_tuple")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("folder", "name"),
    [
        pytest.param(
            folder,
            name,
            marks=pytest.mark.xfail(
                strict=True, reason="predicted unprofiled steps 10.9 % the other way: no-change (README)"
            )
            if (folder, name) == ("h200/cal", "w_tuple")
            else (),
        )
        for folder in ("h200/cal", "h200/cal-pinned")
        for name in LAB
    ],
)
def test_on_one_machine_the_lab_regressions_are_still_found(folder: str, name: str):
    """The lab scenarios' healthy and degraded captures of one session (one machine), calibrated: every
    degraded mode measured slower beyond noise (timings.log), and the diff says so."""
    healthy = calibrated(FIXTURES / f"{folder}/{name}_healthy.sqlite.xz")
    degraded = calibrated(FIXTURES / f"{folder}/{name}_degraded.sqlite.xz")
    result = compared(healthy, degraded)
    assert not result.step_ms.two_machines
    assert result.verdict == "regression"


def test_a_host_bound_step_strays_with_the_host_and_a_gpu_bound_one_not_at_all():
    """By construction: a step the host bounds throughout scales with it, so a host 15 % faster and slower makes
    it 1 / 1.15 and 1.15 times as long, half of which apart is 14.0 %; a step the GPU bounds (the lab's healthy
    print: a 4096² matmul and tiny kernels, no sync, the host far ahead) does not move. Three calibration runs
    pooled: their median strays by 1 / sqrt(3) as much."""
    host_bound = calibrated(FIXTURES / "fresh/tv_cpuaug.sqlite.xz").what_if  # the GPU idles 95 % of the loop
    gpu_bound = calibrated(FIXTURES / "h200/cal/w_print_healthy.sqlite.xz").what_if
    assert host_bound.calibration_runs == 1
    assert host_bound.between_runs_pct == pytest.approx(100 * (1.15 - 1 / 1.15) / 2, abs=0.1)
    assert gpu_bound.between_runs_pct == pytest.approx(0.0, abs=0.05)
    pooled = replace(host_bound, calibration_runs=3)
    assert pooled.between_runs_pct == pytest.approx(host_bound.between_runs_pct / 3**0.5)
    assert uncalibrated(FIXTURES / "fresh/tv_cpuaug.sqlite.xz").what_if.between_runs_pct == 0.0


def separate_runs_of_one_session() -> dict[str, list[list[float]]]:
    """session -> each program's separate unprofiled runs' median degraded step, ms: the `ab` runs' degraded
    blocks (fixtures/fresh*/ab-timings.log) and, in the first session, five runs one after the other
    (repeats.log); only programs captured in that session."""
    runs: dict[str, dict[str, list[float]]] = {}
    for folder in (*TUNED_ON, *HELD_OUT):
        for name, results in logged_runs(FIXTURES / folder / "ab-timings.log").items():
            if (FIXTURES / folder / f"{name}.sqlite.xz").exists():
                runs.setdefault(folder, {})[name] = [statistics.median(r["degraded_ms"]) for r in results]
    for line in (FIXTURES / "fresh/repeats.log").read_text().splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line.removeprefix("RESULT "))
            runs["fresh"].setdefault(f"{result['program']} (repeats)", []).append(result["step_ms"])
    return {folder: list(programs.items()) for folder, programs in runs.items()}


@pytest.mark.slow
def test_on_one_machine_separate_runs_of_the_same_code_read_as_a_change_less_often():
    """Two separate unprofiled runs of one program in one session stand for two calibration runs on one machine
    (a calibrated diff's step is fitted to its calibration run's): a change beyond the capture's calibration
    noise (half its steps' interquartile range, at least 2 %) in 36 of 46 pairs of sessions 1-4 and 16 of 18 of
    sessions 5-7; beyond that and the runs' own on one machine (both sides' between_runs_pct), 15 and 7."""
    counts = {}
    for folder, programs in separate_runs_of_one_session().items():
        for name, medians in programs:
            capture = calibrated(FIXTURES / folder / f"{name.removesuffix(' (repeats)')}.sqlite.xz").what_if
            steps = noise_pct(capture.calibrated_steps_ns)
            one_machine = float(np.hypot(capture.between_runs_pct, capture.between_runs_pct))
            part = "tuned" if folder in TUNED_ON else "held"
            for a, b in itertools.combinations(medians, 2):
                change = abs(b / a - 1) * 100
                tally = counts.setdefault(part, [0, 0, 0])
                tally[0] += change > max(NOISE_FLOOR_PCT, steps)
                tally[1] += change > max(NOISE_FLOOR_PCT, steps, one_machine)
                tally[2] += 1
    assert counts == {"tuned": [36, 15, 46], "held": [16, 7, 18]}


def test_the_headline_says_what_set_the_noise_and_how_to_narrow_it():
    assert set(NOISE_FROM) == set(NOISE_SOURCES)  # every source the diff may name has its words
    run = calibrated(FIXTURES / "fresh5/hf_tok_tqdm.sqlite.xz")  # host-bound: another run's host moves it most
    here = diff_headline(compared(run, run))
    assert "between two runs on one machine (nsync profile --calibration-runs 3 narrows it; nsync measure" in here
    there = diff_headline(compared(run, replace(run, gpu_uuids=["another-gpu"])))
    assert "between two machines" in there and "compare runs made on one machine" in there
