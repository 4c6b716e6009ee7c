"""What-if replay: it reproduces the trace as captured, and predicts what removing syncs gains."""

from __future__ import annotations

import numpy as np
import pytest

from tests.tracebuilder import TraceBuilder, ns

PERIOD = 1020


def two_syncs_per_step(b: TraceBuilder, steps: int = 8) -> None:
    """Per step (µs from t0): K1 launched 0-5, GPU 7-407; sync S1 10-410 (line 10); 100 µs of Python;
    K2 launched 510-515, GPU 517-917; sync S2 520-920 (line 20); 100 µs of Python; the next step at 1020.

    Launch latency 7 µs and a 3 µs return after each drain, by construction. Fixing S1 alone: K2 queues
    behind K1, S2 still drains the queue every step: 800 µs of GPU + 3 + 100 + 7 = 910. Fixing S2 alone:
    the same, 910. Fixing both: the host needs 226 µs a step, the GPU 800: 800.
    """
    for i in range(steps):
        t0 = i * PERIOD
        b.nvtx_range(1, "step", t0, t0 + PERIOD - 1)
        b.kernel(1, t0, t0 + 7, t0 + 407, name="k1", launch_cost_us=5)
        s1 = b.stream_sync(1, t0 + 10, t0 + 410)
        b.python_stack(1, s1, [("first", "/u/train.py", 10)])
        b.kernel(1, t0 + 510, t0 + 517, t0 + 917, name="k2", launch_cost_us=5)
        s2 = b.stream_sync(1, t0 + 520, t0 + 920)
        b.python_stack(1, s2, [("second", "/u/train.py", 20)])


def test_two_syncs_interact_as_constructed(build):
    b = TraceBuilder()
    two_syncs_per_step(b)
    a = build(b, host_scale=1.0)  # host time as captured: the constructed answer
    w = a.what_if
    assert w.latency_ns == ns(7)
    assert w.replayed_step_ns == ns(PERIOD)
    site_of = dict(zip(a.callsites["line"], a.callsites["site_id"]))
    saving = {line: w.saving_ns[site_of[line]] for line in (10, 20)}
    assert saving == {10: ns(PERIOD - 910), 20: ns(PERIOD - 910)}
    assert w.without_syncs_step_ns == ns(800)
    assert max(saving.values()) < ns(PERIOD) - w.without_syncs_step_ns  # no single fix pays all
    site = a.callsites.set_index("line").loc[10]
    assert site["predicted_saving_ns_per_step"] == ns(110)


@pytest.mark.parametrize("name", ["print_deg", "print_ok"])
def test_unchanged_replay_reproduces_the_step_time_within_5_percent(h200_analysis, name):
    a = h200_analysis(name)
    measured = float(np.median(a.step_stats["gpu_duration_ns"].dropna()))
    assert a.what_if.replayed_step_ns == pytest.approx(measured, rel=0.05)


# fixtures/h200/README.md: unprofiled step times on the H200 (ms), degraded and healthy
MEASURED = {
    "print_deg": (3.224, 2.830, "w_print.py", 19),
    "w_item_degraded": (3.512, 2.944, "w_item.py", 17),
    "w_mask_degraded": (3.479, 2.832, "w_mask.py", 15),
}


@pytest.mark.parametrize("name", list(MEASURED))
def test_fixing_the_sync_predicts_the_healthy_step(h200_analysis, name):
    _degraded, healthy, file, line = MEASURED[name]
    a = h200_analysis(name)
    top = a.callsites.iloc[0]
    assert (top["file"].rsplit("/", 1)[-1], top["line"]) == (file, line)
    predicted = a.what_if.unprofiled_step_ns - top["predicted_saving_ns_per_step"]
    assert predicted == pytest.approx(healthy * 1e6, rel=0.15)
    assert a.what_if.without_syncs_step_ns == pytest.approx(predicted, rel=1e-9)  # it is the only sync site


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("print_deg", id="print_deg (host_scale 0.6 was fitted on it: a regression check)"),
        "w_item_degraded",
        pytest.param(
            "w_mask_degraded",
            marks=pytest.mark.xfail(
                strict=True,
                reason="predicted 1.23 ms where 0.65 is measured: its host slows down twice as much under nsys as "
                "the one host_scale assumes (fixtures/h200/README.md); this capture has no calibration run (the "
                "calibrated ones: fixtures/h200/cal)",
            ),
        ),
    ],
)
def test_predicted_saving_is_within_30_percent_of_the_measured_one(h200_analysis, name):
    degraded, healthy, *_ = MEASURED[name]
    saving = h200_analysis(name).callsites.iloc[0]["predicted_saving_ns_per_step"]
    assert saving == pytest.approx((degraded - healthy) * 1e6, rel=0.30)
