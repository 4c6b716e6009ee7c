"""A predicted saving's likely range: its span over the host scales the run may have had
(AnalysisConfig.calibration_spread, host_scale_range), widened by AnalysisConfig.saving_ratio, tuned on the
unpinned lab set (fixtures/h200/cal), scored on measured sets it was not tuned on. The measured savings come from
the fixtures' READMEs (unprofiled runs on the H200); fixtures/h200/README.md, "How sure is a saving?", states the
scores."""

from __future__ import annotations

import functools
import re
import statistics
from pathlib import Path

import pytest

from nsync import AnalysisConfig
from nsync.analysis import Analysis, run_stages
from nsync.calibration import beside, read_calibration
from tests.test_calibration_lab import measured as lab_measured
from tests.test_fresh import NOT_KEPT, SESSIONS, logged_runs
from tests.test_fresh import timings as fresh_measured
from tests.test_real_programs import measured as real_measured

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RATIO = AnalysisConfig().saving_ratio


@functools.cache
def calibrated(trace: Path) -> Analysis:
    return run_stages(trace, calibration=read_calibration(beside(trace)))


@functools.cache
def uncalibrated(trace: Path) -> Analysis:
    return run_stages(trace, calibration=None)


def span(trace: Path, calibrated_: bool) -> tuple[float, float]:
    """The least and the largest saving of fixing every sync over the host scales replayed, ns: the likely range
    at a ratio of 1."""
    calibration = read_calibration(beside(trace)) if calibrated_ else None
    a = run_stages(trace, AnalysisConfig(saving_ratio=(1.0, 1.0)), calibration=calibration)
    assert a.what_if is not None
    return a.what_if.all_syncs_range_ns


def all_syncs(a: Analysis) -> tuple[float, float, float]:
    """The saving of fixing every sync of the step, ms: (predicted, the likely range's low and high ends)."""
    assert a.what_if is not None
    low, high = a.what_if.all_syncs_range_ns
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
    low, high = loop.range_ns
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
            if beyond and (trace := FIXTURES / f"{folder}/{name}.sqlite.xz") not in NOT_KEPT:
                cases[f"{folder}/{name}"] = saving, predicted(trace)
    # timm_gradnorm's capture, its loop done at once (torch._foreach_norm), timed in fresh6's session
    gradnorm = FIXTURES / "real/timm_gradnorm.sqlite.xz"
    done_at_once = loop_or_all_syncs(calibrated(gradnorm) if calibrated_ else uncalibrated(gradnorm))
    runs = logged_runs(FIXTURES / "fresh6/ab-real-timings.log")["timm_gradnorm_foreach"]
    saving = statistics.median(a - b for run in runs for a, b in zip(run["degraded_ms"], run["healthy_ms"]))
    cases["real/timm_gradnorm (foreach)"] = saving, done_at_once  # 3.237: fixtures/fresh6/README.md
    return cases


FRESH_SESSIONS = tuple(folder.name for folder in SESSIONS)


def inside(measured_ms: float, predicted: tuple[float, float, float]) -> bool:
    return predicted[1] <= measured_ms <= predicted[2]


@pytest.mark.slow
def test_the_ratio_holds_the_set_it_was_tuned_on_with_a_tenth_to_spare():
    """measured over the least and over the largest saving of the span, over the six lab effects beyond noise,
    calibrated and not: 1.04 to 1.24, which saving_ratio, widened by a tenth, still holds (0.9, 1.4; 1.07 to 1.20
    when it was set, before the replay's dispatch gap lost what nsys adds to it). It was 1.41 (so 1.6) before a
    slower run's host scale was replayed where the replay cannot reach that run's step (the slowest host nsys
    leaves, 1 / 1.1, instead of the fitted one)."""
    spans = [
        (saving, span(FIXTURES / f"h200/cal/{name}_degraded.sqlite.xz", calibrated_))
        for name, (saving, beyond) in lab_measured("cal").items()
        if beyond
        for calibrated_ in (True, False)
    ]
    lowest = min(saving / (least / 1e6) for saving, (least, _) in spans)
    highest = max(saving / (largest / 1e6) for saving, (_, largest) in spans)
    assert (round(lowest, 2), round(highest, 2)) == (1.04, 1.24)
    assert RATIO[0] <= lowest / 1.1 and highest * 1.1 <= RATIO[1]


@pytest.mark.slow
def test_on_the_sets_it_was_not_tuned_on_the_range_holds_the_measured_saving_56_times_in_56_calibrated():
    """The pinned lab set (6), the real programs (2, and timm_gradnorm's loop done at once), the grouped reads (1),
    the hidden `.item()` (2), and the fix of each fresh program that paid beyond noise in its session (fresh: 4,
    fresh2: 4, fresh3: 3, fresh4: 2, fresh5: 4, fresh6: 4, fresh7: 2, fresh8: 6 of its 8 kept, fresh9: 7, fresh10: 8).
    Held out from every rule but two (fresh8 from all of them and from the point's mean over the host scales; fresh9
    from all of them and from LOOP_GONE_SHARE; fresh10 from all of them and from PROFILER_GAP_NS): the second
    session's hf_tok_tqdm came inside when a calibration the profiler cannot explain stopped narrowing the range,
    a rule made after that miss was seen (fresh4 and fresh5 scored it); and a loop's saving (between its reads
    released and the whole loop gone) was chosen on the fixes that do a loop at once (timm_perclass outside in four
    sessions before it), so fresh7's two are the ones held out from it (fixtures/fresh6, fresh7), and how far
    between (LOOP_GONE_SHARE) on the sessions before fresh8 (fresh9 held out from it)."""
    cases = held_out()
    assert len(cases) == 56
    assert [case for case, (saving, predicted) in cases.items() if not inside(saving, predicted)] == []


@pytest.mark.slow
def test_uncalibrated_the_range_holds_the_measured_saving_55_times_in_56():
    """Outside: fresh9's hf_tok_tqdm, 4.46 ms (1.83-7.50) where its session measured 1.65 (2.05-3.70 in five
    others): its step 35.3 ms unprofiled there, 27.8-30.1 in the others (fixtures/fresh9/README.md)."""
    cases = held_out(calibrated_=False)
    outside = [case for case, (saving, predicted) in cases.items() if not inside(saving, predicted)]
    assert outside == ["fresh9/hf_tok_tqdm"]


@pytest.mark.slow
def test_the_range_holds_the_measured_saving_nine_times_in_ten():
    cases = held_out()
    assert sum(inside(*pair) for pair in cases.values()) >= 0.9 * len(cases)


def median_error(calibrated_: bool) -> float:
    return statistics.median(abs(p[0] - saving) / saving for saving, p in held_out(calibrated_).values())


@pytest.mark.slow
def test_held_out_the_calibrated_point_misses_less_than_the_uncalibrated():
    """17 % and 24 % over the 56 (fixtures/h200/README.md, "How sure is a saving?")."""
    assert median_error(True) <= 0.20 and median_error(True) < median_error(False)


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="17 % over the 56 cases: fixtures/h200/README.md, 'How sure is a saving?'")
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
    for case, (saving, predicted) in held_out(calibrated_).items():
        folder, _, name = case.partition("/")
        if folder in FRESH_SESSIONS:
            signed.setdefault(name, []).append(100 * (predicted[0] / saving - 1))
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
    for signed_errors, median in ((calibrated_, 19), (uncalibrated_, 21)):  # over the 44 fresh fixes
        pooled = [abs(e) for errors in signed_errors.values() for e in errors]
        assert (len(pooled), round(statistics.median(pooled))) == (44, median)


@pytest.mark.slow
def test_the_calibrated_point_misses_the_noisiest_programs_most_but_beyond_their_noise_on_gpt2():
    """By program (four sessions or more), the calibrated point's median error is largest where the runs disagree
    most (hf_gpt2_perseq, hf_tok_tqdm), and on hf_gpt2_perseq it is one-sided (over by more than 20 % in six
    sessions of eight), which noise alone would not make."""
    signed = signed_errors_by_program(True)
    error = {name: statistics.median(abs(e) for e in errors) for name, errors in signed.items() if len(errors) >= 4}
    assert set(error) == {
        "hf_gpt2_perseq", "hf_tok_tqdm", "pyg_collate", "timm_perclass", "hf_bert_tokacc", "pyg_pergraph"
    }  # fmt: skip
    assert set(sorted(error, key=error.__getitem__)[-2:]) == {"hf_tok_tqdm", "hf_gpt2_perseq"}
    assert len(signed["hf_gpt2_perseq"]) == 8 and sum(e > 20 for e in signed["hf_gpt2_perseq"]) == 6
