"""The CI gates as library calls (nsync.gates): the verdict raised as the exception whose exit code the
command returns. Expected figures: fixtures/h200/README.md (print_deg: fixing the print saves 0.39 of 3.18 ms
a step, 12 %; print_ok → print_deg: the step grows from 2.83 to 3.52 ms, +24 %)."""

from __future__ import annotations

import pytest

from nsync import diff, gates
from nsync.errors import CannotJudge, GateFailed


def test_fail_above_raises_past_the_threshold_and_passes_under_it(h200_analysis) -> None:
    report = h200_analysis("print_deg")
    with pytest.raises(GateFailed, match=r"^fixing w_print.py:19 is predicted to save 1\d\.\d % of a step \(> 5 %\)$"):
        gates.fail_above(report, 5)
    assert GateFailed.exit_code == 3
    gates.fail_above(report, 15)  # passes: returns


@pytest.mark.slow
def test_fail_on_regression_raises_on_the_print_and_cannot_judge_two_programs(h200_analysis, real_analysis) -> None:
    ok, deg = h200_analysis("print_ok"), h200_analysis("print_deg")
    with pytest.raises(GateFailed, match=r"^step time regressed by 2\d\.\d % \(> 5 %, profiled\)$"):
        gates.fail_on_regression(diff(ok, deg), 5)
    gates.fail_on_regression(diff(deg, ok), 5)  # an improvement passes
    with pytest.raises(CannotJudge) as cannot:
        gates.fail_on_regression(diff(ok, real_analysis("resnet_train")), 5)
    assert cannot.value.exit_code == 1 and cannot.value.what == "cannot judge these runs"
    assert "different programs" in cannot.value.why
