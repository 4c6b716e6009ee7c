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
from tests.test_fresh import logged_runs
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


# the programs whose fix does a loop's work for all its items at once (by construction: their 'healthy' mode):
# their fix is priced by the loop's saving, the others' by the saving of fixing every sync of the step
VECTORISED = {"timm_perclass", "hf_gpt2_perseq", "w_param", "tv_seg_iou", "timm_conf_log", "hf_bert_tokacc",
              "pyg_pergraph", "timm_gradnorm_foreach"}  # fmt: skip


def loop_or_all_syncs(a: Analysis) -> tuple[float, float, float]:
    """The saving of doing the step's one loop of reads at once, ms (predicted, low, high), else all_syncs."""
    assert a.what_if is not None
    if len(a.what_if.loops) != 1:
        return all_syncs(a)
    (loop,) = a.what_if.loops
    low, high = saving_range(max(loop.span_ns[0], 0.0), max(loop.span_ns[1], 0.0), RATIO)
    return loop.saving_ns / 1e6, low / 1e6, high / 1e6


def held_out(calibrated_: bool = True) -> dict[str, tuple[float, tuple[float, float, float]]]:
    """Case -> (measured saving ms, predicted), where the effect is beyond noise: the saving of the fix each
    program measured (a loop's done at once, or every sync of the step fixed)."""

    def predicted(trace: Path) -> tuple[float, float, float]:
        a = calibrated(trace) if calibrated_ else uncalibrated(trace)
        name = trace.name.removesuffix(".sqlite.xz").removesuffix("_degraded")
        return loop_or_all_syncs(a) if name in VECTORISED else all_syncs(a)

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
    for folder in FRESH_SESSIONS:  # each held out from a change
        for name, (_, saving, beyond) in fresh_measured(FIXTURES / folder).items():
            if beyond:
                cases[f"{folder}/{name}"] = saving, predicted(FIXTURES / f"{folder}/{name}.sqlite.xz")
    # timm_gradnorm's capture, its loop done at once (torch._foreach_norm), timed in fresh6's session
    gradnorm = FIXTURES / "real/timm_gradnorm.sqlite.xz"
    done_at_once = loop_or_all_syncs(calibrated(gradnorm) if calibrated_ else uncalibrated(gradnorm))
    runs = logged_runs(FIXTURES / "fresh6/ab-real-timings.log")["timm_gradnorm_foreach"]
    saving = statistics.median(a - b for run in runs for a, b in zip(run["degraded_ms"], run["healthy_ms"]))
    cases["real/timm_gradnorm (foreach)"] = saving, done_at_once  # 3.237: fixtures/fresh6/README.md
    return cases


FRESH_SESSIONS = ("fresh", "fresh2", "fresh3", "fresh4", "fresh5", "fresh6", "fresh7")


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


@pytest.mark.slow
def test_on_the_sets_it_was_not_tuned_on_the_range_holds_the_measured_saving_35_times_in_35_calibrated():
    """The pinned lab set (6), the real programs (2, and timm_gradnorm's loop done at once), the grouped reads (1),
    the hidden `.item()` (2), and the fix of each fresh program that paid beyond noise in its session (fresh: 4,
    fresh2: 4, fresh3: 3, fresh4: 2, fresh5: 4, fresh6: 4, fresh7: 2). Held out from every rule but two: the second
    session's hf_tok_tqdm came inside when a calibration the profiler cannot explain stopped narrowing the range,
    a rule made after that miss was seen (fresh4 and fresh5 scored it); and a loop's saving (halfway between its
    reads released and the whole loop gone) was chosen on the fourteen fixes that do a loop at once (timm_perclass
    outside in four sessions before it), so fresh7's two are the ones held out from it (fixtures/fresh6, fresh7)."""
    cases = held_out()
    assert len(cases) == 35
    assert [case for case, (saving, predicted) in cases.items() if not inside(saving, predicted)] == []


@pytest.mark.slow
def test_uncalibrated_the_range_holds_the_measured_saving_35_times_in_35():
    cases = held_out(calibrated_=False)
    assert [case for case, (saving, predicted) in cases.items() if not inside(saving, predicted)] == []


@pytest.mark.slow
def test_the_range_holds_the_measured_saving_nine_times_in_ten():
    cases = held_out()
    assert sum(inside(*pair) for pair in cases.values()) >= 0.9 * len(cases)


def median_error(calibrated_: bool) -> float:
    return statistics.median(abs(p[0] - saving) / saving for saving, p in held_out(calibrated_).values())


@pytest.mark.slow
def test_held_out_the_calibrated_point_misses_less_than_the_uncalibrated():
    """25 % and 32 % over the 35 (fixtures/h200/README.md, "How sure is a saving?")."""
    assert median_error(True) <= 0.25 and median_error(True) < median_error(False)


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="25 % over the 35 cases: fixtures/h200/README.md, 'How sure is a saving?'")
def test_held_out_the_median_error_of_the_calibrated_point_prediction_is_at_most_15_percent():
    assert median_error(True) <= 0.15


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
