"""What-if replay: it reproduces the trace as captured, and predicts what removing syncs gains."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nsync import AnalysisConfig
from nsync.analysis import run_stages
from nsync.knowledge import LOG_RATIO_QUANTILES
from nsync.load.calibration import Calibration, beside
from nsync.stages.replay import LOOP_BODY_OPS, PROFILED_HOST_SCALE_MAX, fit_host_scale, other_scales
from tests.conftest import FIXTURES
from tests.ground_truth import analysed
from tests.tracebuilder import DEVICE, DTOH, PAGEABLE, PINNED, TraceBuilder, ns

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
    a = build(b, host_scale=1.0, host_scale_range=())  # host time as captured: the constructed answer
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


def test_a_saving_is_its_mean_over_the_host_scales_most_of_it_at_the_fitted_one(build):
    """two_syncs_per_step at host scale s (its Python and launches scaled, the GPU not): as it is, the step is
    820 + 200 s µs; fixing one sync, 810 + 100 s (the other still drains the queue); fixing both, the GPU's 800.
    So a saving of 10 + 100 s for one, 20 + 200 s for both, at the scales 1 (uncalibrated: the one given), 0.4
    and 0.85 (its range): the point weighs them 0.725 (1 - (0.117 / ln 1.25)²) and 0.1375 each; the likely range
    is the point times the spread of measured savings around uncalibrated predictions (LOG_RATIO_QUANTILES)."""
    b = TraceBuilder()
    two_syncs_per_step(b)
    a = build(b, host_scale=1.0, host_scale_range=(0.4, 0.85))
    w = a.what_if
    assert w.scales == (1.0, 0.4, 0.85)
    site = dict(zip(a.callsites["line"], a.callsites["site_id"]))[10]
    one, both = (lambda s: 10 + 100 * s), (lambda s: 20 + 200 * s)
    fitted, end = 0.725, 0.1375
    assert w.saving_ns[site] == pytest.approx(ns(fitted * one(1) + end * (one(0.4) + one(0.85))), rel=1e-3)
    assert w.all_syncs_saving_ns == pytest.approx(ns(fitted * both(1) + end * (both(0.4) + both(0.85))), rel=1e-3)
    assert w.saving_range_ns[site] == pytest.approx(uncalibrated_range(w.saving_ns[site]))
    assert w.all_syncs_range_ns == pytest.approx(uncalibrated_range(w.all_syncs_saving_ns))


def uncalibrated_range(point: float) -> tuple[float, float]:
    low, high = LOG_RATIO_QUANTILES["uncalibrated"]
    return point * math.exp(low), point * math.exp(high)


def test_a_kernel_queued_behind_another_starts_the_dispatch_gap_after_it(build):
    """Per step: 20 kernels of 10 µs launched 2 µs apart, each queued one starting 1 µs after the one before
    ends (GPU t0+7 to t0+226), a sync to t0+229, 51 µs of Python: a step of 280 µs. Without the gap the replay
    would chain them 19 µs shorter."""
    b = TraceBuilder()
    for i in range(8):
        t0 = i * 280
        b.nvtx_range(1, "step", t0, t0 + 279)
        for k in range(20):
            b.kernel(1, t0 + 2 * k, t0 + 7 + 11 * k, t0 + 17 + 11 * k, launch_cost_us=1)
        b.python_stack(1, b.stream_sync(1, t0 + 40, t0 + 229), [("step", "/u/train.py", 9)])
    w = build(b, host_scale=1.0).what_if
    assert w.replayed_step_ns == ns(280)


TORCH_STR = "/venv/lib/python3.11/site-packages/torch/_tensor_str.py"


def one_call_that_reads_twice(b: TraceBuilder, how: str, steps: int = 8) -> None:
    """Per step (µs from t0): kernel K, GPU 7-207; then line 30 reads twice (a D2H copy and a stream sync
    each): the first waits for K (sync to 211), 30 µs of host work, a 50 µs kernel (GPU 248-298), the second
    read waits for it (sync to 302); 48 µs of Python, the next step at 350. ``how``: "call", the two reads come
    from two places inside torch under one call of the line (print's formatting); "loop", from the same stack
    (a loop over the line); "callers", from the same place inside torch, the line (a helper's) called from two
    lines of its caller."""
    inner = {"call": (100, 200), "loop": (100, 100), "callers": (100, 100)}[how]
    outer = (40, 45) if how == "callers" else (40, 40)
    for i in range(steps):
        t0 = i * 350
        b.nvtx_range(1, "step", t0, t0 + 349)
        b.kernel(1, t0, t0 + 7, t0 + 207, name="K", launch_cost_us=5)
        for k, (copy_call, copy_gpu, sync) in enumerate(((10, 207, (14, 211)), (250, 298, (254, 302)))):
            if k == 1:
                b.kernel(1, t0 + 241, t0 + 248, t0 + 298, name="format")
            b.memcpy(1, "cudaMemcpyAsync_v3020", t0 + copy_call, t0 + copy_call + 4, t0 + copy_gpu,
                     t0 + copy_gpu + 1, DTOH, DEVICE, PINNED)  # fmt: skip
            read = b.stream_sync(1, t0 + sync[0], t0 + sync[1])
            frames = [("_str", TORCH_STR, inner[k]), ("log", "/u/train.py", 30), ("step", "/u/train.py", outer[k])]
            b.python_stack(1, read, frames)


@pytest.mark.parametrize(
    ("how", "saving_us"),
    [
        ("call", 150),  # the call gone whole: K alone, back to back (the host needs 58 µs a step)
        ("loop", 100),  # a loop's work stays: K and the 50 µs kernel (the reads and their copies go)
        ("callers", 100),  # two calls of a helper's line: what runs between them stays
    ],
)
def test_a_fix_takes_away_one_call_s_work_between_its_syncs_but_not_a_loop_s(build, how: str, saving_us: int):
    b = TraceBuilder()
    one_call_that_reads_twice(b, how)
    a = build(b, host_scale=1.0, host_scale_range=())
    assert len(a.callsites) == 1 and a.what_if.replayed_step_ns == ns(350)
    assert a.callsites.iloc[0]["predicted_saving_ns_per_step"] == ns(saving_us)


def test_a_calibration_slower_than_the_profiler_can_explain_does_not_hold():
    """A replay that runs at 1000 µs + 1000 µs times the host scale fits a 2100 µs step at 1.1: nsys never
    leaves a host faster than it was (1.1 to 2.2 times slower), so that calibration run's host was slow."""
    scale, note, held = fit_host_scale(lambda s: ns(1000) * (1 + s), ns(2100), 0.6)
    assert scale == pytest.approx(1 / 1.1) and scale == PROFILED_HOST_SCALE_MAX and not held
    assert "host scale 1.1" in note and "slower than this capture's" in note
    assert fit_host_scale(lambda s: ns(1000) * (1 + s), ns(1500), 0.6)[0] == pytest.approx(0.5, abs=0.01)
    # a loop bound by its DataLoader: that run waited longer for its data (the replay does not model the loader)
    waited = fit_host_scale(lambda s: ns(1000) * (1 + s), ns(2100), 0.6, waits_for_data=True)
    assert waited[:1] + waited[2:] == (scale, held) and "waited longer for its DataLoader" in waited.note
    assert "host was slower" not in waited.note


def test_a_calibration_that_does_not_hold_is_set_aside(tmp_path):
    """two_syncs_per_step replays at 820 + 200 s µs a step: a calibration run of 1.05 ms a step fits s = 1.15, a
    host slower than nsys ever leaves (1 / 1.1). The what-if sets it aside: the uncalibrated host scale and its
    range's scales, and the uncalibrated spread for the likely ranges."""
    b = TraceBuilder()
    two_syncs_per_step(b)
    path = b.write(tmp_path / "t.sqlite")
    slow = Calibration(None, {"nvtx:step": np.full(8, ns(1050))})
    w = run_stages(path, AnalysisConfig(host_scale_range=(0.4, 0.85)), calibration=slow).what_if
    assert w.calibrated and not w.calibration_held and w.basis == "uncalibrated"
    assert (w.host_scale, w.scales) == (pytest.approx(1 / 1.1), (0.6, 0.4, 0.85))  # the step: the capped fit's
    assert w.unprofiled_step_ns == pytest.approx(ns(820 + 200 / 1.1), rel=0.01)
    assert w.note.startswith(
        "calibration set aside for the savings: the unprofiled run (1.050 ms a step) fits a host slower"
    )
    held = Calibration(None, {"nvtx:step": np.full(8, ns(920))})  # s = 0.5
    w = run_stages(path, AnalysisConfig(host_scale_range=(0.4, 0.85)), calibration=held).what_if
    assert w.calibration_held and w.basis == "calibrated" and w.host_scale == pytest.approx(0.5, abs=0.03)


def test_a_slower_run_than_the_replay_can_reach_is_the_slowest_host_nsys_leaves():
    """A 1500 µs calibration step fits 0.5 and holds: the faster run (1200 µs) fits 0.2, the slower (1875 µs)
    0.875. Taken as a 2000 µs calibration, the slower run (2500 µs) would need 1.5, beyond any host scale
    replayed: it is the slowest host nsys leaves, 1 / 1.1 (it was the fitted scale, so no slower end at all)."""
    replay_ns = lambda s: ns(1000) * (1 + s)  # noqa: E731
    fit = fit_host_scale(replay_ns, ns(1500), 0.6)
    assert fit.held
    faster, slower = other_scales(replay_ns, fit, ns(1500), 1.25, (0.4, 0.85))
    assert (faster, slower) == (pytest.approx(0.2, abs=0.01), pytest.approx(0.875, abs=0.01))
    assert other_scales(replay_ns, fit, ns(2000), 1.25, (0.4, 0.85))[1] == PROFILED_HOST_SCALE_MAX


@pytest.mark.slow
def test_no_bundled_capture_is_predicted_to_slow_down_when_a_wait_is_removed():
    """Every saving of every capture with a what-if (each call site, group, loop, the program's own syncs, all of
    them; calibrated where a calibration lies beside it) is at least 0: a released wait lets the host issue its
    work earlier, and a step is the mean over the replayed steps. A replay that lengthens the step anyway is
    shown as no saving, with a warning (a damaged trace: tests/test_damage_property.py); none of these real
    ones has one. (A GAN's alternating steps gave -0.09 to -0.51 ms for every sync with the median step.)"""
    negative = []
    for trace in sorted(FIXTURES.rglob("*.sqlite.xz")):
        w = analysed(trace, calibrated=beside(trace).exists()).what_if
        if w is None:
            continue
        savings = [*w.saving_ns.values(), *w.group_saving_ns, *(loop.saving_ns for loop in w.loops)]
        savings += [w.own_saving_ns, w.all_syncs_saving_ns]
        negative += [(trace.name, saving) for saving in savings if saving < 0]
        # (a replay that lengthens the step is shown as no saving: none of these real traces has one)
        negative += [(trace.name, -w.slower_ns)] if w.slower_ns > 0 else []
    assert negative == []


@pytest.mark.parametrize("name", ["print_deg", "print_ok"])
def test_unchanged_replay_reproduces_the_step_time_within_5_percent(h200_stages, name):
    a = h200_stages(name)
    measured = float(np.median(a.step_stats["gpu_duration_ns"].dropna()))
    assert a.what_if.replayed_step_ns == pytest.approx(measured, rel=0.05)


# fixtures/h200/README.md: unprofiled step times on the H200 (ms), degraded and healthy
MEASURED = {
    "print_deg": (3.224, 2.830, "w_print.py", 19),
    "w_item_degraded": (3.512, 2.944, "w_item.py", 17),
    "w_mask_degraded": (3.479, 2.832, "w_mask.py", 15),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MEASURED))
def test_fixing_the_sync_predicts_the_healthy_step(h200_stages, name):
    _degraded, healthy, file, line = MEASURED[name]
    a = h200_stages(name)
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
                reason="predicted 1.17 ms where 0.65 is measured: its host slows down twice as much under nsys as "
                "the one host_scale assumes (fixtures/h200/README.md); this capture has no calibration run (the "
                "calibrated ones: fixtures/h200/cal)",
            ),
        ),
    ],
)
def test_predicted_saving_is_within_30_percent_of_the_measured_one(h200_stages, name):
    degraded, healthy, *_ = MEASURED[name]
    saving = h200_stages(name).callsites.iloc[0]["predicted_saving_ns_per_step"]
    assert saving == pytest.approx((degraded - healthy) * 1e6, rel=0.30)


def a_loop_of_reads(
    b: TraceBuilder,
    reads: int = 10,
    steps: int = 8,
    ops: int = 1,
    lines: tuple[int, ...] = (40,),
    pageable: bool = False,
    then: int | None = None,
) -> None:
    """A step of 500 µs the host bounds (µs from t0): kernel K launched at 0 (GPU 7-17), then line 40 reads in a
    loop, ``reads`` times from one stack: each iteration starts at a = 20 + 40 j, 10 µs of Python, ``ops``
    small kernels launched from a + 10 (0.4 µs apart, the first on the GPU at a + 17, 0.2 µs each), its copy
    call a + 14 to a + 18 (the copy on the GPU at a + 21: the launch latency, 7 µs), its sync a + 18 to a + 24,
    then Python to a + 40; after the loop, Python to 500.

    Released, each read takes its copy call and sync away: 10 µs a read. Vectorised, the host time from the
    first read's copy call (34) to the last read's end (20 + 40 (reads - 1) + 24) goes too.

    ``lines``: one such loop after another, each reading its own line (the step 40 ``reads`` µs longer a loop),
    each with LOOP_BODY_OPS + 1 more small kernels before its first read's (work between two loops).
    ``pageable``: each copy goes to pageable memory (``.tolist()``), its call blocking until the copy's end (a + 23).
    ``then``: that line reads once more after the last loop, as the loop's reads do (a read after the loop)."""
    step_us = 500 + 40 * reads * (len(lines) - 1)
    for i in range(steps):
        t0 = i * step_us
        b.nvtx_range(1, "step", t0, t0 + step_us - 1)
        b.kernel(1, t0, t0 + 7, t0 + 17, name="K", launch_cost_us=4)
        for m, line in enumerate(lines):
            for j in range(reads):
                a = t0 + 20 + 40 * (j + m * reads)
                for k in range(LOOP_BODY_OPS + 1 if j == 0 and len(lines) > 1 else 0):
                    b.kernel(1, a + 1 + k * 0.4, a + 9 + k * 0.3, a + 9.2 + k * 0.3, name="between", launch_cost_us=0.2)
                for k in range(ops):
                    b.kernel(
                        1, a + 10 + k * 0.4, a + 17 + k * 0.3, a + 17.2 + k * 0.3, name="small", launch_cost_us=0.4
                    )
                stack = [("step", "/u/train.py", line)]
                if pageable:
                    b.python_stack(
                        1,
                        b.memcpy(1, "cudaMemcpyAsync_v3020", a + 14, a + 23, a + 21, a + 22, DTOH, DEVICE, PAGEABLE),
                        stack,
                    )
                else:
                    b.memcpy(1, "cudaMemcpyAsync_v3020", a + 14, a + 18, a + 21, a + 22, DTOH, DEVICE, PINNED)
                b.python_stack(1, b.stream_sync(1, a + 23 if pageable else a + 18, a + 24), stack)
        if then is not None:
            a = t0 + 20 + 40 * len(lines) * reads
            b.memcpy(1, "cudaMemcpyAsync_v3020", a + 14, a + 18, a + 21, a + 22, DTOH, DEVICE, PINNED)
            b.python_stack(1, b.stream_sync(1, a + 18, a + 24), [("step", "/u/train.py", then)])


def test_a_loop_of_reads_done_at_once_takes_the_loop_s_host_time_away(build):
    b = TraceBuilder()
    a_loop_of_reads(b)
    a = build(b, host_scale=1.0, host_scale_range=())
    w = a.what_if
    assert w.replayed_step_ns == ns(500) and len(w.loops) == 1
    (loop,) = w.loops
    assert loop.reads_per_step == 10
    released, vectorised = ns(10 * 10), ns(20 + 40 * 9 + 24 - 34)
    assert a.callsites.iloc[0]["predicted_saving_ns_per_step"] == released
    assert loop.saving_ns == pytest.approx(released + 0.6 * (vectorised - released))  # LOOP_GONE_SHARE
    assert loop.range_ns == pytest.approx(uncalibrated_range(loop.saving_ns))
    assert a.verdict is not None and a.verdict.site == "train.py:40 (its loop, for all items at once)"


@pytest.mark.parametrize(
    ("reads", "ops", "looped"),
    [(8, 1, True), (7, 1, False), (10, 7, True), (10, 8, False)],
    ids=["8 reads", "7 reads", "8 GPU ops a body", "9 GPU ops a body"],
)
def test_a_loop_is_a_line_read_8_times_in_a_row_a_few_ops_apart(build, reads: int, ops: int, looped: bool):
    """LOOP_MIN_READS and LOOP_BODY_OPS: a read repeated in a step fewer times, or with more GPU work between
    two reads (``ops`` kernels and the read's copy: a micro-batch's forward), is no loop the fix can do at once."""
    b = TraceBuilder()
    a_loop_of_reads(b, reads=reads, ops=ops)
    a = build(b, host_scale=1.0, host_scale_range=())
    assert bool(a.what_if.loops) == looped
    assert a.callsites["loop_saving_ns_per_step"].notna().all() == looped


def test_every_output_shows_a_loop_s_saving_beside_the_site_s(build):
    """The loop of a_loop_of_reads at one host scale: 0.6 of the way from 100 µs (its reads) to 370 µs (the whole
    loop, LOOP_GONE_SHARE), 0.262 ms; its likely range 0.160-0.367 (uncalibrated_range)."""
    import json

    from nsync import RenderOptions, render_html, render_json, render_markdown, render_terminal
    from nsync.stages.report import analysis_result

    b = TraceBuilder()
    a_loop_of_reads(b)
    a = analysis_result(build(b, host_scale=1.0, host_scale_range=()))
    (site,) = json.loads(render_json(a))["callsites"]
    low, high = uncalibrated_range(0.262)
    assert (site["loop_saving_ms_per_step"], round(low, 3), round(high, 3)) == (0.262, 0.160, 0.367)
    assert (site["loop_saving_ms_per_step_low"], site["loop_saving_ms_per_step_high"]) == pytest.approx(
        (low, high), abs=5e-4
    )
    assert "its loop at once: 0.262 ms/step (80 % likely 0.160-0.367)" in render_terminal(a, RenderOptions(width=80))
    assert "loop at once 0.262 (0.160-0.367)" in render_markdown(a)
    assert 'loop at once 0.262</span><br><span class="muted">0.16-0.37</span>' in render_html(a)
    assert "do the loop of <code>train.py:40</code> for all items at once</td>" in render_html(a)


def test_a_read_of_another_line_just_after_a_loop_is_not_in_the_loop(build):
    """Line 60 reads once a few ops after the loop's last read (a run of reads goes on): the loop is still line
    40's alone, its figures those of the loop without it (100 µs of reads, 370 µs for the whole loop)."""
    b = TraceBuilder()
    a_loop_of_reads(b, then=60)
    a = build(b, host_scale=1.0, host_scale_range=())
    (loop,) = a.what_if.loops
    line_of = dict(zip(a.callsites["site_id"], a.callsites["line"]))
    assert [line_of[site] for site in loop.sites] == [40] and loop.reads_per_step == 10
    released, vectorised = ns(10 * 10), ns(20 + 40 * 9 + 24 - 34)
    assert loop.saving_ns == pytest.approx(released + 0.6 * (vectorised - released))


@pytest.mark.parametrize(
    ("source", "looped"),
    [("loop", True), ("none", False), (None, False)],
    ids=["a for loop around the line", "no loop in the source", "source unreadable"],
)
def test_a_loop_of_copies_to_pageable_memory_is_a_loop_only_where_the_source_shows_it(tmp_path, source, looped):
    """``.tolist()`` in a loop: each read a blocking copy to pageable memory, then a sync. Such a loop is the
    user's where the source shows a loop around the line; unreadable, it may be a library's inside one call
    (torch's ctc_loss makes one: in_source), so it is not priced."""
    from nsync import AnalysisConfig

    inner = {"loop": ["    for row in rows:", "        ids = row.tolist()"], "none": ["    pass", "    ids = ctc(x)"]}
    folders = []
    if source is not None:
        code = tmp_path / "src" / "train.py"
        code.parent.mkdir()
        code.write_text("\n".join(["import torch"] * 37 + ["for step in range(100):", *inner[source]]) + "\n")
        folders = [code.parent]
    b = TraceBuilder()
    a_loop_of_reads(b, pageable=True)
    a = run_stages(
        b.write(tmp_path / "t.sqlite"), AnalysisConfig(host_scale=1.0, host_scale_range=()), source_dirs=folders
    )
    assert "pageable-copy" in a.callsites.iloc[0]["kinds"]
    assert bool(a.what_if.loops) == looped
    if looped:
        (loop,) = a.what_if.loops
        assert loop.reads_per_step == 20  # each item: its copy and its sync


def test_each_loop_of_reads_is_one_loop_in_every_output_even_with_another_s_figures(build, tmp_path):
    """Two loops one after the other (lines 40 and 50, work between them): each site names its own loop, in the
    JSON and the SQLite, and the HTML has a What-if row for each, as it would if their figures were equal."""
    import json
    import sqlite3
    from dataclasses import replace

    from nsync import render_html, render_json
    from nsync.render.database import write_database
    from nsync.stages.report import analysis_result

    b = TraceBuilder()
    a_loop_of_reads(b, lines=(40, 50))
    stages = build(b, host_scale=1.0, host_scale_range=())
    assert len(stages.what_if.loops) == 2
    a = analysis_result(stages)
    by_line = {site["line"]: site["loop_id"] for site in json.loads(render_json(a))["callsites"]}
    assert sorted(by_line) == [40, 50] and sorted(by_line.values()) == [0, 1]
    write_database(a, tmp_path / "report.db")
    with sqlite3.connect(tmp_path / "report.db") as db:
        assert dict(db.execute("select line, loop_id from callsites").fetchall()) == by_line
    html = render_html(a)
    assert "do the loop of <code>train.py:40</code>" in html and "do the loop of <code>train.py:50</code>" in html
    report = a
    figures = {"loop_saving_ms_per_step": 0.25, "loop_saving_ms_per_step_low": 0.1, "loop_saving_ms_per_step_high": 0.5}
    same = [replace(s, **figures) for s in report.callsites]
    assert [[s.line for s in sites] for _, sites in report.loops_at_once(same)] in ([[40], [50]], [[50], [40]])


@pytest.mark.parametrize("looped", [True, False], ids=["a for loop around the line", "no loop in the source"])
def test_a_loop_the_source_shows_no_loop_around_is_a_library_s_own_and_not_priced(tmp_path, looped: bool):
    """The same reads (line 40, one stack, 10 a step) are a Python loop when the readable source has one around
    line 40, and a library reading from C++ inside one call of the line when it has none."""
    from nsync import AnalysisConfig

    inner = (
        ["    for item in items:", "        total += loss_of(item).item()"]
        if looped
        else [
            "    pass",
            "    total = ctc(log_probs, targets).item()",
        ]
    )
    source = tmp_path / "src" / "train.py"
    source.parent.mkdir()
    source.write_text("\n".join(["import torch"] * 37 + ["for step in range(100):", *inner]) + "\n")  # read: line 40
    b = TraceBuilder()
    a_loop_of_reads(b)
    path = b.write(tmp_path / "loop.sqlite")
    a = run_stages(path, AnalysisConfig(host_scale=1.0, host_scale_range=()), source_dirs=[source.parent])
    assert a.callsites.iloc[0]["advice"].basis == "code"  # the line was read
    assert bool(a.what_if.loops) == looped
    assert a.callsites["loop_saving_ns_per_step"].notna().all() == looped
