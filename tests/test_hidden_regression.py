"""A regression the profiler hides (fixtures/h200/README.md, "A regression the profiler hides"): w_hidden's
`.item()` costs 0.491 ms a step unprofiled (6.280 -> 6.771 ms, +7.8 %, five separate runs a mode, no run of
one mode in the range of the other). Two capture pairs with their calibration runs."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from nsync.analysis import Analysis, run_stages
from nsync.errors import CannotJudge
from nsync.gates import fail_on_regression
from nsync.load.calibration import beside, read_calibration
from nsync.render.text import diff_headline as headline
from tests.conftest import compared
from tests.test_cli import run

HIDDEN = Path(__file__).resolve().parents[1] / "fixtures" / "h200" / "hidden"
MEASURED_PCT = 100 * (6.771 - 6.280) / 6.280  # the separate runs' medians


@functools.cache
def capture(pair: str, mode: str) -> Analysis:
    trace = HIDDEN / pair / f"w_hidden_{mode}.sqlite.xz"
    return run_stages(trace, calibration=read_calibration(beside(trace)))


@pytest.mark.slow
def test_the_profiled_steps_alone_see_no_regression_and_the_calibrated_diff_finds_it():
    result = compared(capture("2", "healthy"), capture("2", "degraded"))
    step = result.step_ms
    assert abs(float(step.delta_pct)) <= float(step.noise_pct)  # the profiler hid it: +1.9 %, noise 2 %
    assert result.verdict == "regression" and step.verdict_basis == "unprofiled (calibrated)"
    assert float(step.unprofiled.delta_pct) == pytest.approx(MEASURED_PCT, abs=2.0)  # 7.2 against 7.8
    assert step.profiled_verdict == "no-change"
    assert headline(result).endswith("the verdict's basis); under the profiler alone: no-change")


@pytest.mark.slow
def test_a_capture_on_a_slow_moment_turns_the_regression_into_an_improvement_and_the_diff_is_not_fooled():
    """Pair 1's healthy capture ran while the host was slow: its profiled step is 31 % longer than the
    degraded one's, beyond the noise within either capture; the calibration runs still rank them right."""
    result = compared(capture("1", "healthy"), capture("1", "degraded"))
    step = result.step_ms
    assert float(step.delta_pct) < -float(step.noise_pct)
    assert result.verdict == "regression" and step.verdict_basis == "unprofiled (calibrated)"
    assert float(step.unprofiled.delta_pct) > float(step.unprofiled.noise_pct)
    assert step.profiled_verdict == "improvement"


@pytest.mark.slow
def test_the_ci_gate_fails_on_the_hidden_regression():
    healthy, degraded = (HIDDEN / "2" / f"w_hidden_{mode}.sqlite.xz" for mode in ("healthy", "degraded"))
    gated = run("diff", healthy, degraded, "--fail-on-regression", "5")
    assert gated.returncode == 3, gated.stderr
    assert "verdict: regression" in gated.stdout and "the verdict's basis" in gated.stdout
    assert run("diff", healthy, degraded, "--fail-on-regression", "10").returncode == 0
    uncalibrated = run("diff", healthy, degraded, "--no-calibrate", "--fail-on-regression", "5")
    assert uncalibrated.returncode == 1 and "verdict: unclear" in uncalibrated.stdout
    assert "cannot judge these runs" in uncalibrated.stderr and "--pass-inconclusive" in uncalibrated.stderr
    passed = run("diff", healthy, degraded, "--no-calibrate", "--fail-on-regression", "5", "--pass-inconclusive")
    assert passed.returncode == 0


SET_ASIDE = pytest.mark.xfail(
    strict=True,
    reason="pair 1's calibration run (7.28 ms a step, the timed runs 6.77) fits a host slower than nsys leaves: it "
    "is set aside, and uncalibrated the saving is 0.32 ms (-35 %; 0.38 with the capped fit, which the tuning part "
    "of the ground truth found worse on six cases of eight: docs/accuracy.md)",
)


@pytest.mark.parametrize("pair", [pytest.param("1", marks=SET_ASIDE), "2"])
def test_the_what_if_prices_the_hidden_item_within_30_percent(pair: str):
    """Calibrated: the replay's dispatch gap between queued kernels makes the capture GPU-bound where it is. Pair 2
    was predicted at 0.32 ms (-37 %) while the gap kept what nsys adds to it (fixtures/h200/profiler-cost)."""
    what_if = capture(pair, "degraded").what_if
    assert what_if is not None
    saving_ms = (what_if.unprofiled_step_ns - what_if.without_syncs_step_ns) / 1e6
    assert saving_ms == pytest.approx(6.771 - 6.280, rel=0.30)


@pytest.mark.slow
def test_an_uncalibrated_diff_that_sees_no_change_says_it_cannot_rule_out_the_hidden_regression():
    """The same pair without its calibration runs: the profiled steps alone cannot tell the +7.8 % apart (+1.9 %
    under the profiler, within the noise), but the what-if predicts the unprofiled step 6.0 % longer: the verdict
    is unclear, and the gate cannot pass it."""
    healthy, degraded = (
        run_stages(HIDDEN / "2" / f"w_hidden_{mode}.sqlite.xz", calibration=None) for mode in ("healthy", "degraded")
    )
    result = compared(healthy, degraded)
    assert result.verdict == "unclear" and result.step_ms.verdict_basis == "profiled"
    assert result.step_ms.profiled_verdict == "no-change"
    assert result.reasons[0].startswith("without the profiler the step is predicted +6.0 % (uncalibrated), beyond")
    with pytest.raises(CannotJudge):
        fail_on_regression(result, 5)


PREPARATION_US = 440  # w_hidden's batch preparation unprofiled (fixtures/h200/README.md)


@pytest.mark.slow
def test_pair_2_s_preparation_ran_at_its_unprofiled_speed_under_nsys_and_the_host_scale_keeps_it_so():
    """Why pair 2's saving was under (fixtures/h200/README.md): the host's gap from each `.item()`'s stream sync to
    the next launch (the batch's preparation in Python) took 1.0-1.25 times its unprofiled 0.44 ms in the
    capture, and the host scale fitted to the whole step (0.67) took it to under 0.8 times: the replay's queued
    kernels ran at the profiled GPU's pace, and the fit took the difference out of the host. With the gap less
    what nsys adds (PROFILER_GAP_NS), the scale is 0.81 (fitted to the calibration's mean step) and the
    preparation within a tenth of its own speed."""
    import sqlite3
    from contextlib import closing

    from nsync.load import sqlite_file

    with (
        sqlite_file(HIDDEN / "2" / "w_hidden_degraded.sqlite.xz", print) as trace,
        closing(sqlite3.connect(trace)) as db,
    ):
        gaps_us = [
            gap / 1000
            for (gap,) in db.execute(
                "WITH calls AS (SELECT r.start, r.end, s.value AS name, r.globalTid AS tid,"
                " lead(r.start) OVER (PARTITION BY r.globalTid ORDER BY r.start) AS next_start,"
                " lead(s.value) OVER (PARTITION BY r.globalTid ORDER BY r.start) AS next_name"
                " FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId)"
                " SELECT next_start - end FROM calls WHERE name = 'cudaStreamSynchronize_v3020'"
                " AND next_name LIKE 'cudaLaunchKernel%' AND next_start - end > 200000"
            )
        ]
    mean_us = sum(gaps_us) / len(gaps_us)
    assert len(gaps_us) >= 60 and PREPARATION_US <= mean_us <= 1.25 * PREPARATION_US
    host_scale = capture("2", "degraded").what_if.host_scale
    assert host_scale == pytest.approx(0.81, abs=0.01)
    assert 0.9 * PREPARATION_US <= mean_us * host_scale <= 1.1 * PREPARATION_US
