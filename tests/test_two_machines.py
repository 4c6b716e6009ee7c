"""Runs on two machines: the same code's step differs between two H200 machines by more than one machine's runs
do, so a diff of runs on two physical GPUs counts only a change beyond that (nsync.comparison,
BETWEEN_MACHINES_PCT). Derived from the same-code captures of fixtures/fresh-fresh4 (each session on its own
machine), scored on those of fresh5-fresh7; fixtures/h200/README.md, "Two machines"."""

from __future__ import annotations

import itertools
import lzma
import shutil
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from nsync.comparison import BETWEEN_MACHINES_PCT, diff, on_two_machines
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
    assert on_two_machines(run, elsewhere) and not on_two_machines(run, run) and not on_two_machines(run, unknown)
    here, there = diff(run, run), diff(run, elsewhere)
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
        assert on_two_machines(calibrated(a), calibrated(b))  # every session had its own machine
        unprofiled.append(abs(diff(calibrated(a), calibrated(b)).step_ms.unprofiled.delta_pct))
        profiled.append(abs(diff(uncalibrated(a), uncalibrated(b)).step_ms.delta_pct))
    assert (round(max(unprofiled), 1), round(max(profiled), 1)) == (32.8, 40.3)  # the README's figures
    assert BETWEEN_MACHINES_PCT == {"unprofiled": 33.0, "profiled": 41.0}  # rounded up


@pytest.mark.slow
@pytest.mark.parametrize("calibrate", [True, False], ids=["calibrated", "uncalibrated"])
def test_held_out_same_code_on_two_machines_reads_as_no_change(calibrate: bool):
    """27 pairs with a capture of fresh5-fresh7; with the machines' identity ignored (as before), 17 calibrated
    and 20 uncalibrated of them read as a regression or an improvement."""
    analysis = calibrated if calibrate else uncalibrated
    pairs = same_code_pairs(TUNED_ON, HELD_OUT)
    assert len(pairs) == 27
    verdicts = [diff(analysis(a), analysis(b)).verdict for a, b in pairs]
    blind = [diff(replace(analysis(a), gpu_uuids=[]), analysis(b)).verdict for a, b in pairs]
    assert set(verdicts) == {"no-change"}
    assert sum(v in ("regression", "improvement") for v in blind) == (17 if calibrate else 20)


LAB = ("w_print", "w_item", "w_mask", "w_list", "w_two", "w_param", "w_tuple")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("folder", "name"),
    [
        pytest.param(
            folder,
            name,
            marks=pytest.mark.xfail(strict=True, reason="predicted unprofiled steps 10.9 % the other way (README)")
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
    result = diff(healthy, degraded)
    assert not result.step_ms.two_machines
    assert result.verdict == "regression"


@pytest.mark.slow
def test_before_the_machines_counted_28_and_34_of_the_52_same_code_pairs_read_as_a_change():
    pairs = same_code_pairs((*TUNED_ON, *HELD_OUT))
    assert len(pairs) == 52
    for analysis, flagged in ((calibrated, 28), (uncalibrated, 34)):
        blind = [diff(replace(analysis(a), gpu_uuids=[]), analysis(b)).verdict for a, b in pairs]
        assert sum(v in ("regression", "improvement") for v in blind) == flagged
