"""A predicted saving's likely range (AnalysisConfig.saving_ratio): tuned on the unpinned lab set
(fixtures/h200/cal), scored on measured sets it was not tuned on. The measured savings come from the fixtures'
READMEs (unprofiled runs on the H200); fixtures/h200/README.md, "How sure is a saving?", states the scores."""

from __future__ import annotations

import functools
import math
import statistics
from pathlib import Path

import pytest

from nsync import AnalysisConfig, analyze
from nsync.analysis import Analysis
from nsync.calibration import beside, read_calibration
from tests.test_calibration_lab import measured as lab_measured
from tests.test_calibration_lab import predicted_ms
from tests.test_real_programs import measured as real_measured

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RATIO = AnalysisConfig().saving_ratio


@functools.cache
def calibrated(trace: Path) -> Analysis:
    return analyze(trace, calibration=read_calibration(beside(trace)))


def all_syncs_ms(a: Analysis) -> float:
    assert a.what_if is not None
    return (a.what_if.unprofiled_step_ns - a.what_if.without_syncs_step_ns) / 1e6


def held_out() -> dict[str, tuple[float, float]]:
    """Case -> (measured saving ms, predicted saving ms), calibrated, where the effect is beyond noise: the
    saving of fixing every sync of the step, the fix each program measured."""
    cases = {}
    for name, (saving, beyond) in lab_measured("cal-pinned").items():
        if beyond:
            trace = FIXTURES / f"h200/cal-pinned/{name}_degraded.sqlite.xz"
            cases[f"cal-pinned/{name}"] = saving, all_syncs_ms(calibrated(trace))
    for program in ("compiled_train", "timm_gradnorm"):
        _, saving, beyond = real_measured(program)
        assert beyond
        cases[f"real/{program}"] = saving, all_syncs_ms(calibrated(FIXTURES / f"real/{program}.sqlite.xz"))
    cases["reads/w_reads"] = 1.697, all_syncs_ms(calibrated(FIXTURES / "h200/reads/w_reads_degraded.sqlite.xz"))
    for pair in ("1", "2"):  # the hidden .item(): 6.280 -> 6.771 ms, five separate runs a mode
        trace = FIXTURES / f"h200/hidden/{pair}/w_hidden_degraded.sqlite.xz"
        cases[f"hidden/{pair}"] = 6.771 - 6.280, all_syncs_ms(calibrated(trace))
    return cases


def inside(measured_ms: float, predicted: float) -> bool:
    return predicted * RATIO[0] <= measured_ms <= predicted * RATIO[1]


@pytest.mark.slow
def test_the_range_holds_the_90_percent_spread_of_the_set_it_was_tuned_on():
    """measured / predicted over the six lab effects beyond noise, calibrated and not: a log-normal 90 % range."""
    logs = [
        math.log(saving / predicted_ms(name, calibrated_))
        for name, (saving, beyond) in lab_measured("cal").items()
        if beyond
        for calibrated_ in (True, False)
    ]
    mean, spread = statistics.mean(logs), statistics.stdev(logs)
    low, high = math.exp(mean - 1.645 * spread), math.exp(mean + 1.645 * spread)
    assert (round(low, 2), round(high, 2)) == (0.53, 1.67)
    assert RATIO[0] <= low and high <= RATIO[1]


@pytest.mark.slow
def test_on_the_sets_it_was_not_tuned_on_the_range_holds_the_measured_saving_8_times_in_11():
    """Held out: the pinned lab set (6 of 6), the real programs (timm_gradnorm; compiled_train's 0.81 ms lies
    just under 0.83, half its prediction), the grouped reads (1 of 1), the hidden `.item()` (0 of 2: the replay
    keeps the host's own work, which that fix removes)."""
    cases = held_out()
    missed = sorted(case for case, (saving, predicted) in cases.items() if not inside(saving, predicted))
    assert missed == ["hidden/1", "hidden/2", "real/compiled_train"]
    assert len(cases) == 11


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="8 of 11 held out (73 %): the hidden .item() twice, compiled_train once")
def test_the_range_holds_the_measured_saving_nine_times_in_ten_held_out():
    cases = held_out()
    assert sum(inside(*pair) for pair in cases.values()) >= 0.9 * len(cases)


@pytest.mark.slow
@pytest.mark.parametrize(
    "trace",
    [
        "fresh/hf_bert_hooks",
        "fresh/timm_convnext",
        "real/resnet_train",
        "real/hf_trainer",
        "real/timm_gradnorm_healthy",
    ],
)
def test_where_the_fix_measured_nothing_the_verdict_is_never_worth_fixing(trace: str):
    assert not calibrated(FIXTURES / f"{trace}.sqlite.xz").verdict.worth_fixing


@pytest.mark.slow
@pytest.mark.parametrize(
    "trace",
    ["real/compiled_train", "real/timm_gradnorm", "h200/reads/w_reads_degraded"]
    + [
        pytest.param(
            f"h200/hidden/{pair}/w_hidden_degraded",
            marks=pytest.mark.xfail(strict=True, reason="0.49 ms (7.8 %) measured, 0.02 predicted: host work kept"),
        )
        for pair in ("1", "2")
    ],
)
def test_where_the_fix_measurably_paid_over_5_percent_the_verdict_is_never_nothing(trace: str):
    verdict = calibrated(FIXTURES / f"{trace}.sqlite.xz").verdict
    assert verdict.worth_fixing or verdict.measure
