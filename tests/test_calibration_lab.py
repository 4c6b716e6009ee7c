"""Predicted savings against the unprofiled savings measured on the H200 (fixtures/h200/README.md,
"Calibrated lab scenarios" and "Pinned to four CPUs"), with and without each capture's calibration run."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

from nsync.analysis import Analysis, run_stages
from nsync.load.calibration import beside, read_calibration
from tests.conftest import compared

H200 = Path(__file__).resolve().parents[1] / "fixtures" / "h200"
README = H200 / "README.md"
# each set of captures, and the README section with its measured table
SETS = {"cal": "## Calibrated lab scenarios", "cal-pinned": "## Pinned to four CPUs"}
CAL = "cal"  # captured and timed as the processes fell on the machine's CPUs
PINNED = "cal-pinned"  # every run and capture on CPUs 2-5 (taskset)


def measured(folder: str = CAL) -> dict[str, tuple[float, bool]]:
    """scenario -> (saving from the separate runs, ms; beyond noise), from the README's table."""
    section = README.read_text().split(SETS[folder])[1].split("###")[0]
    rows = re.findall(r"^\| (w_\w+) \|[^|]*\|[^|]*\| (-?[\d.]+) \| [\d.]+ \|[^|]*\| (yes|no) \|$", section, re.M)
    return {name: (float(saving), beyond == "yes") for name, saving, beyond in rows}


@functools.cache
def lab(name: str, calibrated: bool, folder: str = CAL) -> Analysis:
    trace = H200 / folder / f"{name}.sqlite.xz"
    return run_stages(trace, calibration=read_calibration(beside(trace)) if calibrated else None)


def predicted_ms(name: str, calibrated: bool, folder: str = CAL) -> float:
    what_if = lab(f"{name}_degraded", calibrated, folder).what_if
    assert what_if is not None
    return (what_if.unprofiled_step_ns - what_if.without_syncs_step_ns) / 1e6


def mean_error(calibrated: bool, folder: str = CAL) -> float:
    scored = {name: saving for name, (saving, beyond) in measured(folder).items() if beyond}
    return sum(abs(predicted_ms(n, calibrated, folder) - s) / s for n, s in scored.items()) / len(scored)


@pytest.mark.parametrize("folder", list(SETS))
def test_the_readme_table_has_every_scenario_and_leaves_out_the_one_lost_in_noise(folder: str):
    table = measured(folder)
    assert set(table) == {"w_print", "w_item", "w_mask", "w_tuple", "w_list", "w_two", "w_param"}
    assert [name for name, (_, beyond) in table.items() if not beyond] == ["w_tuple"]
    assert {p.name.split("_")[0] + "_" + p.name.split("_")[1] for p in (H200 / folder).glob("*.sqlite.xz")} == set(
        table
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("folder", "name"),
    [(f, p.name.removesuffix(".sqlite.xz")) for f in SETS for p in sorted((H200 / f).glob("*.sqlite.xz"))],
)
def test_a_calibrated_replay_runs_at_the_program_s_own_unprofiled_speed(folder: str, name: str):
    """The fitted host scale makes the replayed step the calibration run's median step (by construction of
    the fit, within its tolerance), unless the GPU bounds the replay: then it is the uncalibrated scale."""
    what_if = lab(name, True, folder).what_if
    assert what_if is not None and what_if.calibrated_step_ns is not None
    if "matches" in what_if.calibration_note:
        assert what_if.unprofiled_step_ns == pytest.approx(what_if.calibrated_step_ns, rel=0.01)
    else:  # GPU-bound healthy runs: the capture's GPU ran ~3 % faster than the unprofiled run
        assert what_if.unprofiled_step_ns == pytest.approx(what_if.calibrated_step_ns, rel=0.05)


@pytest.mark.slow
def test_the_error_of_the_predicted_savings_is_the_one_the_readme_states():
    # measured: 28.0 % uncalibrated, 26.9 % calibrated over the six scenarios beyond noise (README; 25.5 and 25.9 %
    # while the replay's dispatch gap kept what nsys adds to it)
    assert mean_error(calibrated=False) <= 0.30
    assert mean_error(calibrated=True) <= 0.30


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="unpinned: 28.0 % uncalibrated, 26.9 % calibrated (README)")
def test_the_calibrated_error_is_within_10_percent():
    assert mean_error(calibrated=True) <= 0.10


@pytest.mark.slow
def test_pinned_to_the_same_cpus_the_calibrated_error_is_a_third_of_the_uncalibrated():
    # measured: 10.1 % calibrated, 31.8 % uncalibrated over the scenarios beyond noise (README)
    assert mean_error(calibrated=True, folder=PINNED) <= mean_error(calibrated=False, folder=PINNED) / 2.5
    assert 0.25 <= mean_error(calibrated=False, folder=PINNED) <= 0.40  # one host scale cannot do it


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    reason="10.1 % (9.6 % with the point at the fitted scale): the point is a mean over the host speeds another run "
    "may have, which a host pinned like its calibration run varies less than (fixtures/h200/README.md, 'The point')",
)
def test_pinned_to_the_same_cpus_the_calibrated_error_is_within_10_percent():
    assert mean_error(calibrated=True, folder=PINNED) <= 0.10


@pytest.mark.slow
@pytest.mark.parametrize("calibrated", [False, True])
def test_of_two_syncs_that_wait_for_the_same_work_neither_alone_saves_and_both_do(calibrated: bool):
    """w_two measured: fixing either sync alone saved nothing (<= 0.11 ms in any measurement), both 0.66: the
    verdict names them together, worth fixing (0.95 ms calibrated, 80 % likely 0.60-1.38)."""
    a = lab("w_two_degraded", calibrated)
    assert (a.callsites["predicted_saving_ns_per_step"] / 1e6 <= 0.15).all()
    assert predicted_ms("w_two", calibrated) >= 0.5
    assert a.verdict is not None and a.verdict.all_syncs_together and a.verdict.fix_scope == "together"
    assert a.verdict.worth_fixing
    assert a.verdict.text.startswith("fixing all the syncs of the step together would save")


@pytest.mark.slow
@pytest.mark.parametrize(
    "calibrated",
    [
        True,
        pytest.param(
            False,
            marks=pytest.mark.xfail(strict=True, reason="0.00 predicted at the host scale 0.6: the host work is kept"),
        ),
    ],
)
def test_a_tuple_index_in_a_launch_bound_step_is_priced_within_30_percent(calibrated: bool):
    """w_tuple, pinned: 0.633 ms measured over five separate runs a mode. The step is bound by its launches, each
    queued kernel starting about a microsecond after the one before (the replay's dispatch gap)."""
    saving, _ = measured(PINNED)["w_tuple"]
    assert predicted_ms("w_tuple", calibrated, PINNED) == pytest.approx(saving, rel=0.30)


@pytest.mark.slow
def test_diff_of_calibrated_runs_judges_on_the_unprofiled_prediction():
    result = compared(lab("w_two_healthy", True), lab("w_two_degraded", True))
    assert result.step_ms.verdict_basis == "unprofiled (calibrated)"
    assert result.verdict == "regression"
    # the calibration runs measured 2.98 and 3.97 ms a step (within the runs' spread of the README)
    assert result.step_ms.unprofiled.baseline == pytest.approx(2.98, abs=0.05)
    assert result.step_ms.unprofiled.candidate == pytest.approx(3.97, abs=0.05)
    uncalibrated = compared(lab("w_two_healthy", False), lab("w_two_degraded", False))
    assert uncalibrated.step_ms.verdict_basis == "profiled"


@pytest.mark.slow
def test_a_diff_that_cannot_judge_still_says_its_predictions_are_calibrated():
    """Two calibrated runs of different programs: no verdict, so the profiled basis, and yet both
    predictions were fitted to their calibration runs, and the headline says so."""
    from nsync.render.text import diff_headline as headline

    result = compared(lab("w_two_healthy", True), lab("w_print_degraded", True))
    assert result.verdict == "inconclusive" and result.step_ms.verdict_basis == "profiled"
    assert result.step_ms.unprofiled.calibrated is True
    assert "calibrated)" in headline(result) and "uncalibrated" not in headline(result)
