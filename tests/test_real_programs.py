"""nsync on real programs nobody on the team wrote, against their measured ground truth.

The traces and the unprofiled timings are in fixtures/real (its README holds the figures, measured on the
H200 with and without each fix; this test reads them from there). The programs have no NVTX ranges.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from nsync.analysis import Analysis, run_stages
from nsync.capturing.inject import STEP_MARK
from tests.browser import load, needs_chromium
from tests.conftest import FIXTURES

MEASURED_PROGRAMS = ("lstm_lm", "resnet_train", "timm_gradnorm", "hf_trainer", "compiled_train")
# the line each program's fix removes (by construction of the programs): (file, line) of the call site,
# or of the frame that issues the sync when a library does
FIXED_SITE = {
    "lstm_lm": ("lstm_lm.py", 92),
    "resnet_train": ("resnet_train.py", 32),
    "timm_gradnorm": ("timm_gradnorm.py", 30),
    "hf_trainer": ("trainer.py", 1847),  # logging_nan_inf_filter=False removes the Trainer's NaN/Inf check
    "compiled_train": ("compiled_train.py", 29),
}


def _tables() -> list[list[dict[str, str]]]:
    """The README's Markdown tables, as rows of {header: cell}."""
    tables, rows, header = [], [], None
    for line in [*(FIXTURES / "real" / "README.md").read_text().splitlines(), ""]:
        if line.startswith("|"):
            cells = [c.strip().strip("`") for c in line.strip("|").split("|")]
            if header is None:
                header = cells
            elif not set(line) <= set("|-: "):
                rows.append(dict(zip(header, cells)))
        elif header is not None:
            tables.append(rows)
            rows, header = [], None
    return tables


TRACES, TIMINGS, *_ = _tables()  # (later tables: other measurements)
TRUE_STEPS = {row["trace"].removesuffix(".sqlite.xz"): int(row["true steps"]) for row in TRACES}
MEASURED = {row["program"]: row for row in TIMINGS}


def measured(program: str) -> tuple[float, float, bool]:
    """(degraded step ms, saving ms, whether the saving is beyond the noise), from the README."""
    row = MEASURED[program]
    return (
        float(row["degraded median (ms)"]),
        float(row["saving: median of pairs (ms)"]),
        row["effect beyond noise"] == "yes",
    )


def fixed_site(analysis: Analysis, program: str) -> dict:
    name, line = FIXED_SITE[program]
    for site in analysis.callsites.to_dict("records"):
        for prefix in ("", "sync_"):
            if Path(site[f"{prefix}file"]).name == name and site[f"{prefix}line"] == line:
                return site
    raise AssertionError(f"no call site {name}:{line} in {program}")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TRUE_STEPS))
def test_steps_are_found_within_10_percent_of_the_true_count(real_stages: Callable[[str], Analysis], name: str):
    found = len(real_stages(name).steps.table)
    assert abs(found - TRUE_STEPS[name]) <= 0.1 * TRUE_STEPS[name]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet_train", "timm_gradnorm", "hf_trainer", "compiled_train"])
def test_without_the_step_marks_the_kernel_period_finds_the_steps(real: Callable[[str], Path], tmp_path, name):
    """The same export with nsync profile's optimizer-step marks deleted: a trace captured by hand."""
    copy = tmp_path / f"{name}.sqlite"
    copy.write_bytes(real(name).read_bytes())
    with sqlite3.connect(copy) as conn:
        conn.execute(
            "DELETE FROM NVTX_EVENTS WHERE text = ? OR textId IN (SELECT id FROM StringIds WHERE value = ?)",
            (STEP_MARK, STEP_MARK),
        )
    steps = run_stages(copy).steps
    assert steps.source.startswith("kernel:")
    assert abs(len(steps.table) - TRUE_STEPS[name]) <= 0.1 * TRUE_STEPS[name]


@pytest.mark.slow
def test_the_evaluation_loop_and_teardown_are_phases_apart_from_the_main_loop(real_stages):
    a = real_stages("lstm_lm")  # an evaluation after each of its 2 epochs
    phases = a.phases.set_index("phase")
    assert list(phases.index) == ["start-up", "main loop", "between steps", "teardown"]
    assert phases.loc["between steps", "intervals"] == 1  # the evaluation after epoch 1
    once = a.phase_sites.assign(name=[Path(f).name for f in a.phase_sites["file"]])
    evaluate = once.loc[(once["name"] == "lstm_lm.py") & (once["line"] == 71)]  # evaluate()'s .item()
    assert set(evaluate["phase"]) == {"between steps", "teardown"}
    assert set(evaluate["count"]) == {10}  # 10 evaluation batches each time
    assert 71 not in set(a.callsites["line"])  # never folded into the per-step figures


@pytest.mark.slow
@pytest.mark.parametrize("program", MEASURED_PROGRAMS)
def test_the_predicted_saving_is_within_the_tolerance_of_the_measured_one(real_stages, program):
    # within max(10 % of the step, 30 % of the measured saving), the measured step and saving unprofiled
    step_ms, saving_ms, _ = measured(program)
    predicted_ms = fixed_site(real_stages(program), program)["predicted_saving_ns_per_step"] / 1e6
    assert abs(predicted_ms - saving_ms) <= max(0.1 * step_ms, 0.3 * abs(saving_ms))


@pytest.mark.parametrize("program", [p for p in MEASURED_PROGRAMS if not measured(p)[2]])
def test_no_site_of_a_program_whose_syncs_cost_nothing_measurable_is_said_to_be_worth_fixing(real_stages, program):
    """Uncalibrated, ResNet-50's `loss.item()` is predicted at 5.6 % of its step, likely 0.5-9 %: 'measure', not
    'worth fixing' (issue 26: its uncalibrated verdict flipped with the host scale between 0.45 and 0.55)."""
    step_ms, *_ = measured(program)
    a = real_stages(program)
    assert (a.callsites["predicted_saving_ns_per_step"] / 1e6 <= 0.05 * step_ms).all()
    assert not a.verdict.worth_fixing and "would save" not in a.verdict.text
    low_ms, step_ms = a.verdict.largest_saving_ms_per_step_low, a.what_if.unprofiled_step_ns / 1e6
    assert low_ms < a.config.worth_fixing_share * step_ms  # the range admits "nothing"


def test_the_healthy_twin_has_nothing_worth_fixing(real_stages):
    assert not real_stages("timm_gradnorm_healthy").verdict.worth_fixing


def verdict_names(program: str) -> tuple[str, str]:
    """How a verdict names the line the fix changed: alone, or with the loop its read is in done at once
    (timm_gradnorm's comprehension over the parameters)."""
    where = f"{FIXED_SITE[program][0]}:{FIXED_SITE[program][1]}"
    return where, f"{where} (its loop, for all items at once)"


@pytest.mark.parametrize("program", ["compiled_train", "timm_gradnorm"])
def test_a_sync_that_measurably_costs_5_percent_is_worth_fixing_or_to_measure(real_stages, program):
    step_ms, saving_ms, beyond_noise = measured(program)
    assert beyond_noise and saving_ms >= 0.05 * step_ms  # the premise, from the README
    verdict = real_stages(program).verdict
    assert verdict.worth_fixing or verdict.measure  # never "nothing here is worth fixing"
    assert verdict.site in verdict_names(program)


def test_a_framework_s_three_syncs_under_one_user_line_are_three_rows_naming_the_library_line(real_stages):
    a = real_stages("hf_trainer")
    per_step = a.callsites.loc[a.callsites["syncs_per_step"] >= 1]
    assert {Path(f).name for f in per_step["file"]} == {"hf_trainer.py"}  # the user's trainer.train() line
    issued = {(Path(f).name, int(line)) for f, line in zip(per_step["sync_file"], per_step["sync_line"])}
    assert issued == {("trainer.py", 1847), ("masking_utils.py", 269), ("operations.py", 160)}


def test_diff_matches_each_library_line_on_its_own(real_analysis):
    from nsync.comparison import diff

    a = real_analysis("hf_trainer")
    result = diff(a, a)  # the same run on both sides: every call site paired with itself, none crossed
    assert len(result.callsites) == len(a.callsites)
    assert {site.status for site in result.callsites} == {"unchanged"}


@pytest.mark.slow
@needs_chromium
def test_the_html_report_shows_the_verdict_the_phases_and_the_library_lines(real_analysis, tmp_path):
    from nsync import render_html

    page = tmp_path / "hf.html"
    page.write_text(render_html(real_analysis("hf_trainer")))
    dom, console = load(page)
    assert not [m for m in console if "Error" in m]
    # uncalibrated, 0.08 ms a step (0.5 %), 80 % likely under 0.11 ms: its fix measured nothing
    assert 'id="verdict"' in dom and "(0.5 %; 80 % likely under 0.11 ms): nothing here is worth fixing" in dom
    assert 'id="phases"' in dom and "start-up" in dom and "teardown" in dom
    assert all(line in dom for line in ("trainer.py:1847", "masking_utils.py:269", "operations.py:160"))


CALIBRATED_VERDICT = {  # whether the fix measurably pays (README), for the calibrated captures of the programs
    "resnet_train": False,
    "timm_gradnorm": True,
    "timm_gradnorm_healthy": False,
    "hf_trainer": False,
    "compiled_train": True,
}


@pytest.mark.slow
@pytest.mark.parametrize("program", sorted(CALIBRATED_VERDICT))
def test_with_the_calibration_run_the_verdicts_stay_right(real: Callable[[str], Path], program: str):
    from nsync.load.calibration import read_calibration

    calibration = read_calibration(FIXTURES / "real" / f"{program}.calibration.json")
    a = run_stages(real(program), calibration=calibration)
    assert a.what_if is not None and a.what_if.calibrated and a.verdict is not None
    if CALIBRATED_VERDICT[program]:  # worth fixing, or "measure": never "nothing here is worth fixing"
        assert a.verdict.worth_fixing or a.verdict.measure
        assert a.verdict.site in verdict_names(program)
    else:
        assert not a.verdict.worth_fixing


def test_a_program_without_optimizer_steps_has_no_calibration_and_says_so(real: Callable[[str], Path]):
    """The LSTM steps its weights by hand: its calibration run timed nothing (no optimizer step, no NVTX), so
    a calibration of another source is reported as not applying, never used."""
    from nsync.load.calibration import Calibration

    other = Calibration(path=Path("other.calibration.json"), intervals_ns={"marks": np.full(10, 5e6)})
    a = run_stages(real("lstm_lm"), calibration=other)
    assert a.what_if is not None and not a.what_if.calibrated
    assert any(
        w.code == "uncalibrated" and "no unprofiled timings for steps of kernel:" in w.message for w in a.warnings
    )


def test_a_nothing_worth_fixing_comment_spells_out_no_fix_alone_or_together(real: Callable[[str], Path]) -> None:
    """issue 64: hf_trainer says "nothing worth fixing" (its fix measured noise, README), yet its Markdown, the
    pull-request comment, still spelled out a "Fix together" of the Trainer's setting."""
    from nsync import analyze, render_markdown

    analysis = analyze(real("hf_trainer"))
    assert analysis.verdict is not None and not analysis.verdict.worth_fixing and not analysis.verdict.measure
    assert analysis.fixed_together  # (there is one to leave out)
    text = render_markdown(analysis)
    assert "Fix together" not in text and "Read together" not in text and "#### " not in text
    assert "No fix is spelled out here: nothing is worth fixing for speed (each is in the HTML report)." in text
