"""How sure a saving is: the 80 % likely range and the verdict, fitted on the tuning part of the ground truth and
scored on the held-out part (tests/ground_truth.py; scripts/fit_ranges.py prints the same figures;
docs/accuracy.md, "How sure is a saving?", states them). The measured savings come from the fixtures' READMEs
(unprofiled runs on the H200)."""

from __future__ import annotations

import functools
import re
import statistics

import pytest

from nsync.knowledge import LOG_RATIO_QUANTILES, NOTHING_CHANCE, WORTH_FIXING_CHANCE
from nsync.stages.replay.likely import COVERAGE
from nsync.stages.report import StageOutputs
from tests.conftest import FIXTURES
from tests.ground_truth import Scored, analysed, cases, fitted_cut_offs, fitted_quantiles, score_case, wrong
from tests.test_fresh import SESSIONS, logged_runs
from tests.test_fresh import timings as fresh_measured

# the noise of the measured savings, studied on the sessions before issue 46's held-out one (fixtures/h200/
# README.md, "The measured savings' own noise"); fresh11 is scored in its own README
FRESH_SESSIONS = tuple(folder.name for folder in SESSIONS if folder.name != "fresh11")


def calibrated(trace) -> StageOutputs:
    return analysed(trace, True)


def uncalibrated(trace) -> StageOutputs:
    return analysed(trace, False)


@functools.cache
def scored() -> tuple[Scored, ...]:
    return tuple(s for case in cases() for s in score_case(case))


def part(held_out: bool, calibrated_: bool) -> list[Scored]:
    return [s for s in scored() if s.held_out == held_out and s.calibrated == calibrated_]


def paid(scores: list[Scored]) -> list[Scored]:
    """The fixes that paid beyond noise (a range is scored on them)."""
    return [s for s in scores if s.beyond_noise and s.point_ms > 0]


def coverage(scores: list[Scored]) -> float:
    return statistics.mean(s.low_ms <= s.measured_ms <= s.high_ms for s in paid(scores))


def median_width(scores: list[Scored]) -> float:
    return statistics.median(s.high_ms / s.low_ms for s in paid(scores))


def median_error(scores: list[Scored]) -> float:
    return statistics.median(abs(s.point_ms / s.measured_ms - 1) for s in paid(scores))


@pytest.mark.slow
def test_the_range_and_the_cut_offs_are_what_the_tuning_part_gives():
    tuning = [s for s in scored() if not s.held_out]
    assert fitted_quantiles(tuning) == LOG_RATIO_QUANTILES
    assert (WORTH_FIXING_CHANCE, NOTHING_CHANCE) in fitted_cut_offs(tuning)


@pytest.mark.slow
@pytest.mark.parametrize("calibrated_", [True, False], ids=["calibrated", "uncalibrated"])
def test_held_out_the_80_percent_range_holds_within_10_points_of_80_percent(calibrated_: bool):
    """71 % calibrated and uncalibrated (20 of 28 each), on the sessions after fresh5 and timm_gradnorm's loop done
    at once; on the tuning part 85 and 88 %."""
    held = coverage(part(held_out=True, calibrated_=calibrated_))
    assert abs(held - COVERAGE) <= 0.10


@pytest.mark.slow
def test_calibrated_the_range_is_at_most_2_5_times_wide_a_median_over_the_fixes_that_paid():
    """1.98 held out and tuned on alike (it is the point times fixed ratios, wider where the calibration was set
    aside): the ranges before spanned a median of 5.3 times."""
    for held_out in (True, False):
        assert median_width(part(held_out, calibrated_=True)) <= 2.5


@pytest.mark.slow
def test_held_out_the_calibrated_point_misses_no_more_than_one_run_misses_the_others():
    """16 % held out (19 % on the tuning part) against 18 %, the median error of one unprofiled run's saving
    against the other runs' (test_one_unprofiled_run_misses_the_others_saving_by_18_percent_a_median)."""
    runs = [e for errors in one_run_against_the_others().values() for e in errors]
    assert median_error(part(held_out=True, calibrated_=True)) <= statistics.median(runs)


@pytest.mark.slow
@pytest.mark.parametrize("held_out", [False, True], ids=["tuning", "held-out"])
def test_no_calibrated_verdict_is_wrong_on_any_measured_fix(held_out: bool):
    """No "measure it" where the fix saved twice the threshold or nothing beyond noise, no "nothing" where it paid
    beyond noise, no "worth fixing" where the program's fix never paid (tests/ground_truth.py, wrong)."""
    assert [(s.case, wrong(s, s.verdict)) for s in part(held_out, True) if wrong(s, s.verdict)] == []


@pytest.mark.slow
def test_uncalibrated_one_verdict_is_wrong_resnet_train_s_measure():
    """resnet_train's syncs measured 0.13 ms (0.6 %, not beyond noise); uncalibrated nsync says 1.0 ms (4.2 %,
    chance 0.3): "measure it". Calibrated it says nothing."""
    bad = [(s.case, wrong(s, s.verdict)) for s in scored() if not s.calibrated and wrong(s, s.verdict)]
    assert bad == [("real/resnet_train", "measure, nothing beyond noise")]


@pytest.mark.slow
def test_every_lab_capture_whose_fix_paid_says_worth_fixing_and_the_healthy_vit_nothing():
    lab = [s for s in scored() if s.case.startswith(("cal/", "cal-pinned/")) and s.calibrated and s.beyond_noise]
    assert len(lab) == 12 and {s.verdict for s in lab} == {"worth fixing"}
    healthy = calibrated(FIXTURES / "real/timm_gradnorm_healthy.sqlite.xz").verdict
    assert healthy is not None and not healthy.worth_fixing and not healthy.measure


def one_run_against_the_others() -> dict[str, list[float]]:
    """The measured savings' own noise: for each fresh program whose fix paid beyond noise in a session of two runs
    or more, each run's saving (the median of its block pairs) against the other runs' pooled, as |one - others| /
    others. A calibration run is one unprofiled run: a prediction exact for it misses the other runs this much.
    ``session/program`` -> one error a run."""
    errors: dict[str, list[float]] = {}
    for folder in FRESH_SESSIONS:
        runs = logged_runs(FIXTURES / folder / "ab-timings.log")
        for name, (_, _, beyond) in fresh_measured(FIXTURES / folder).items():
            if not beyond or len(runs[name]) < 2:
                continue
            savings = [[a - b for a, b in zip(run["degraded_ms"], run["healthy_ms"])] for run in runs[name]]
            for i, own in enumerate(savings):
                others = statistics.median(v for j, run in enumerate(savings) if j != i for v in run)
                errors.setdefault(f"{folder}/{name}", []).append(abs(statistics.median(own) - others) / others)
    return errors


def test_one_unprofiled_run_misses_the_others_saving_by_18_percent_a_median():
    """fixtures/h200/README.md, "The measured savings' own noise": 94 runs of 45 fixes, median 18 %, mean 36 %;
    by program, hf_tok_tqdm and hf_gpt2_perseq the noisiest (44 % and 34 %), timm_perclass the least (12 %)."""
    errors = one_run_against_the_others()
    pooled = [e for case in errors.values() for e in case]
    assert (len(errors), len(pooled)) == (45, 94)
    assert round(100 * statistics.median(pooled)) == 18 and round(100 * statistics.mean(pooled)) == 36
    by_program: dict[str, list[float]] = {}
    for case, case_errors in errors.items():
        by_program.setdefault(case.split("/")[1], []).extend(case_errors)
    median_by_program = {name: round(100 * statistics.median(e)) for name, e in by_program.items() if len(e) >= 8}
    assert median_by_program == {
        "hf_tok_tqdm": 44,
        "hf_gpt2_perseq": 34,
        "hf_bert_tokacc": 27,
        "pyg_pergraph": 23,
        "tv_seg_iou": 15,
        "pyg_collate": 13,
        "timm_perclass": 12,
    }


NOISE_ROW = re.compile(r"^\| (\w+) \| (\d+) % \| (\d+) % \(([^)]*)\) \| (\d+) % \(([^)]*)\) \|$", re.M)


def signed_errors_by_program(calibrated_: bool) -> dict[str, list[float]]:
    """The fresh cases' signed errors of the point, %, by program, in session order."""
    signed: dict[str, list[float]] = {}
    for s in paid([s for s in scored() if s.calibrated == calibrated_]):
        folder, _, name = s.case.partition("/")
        if folder in FRESH_SESSIONS:
            signed.setdefault(name, []).append(100 * (s.point_ms / s.measured_ms - 1))
    return signed


@pytest.mark.slow
def test_the_noise_table_is_what_the_logs_and_the_analyses_give():
    """The README's table by program: one run against the others, and the point's signed errors each session."""
    rows = NOISE_ROW.findall((FIXTURES / "h200/README.md").read_text())
    assert [row[0] for row in rows] == ["hf_tok_tqdm", "hf_gpt2_perseq", "pyg_collate", "timm_perclass"]
    noise: dict[str, list[float]] = {}
    for case, errors in one_run_against_the_others().items():
        noise.setdefault(case.split("/")[1], []).extend(errors)
    calibrated_, uncalibrated_ = signed_errors_by_program(True), signed_errors_by_program(False)
    for name, floor, cal_median, cal_signed, uncal_median, uncal_signed in rows:
        assert int(floor) == round(100 * statistics.median(noise[name]))
        for median, signed, logged in (
            (cal_median, cal_signed, calibrated_),
            (uncal_median, uncal_signed, uncalibrated_),
        ):
            assert [int(e) for e in signed.split(", ")] == [round(e) for e in logged[name]]
            assert int(median) == round(statistics.median(abs(e) for e in logged[name]))
    for signed_errors, median in ((calibrated_, 18), (uncalibrated_, 16)):  # over the 44 fresh fixes
        pooled = [abs(e) for errors in signed_errors.values() for e in errors]
        assert (len(pooled), round(statistics.median(pooled))) == (44, median)


@pytest.mark.slow
def test_the_calibrated_point_misses_the_noisiest_programs_most_but_beyond_their_noise_on_gpt2():
    """By program (four sessions or more), the calibrated point's median error is largest where the runs disagree
    most (hf_gpt2_perseq, hf_tok_tqdm), and on hf_gpt2_perseq it is one-sided (over by more than 20 % in five
    sessions of eight), which noise alone would not make."""
    signed = signed_errors_by_program(True)
    error = {name: statistics.median(abs(e) for e in errors) for name, errors in signed.items() if len(errors) >= 4}
    assert set(error) == {
        "hf_gpt2_perseq", "hf_tok_tqdm", "pyg_collate", "timm_perclass", "hf_bert_tokacc", "pyg_pergraph"
    }  # fmt: skip
    assert set(sorted(error, key=error.__getitem__)[-2:]) == {"hf_tok_tqdm", "hf_gpt2_perseq"}
    assert len(signed["hf_gpt2_perseq"]) == 8 and sum(e > 20 for e in signed["hf_gpt2_perseq"]) == 5
