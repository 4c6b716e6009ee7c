"""A predicted saving's likely range: its span over the host scales the run may have had
(AnalysisConfig.calibration_spread, host_scale_range), widened by AnalysisConfig.saving_ratio, tuned on the
unpinned lab set (fixtures/h200/cal), scored on measured sets it was not tuned on. The measured savings come from
the fixtures' READMEs (unprofiled runs on the H200); fixtures/h200/README.md, "How sure is a saving?", states the
scores."""

from __future__ import annotations

import functools
import statistics
from pathlib import Path

import pytest

from nsync import AnalysisConfig, analyze
from nsync.analysis import Analysis
from nsync.calibration import beside, read_calibration
from nsync.stages.replay import saving_range
from tests.test_calibration_lab import lab
from tests.test_calibration_lab import measured as lab_measured
from tests.test_fresh import timings as fresh_measured
from tests.test_real_programs import measured as real_measured

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RATIO = AnalysisConfig().saving_ratio


@functools.cache
def calibrated(trace: Path) -> Analysis:
    return analyze(trace, calibration=read_calibration(beside(trace)))


@functools.cache
def uncalibrated(trace: Path) -> Analysis:
    return analyze(trace)


def all_syncs(a: Analysis) -> tuple[float, float, float]:
    """The saving of fixing every sync of the step, ms: (predicted, the likely range's low and high ends)."""
    assert a.what_if is not None
    low, high = saving_range(*a.what_if.all_syncs_span_ns, RATIO)
    return a.what_if.all_syncs_saving_ns / 1e6, low / 1e6, high / 1e6


def held_out(calibrated_: bool = True) -> dict[str, tuple[float, tuple[float, float, float]]]:
    """Case -> (measured saving ms, all_syncs), where the effect is beyond noise: the saving of fixing every
    sync of the step, the fix each program measured."""

    def predicted(trace: Path) -> tuple[float, float, float]:
        return all_syncs(calibrated(trace) if calibrated_ else uncalibrated(trace))

    cases = {}
    for name, (saving, beyond) in lab_measured("cal-pinned").items():
        if beyond:
            cases[f"cal-pinned/{name}"] = saving, predicted(FIXTURES / f"h200/cal-pinned/{name}_degraded.sqlite.xz")
    for program in ("compiled_train", "timm_gradnorm"):
        _, saving, beyond = real_measured(program)
        assert beyond
        cases[f"real/{program}"] = saving, predicted(FIXTURES / f"real/{program}.sqlite.xz")
    cases["reads/w_reads"] = 1.697, predicted(FIXTURES / "h200/reads/w_reads_degraded.sqlite.xz")
    for pair in ("1", "2"):  # the hidden .item(): 6.280 -> 6.771 ms, five separate runs a mode
        cases[f"hidden/{pair}"] = 6.771 - 6.280, predicted(FIXTURES / f"h200/hidden/{pair}/w_hidden_degraded.sqlite.xz")
    for folder in ("fresh", "fresh2", "fresh3", "fresh4", "fresh5"):  # four more sessions, each held out from a change
        for name, (_, saving, beyond) in fresh_measured(FIXTURES / folder).items():
            if beyond:
                cases[f"{folder}/{name}"] = saving, predicted(FIXTURES / f"{folder}/{name}.sqlite.xz")
    return cases


def inside(measured_ms: float, predicted: tuple[float, float, float]) -> bool:
    return predicted[1] <= measured_ms <= predicted[2]


@pytest.mark.slow
def test_the_ratio_holds_the_set_it_was_tuned_on_with_a_tenth_to_spare():
    """measured over the least and over the largest saving of the span, over the six lab effects beyond noise,
    calibrated and not: 1.07 to 1.20, which saving_ratio widens by a tenth and rounds out to a tenth (0.9, 1.4).
    It was 1.41 (so 1.6) before a slower run's host scale was replayed where the replay cannot reach that run's
    step (the slowest host nsys leaves, 1 / 1.1, instead of the fitted one)."""
    spans = [
        (saving, lab(f"{name}_degraded", calibrated_).what_if.all_syncs_span_ns)
        for name, (saving, beyond) in lab_measured("cal").items()
        if beyond
        for calibrated_ in (True, False)
    ]
    lowest = min(saving / (least / 1e6) for saving, (least, _) in spans)
    highest = max(saving / (largest / 1e6) for saving, (_, largest) in spans)
    assert (round(lowest, 2), round(highest, 2)) == (1.07, 1.20)
    assert RATIO[0] <= lowest / 1.1 and highest * 1.1 <= RATIO[1]


# a fix that takes away a loop the replay keeps (timm_perclass, every session): fixtures/fresh2/README.md
MISSED = ["fresh/timm_perclass", "fresh2/timm_perclass", "fresh4/timm_perclass", "fresh5/timm_perclass"]


@pytest.mark.slow
def test_on_the_sets_it_was_not_tuned_on_the_range_holds_the_measured_saving_24_times_in_28_calibrated():
    """Held out: the pinned lab set (6 of 6), the real programs (2 of 2), the grouped reads (1 of 1), the hidden
    `.item()` (2 of 2), the fresh programs whose fix paid (3 of 4: timm_perclass's loop of reads), their second
    session (3 of 4), their third (3 of 3), fourth (1 of 2) and fifth (3 of 4). The second session's hf_tok_tqdm came
    inside (0.30-7.89 ms, 3.70 measured) when a calibration the profiler cannot explain stopped narrowing the
    range, a rule made after that miss was seen (19 of 22 before it); the fourth and fifth sessions, held out
    from that rule, score it: the same inside or out with the rule and without (fixtures/fresh4, fresh5)."""
    cases = held_out()
    missed = sorted(case for case, (saving, predicted) in cases.items() if not inside(saving, predicted))
    assert missed == MISSED
    assert len(cases) == 28


@pytest.mark.slow
def test_uncalibrated_the_range_holds_the_measured_saving_24_times_in_28():
    cases = held_out(calibrated_=False)
    missed = sorted(case for case, (saving, predicted) in cases.items() if not inside(saving, predicted))
    assert missed == MISSED


def median_error(calibrated_: bool) -> float:
    return statistics.median(abs(p[0] - saving) / saving for saving, p in held_out(calibrated_).values())


@pytest.mark.slow
def test_held_out_the_calibrated_point_misses_less_than_the_uncalibrated():
    """30 % and 39 % over the 28 (fixtures/h200/README.md, "How sure is a saving?")."""
    assert median_error(True) <= 0.31 and median_error(True) < median_error(False)


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="30 % over the 28 cases (12 % over the first 15): fixtures/fresh2-fresh5")
def test_held_out_the_median_error_of_the_calibrated_point_prediction_is_at_most_15_percent():
    assert median_error(True) <= 0.15


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="24 of 28 calibrated (86 %): timm_perclass's loop, in four sessions")
def test_the_range_holds_the_measured_saving_nine_times_in_ten_held_out():
    cases = held_out()
    assert sum(inside(*pair) for pair in cases.values()) >= 0.9 * len(cases)


@pytest.mark.slow
@pytest.mark.parametrize(
    "trace",
    ["real/resnet_train", "real/hf_trainer", "real/timm_gradnorm_healthy"],  # fixtures/fresh: tests/test_fresh.py
)
def test_where_the_fix_measured_nothing_the_verdict_is_never_worth_fixing(trace: str):
    assert not calibrated(FIXTURES / f"{trace}.sqlite.xz").verdict.worth_fixing


@pytest.mark.slow
@pytest.mark.parametrize(
    "trace",
    ["real/compiled_train", "real/timm_gradnorm", "h200/reads/w_reads_degraded"]
    + [f"h200/hidden/{pair}/w_hidden_degraded" for pair in ("1", "2")],
)
def test_where_the_fix_measurably_paid_over_5_percent_the_verdict_is_never_nothing(trace: str):
    verdict = calibrated(FIXTURES / f"{trace}.sqlite.xz").verdict
    assert verdict.worth_fixing or verdict.measure
