"""Real programs' structure, by construction: steps from the kernel period with a start-up, an evaluation
loop and a teardown around them; the optimizer-step marks; no false steps; library sync frames; a
host-bound loop whose sync saves nothing."""

from __future__ import annotations

import json

import pytest

from nsync.capturing.inject import STEP_MARK
from nsync.stages.report import analysis_result
from tests.tracebuilder import TraceBuilder, ns

TRAIN, EVAL = 1000, 400  # µs per training iteration, per evaluation batch
SITE = "/opt/venv/lib/python3.12/site-packages"


def training_run(b: TraceBuilder, iterations: int = 20, eval_after: int = 10, evals: int = 5) -> dict[str, float]:
    """Start-up: two init kernels and a blocking copy (a model moved to the GPU). Each training iteration:
    kernels a, b, c, d launched at +0, +100, +200, +300 (150 µs each on the GPU), and a `.item()`-like stream
    sync at +500 (line 30). After iteration ``eval_after``, ``evals`` evaluation batches: kernels a, e and a
    sync (line 40). Teardown: a kernel 'save' and a sync (line 50). Returns the phase boundaries (µs)."""
    b.kernel(1, 0, 10, 200, name="init_weights")
    b.kernel(1, 50, 200, 400, name="init_buffers")
    corr = b.stream_sync(1, 60, 400)
    b.python_stack(1, corr, [("<module>", "/u/train.py", 12)])
    t = 1000.0
    marks = {"loop_start": t}
    for i in range(iterations):
        for k, name in enumerate("abcd"):
            b.kernel(1, t + 100 * k, t + 100 * k + 5, t + 100 * k + 155, name=name)
        corr = b.stream_sync(1, t + 500, t + 505)
        b.python_stack(1, corr, [("train", "/u/train.py", 30)])
        t += TRAIN
        if i + 1 == eval_after:
            marks["eval_start"] = t
            for _ in range(evals):
                b.kernel(1, t, t + 5, t + 155, name="a")
                b.kernel(1, t + 100, t + 160, t + 300, name="e")
                corr = b.stream_sync(1, t + 200, t + 300)
                b.python_stack(1, corr, [("evaluate", "/u/train.py", 40)])
                t += EVAL
            marks["eval_end"] = t
    marks["last_iteration"] = t - TRAIN
    b.kernel(1, t, t + 5, t + 500, name="save")
    corr = b.stream_sync(1, t + 10, t + 500)
    b.python_stack(1, corr, [("<module>", "/u/train.py", 50)])
    marks["end"] = t + 500
    return marks


def test_steps_come_from_the_kernel_period_and_the_phases_from_around_them(build):
    b = TraceBuilder()
    marks = training_run(b)
    a = build(b)
    # kernel 'a' starts every iteration (and every evaluation batch, 2 launches apart: not its period of 4):
    # 19 intervals between its training launches, iteration 10's included (it ends where the evaluation's
    # first 'a' is launched); the last iteration has no next 'a' and goes to the teardown
    assert a.steps.source == "kernel:a"
    assert len(a.steps.table) == 19 and a.steps.count == 18  # the first is warm-up
    phases = {row["phase"]: row for row in a.phases.to_dict("records")}
    assert list(phases) == ["start-up", "main loop", "between steps", "teardown"]
    assert phases["start-up"]["end"] == ns(marks["loop_start"] + TRAIN)  # with the warm-up step
    assert (phases["between steps"]["start"], phases["between steps"]["end"]) == (
        ns(marks["eval_start"]),
        ns(marks["eval_end"]),
    )
    assert phases["between steps"]["sync_count"] == 5
    assert phases["teardown"]["start"] == ns(marks["last_iteration"]) and phases["teardown"]["sync_count"] == 2
    # the per-step figures hold the main loop's 18 syncs at line 30 and nothing else
    assert a.callsites["line"].tolist() == [30] and int(a.callsites["count"].iloc[0]) == 18
    once = a.phase_sites.set_index(["phase", "line"])["count"].to_dict()
    assert once == {("start-up", 12): 1, ("start-up", 30): 1, ("between steps", 40): 5, ("teardown", 30): 1,
                    ("teardown", 50): 1}  # fmt: skip
    # the evaluation's step-time gap does not count as a step's GPU time
    assert a.step_stats["gpu_duration_ns"].max() == ns(TRAIN)


def test_optimizer_step_marks_give_steps_from_one_step_end_to_the_next(build):
    b = TraceBuilder()
    for i in range(6):
        t0 = i * TRAIN
        b.kernel(1, t0, t0 + 5, t0 + 600, name="fwd_bwd")
        b.nvtx_range(1, STEP_MARK, t0 + 700, t0 + 750)  # optimizer.step()
        b.kernel(1, t0 + 710, t0 + 715, t0 + 740, name="adam")
    a = build(b)
    assert a.steps.source == "marks"
    assert a.steps.table["start"].tolist() == [ns(i * TRAIN + 750) for i in range(5)]
    assert a.steps.table["end"].tolist() == [ns(i * TRAIN + 750) for i in range(1, 6)]


def test_a_step_like_word_inside_a_name_or_a_run_of_one_copy_kernel_is_no_step(build):
    # A range named ...IterDomain... around each op, and 12 back-to-back launches of one copy kernel inside
    # a single inference: neither is a loop.
    b = TraceBuilder()
    for i in range(12):
        t0 = 100 + 20 * i
        b.nvtx_range(1, "kernel_IterDomain_split", t0, t0 + 15)
        b.kernel(1, t0, t0 + 2, t0 + 12, name="copy_kernel")
    b.kernel(1, 400, 405, 5000, name="big_inference")
    b.stream_sync(1, 410, 5005)
    a = build(b)
    assert a.steps.source == "none" and a.steps.count == 0


def test_one_user_line_with_two_library_syncs_is_two_call_sites_naming_both(build):
    user = [("train", f"{SITE}/transformers/trainer.py", 1520), ("<module>", "/u/run.py", 9)]
    b = TraceBuilder()
    for i in range(6):
        t0 = i * TRAIN
        b.nvtx_range(1, "step", t0, t0 + TRAIN - 1)
        b.kernel(1, t0, t0 + 5, t0 + 300, name="fwd")
        corr = b.stream_sync(1, t0 + 10, t0 + 305)
        b.python_stack(1, corr, [("_run_epoch", f"{SITE}/transformers/trainer.py", 1847), *user])
        b.kernel(1, t0 + 400, t0 + 405, t0 + 700, name="bwd")
        corr = b.stream_sync(1, t0 + 410, t0 + 705)
        mask = ("_ignore_causal_mask_sdpa", f"{SITE}/transformers/masking_utils.py", 269)
        b.python_stack(1, corr, [mask, ("forward", f"{SITE}/torch/nn/modules/module.py", 1775), *user])
    a = analysis_result(build(b))
    data = a.to_dict()
    sites = {
        (s["line"], s["sync_frame"]["file"].rsplit("/", 1)[-1], s["sync_frame"]["line"]) for s in data["callsites"]
    }
    assert sites == {(9, "trainer.py", 1847), (9, "masking_utils.py", 269)}
    assert all(s["file"] == "/u/run.py" and s["count"] == 5 for s in data["callsites"])
    assert all("inside transformers" in s["hint"] for s in data["callsites"])
    json.dumps(data)  # the JSON holds both frames


def test_in_a_host_bound_loop_the_sync_costs_only_its_own_host_time(build):
    """Each step launches 50 kernels 20 µs apart (an embedding, then 10 layers of 5; the host needs 1000 µs a
    step, the GPU 500), then reads a value: a 10 µs copy call and a 15 µs stream sync. The GPU idles between
    launches with or without the read, so fixing it saves its 25 µs of host time and nothing more, while its
    exposed idle is large."""
    b = TraceBuilder()
    for i in range(20):
        t0 = i * 1025
        for k in range(50):
            name = "embedding" if k == 0 else f"layer_k{k % 5}"
            b.kernel(1, t0 + 20 * k, t0 + 20 * k + 5, t0 + 20 * k + 15, name=name, launch_cost_us=4)
        b.memcpy(1, "cudaMemcpyAsync_v3020", t0 + 1000, t0 + 1010, t0 + 1002, t0 + 1003, copy_kind=2, src_kind=3,
                 dst_kind=1)  # fmt: skip
        corr = b.stream_sync(1, t0 + 1010, t0 + 1025)
        b.python_stack(1, corr, [("train", "/u/lm.py", 92)])
    a = build(b, host_scale=1.0)
    assert a.steps.source == "kernel:embedding"
    site = a.callsites.iloc[0]
    assert site["kinds"] == ["dtoh-read"]
    assert site["predicted_saving_ns_per_step"] == pytest.approx(ns(25), abs=ns(1))
    assert site["exposed_idle_ns_per_step"] > 10 * site["predicted_saving_ns_per_step"]
    assert not a.verdict.worth_fixing and "nothing here is worth fixing" in a.verdict.text
