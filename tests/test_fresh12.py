"""Captures of `nsync profile`'s default window on a lent H100 (2026-12-06, fixtures/fresh12/README.md) of a loop
of two optimizers an iteration (DCGAN) and a loop bound by its DataLoader (ResNet-18, two workers), each fix
timed unprofiled in one process (ab-timings.log: healthy and degraded blocks alternating)."""

from __future__ import annotations

import functools
import json

import pytest

import nsync
from nsync.load.calibration import beside, read_calibration
from nsync.render.html import render_html
from nsync.render.json import render_json
from nsync.render.markdown import render_markdown
from nsync.render.terminal import render_terminal
from tests.conftest import FIXTURES

FRESH12 = FIXTURES / "fresh12"
ITERATION = "one iteration of 2 optimizer steps"


@functools.cache
def analysed(name: str) -> nsync.Analysis:
    trace = FRESH12 / f"{name}.sqlite.xz"
    return nsync.analyze(trace, calibration=read_calibration(beside(trace)))


def paired_saving_ms(program: str) -> tuple[float, float, float]:
    """The fix's saving measured in one process: the median of its blocks' and the range of the pairs'."""
    for line in (FRESH12 / "ab-timings.log").read_text().splitlines():
        run = json.loads(line.removeprefix("RESULT "))
        if run["program"] == program:
            return run["saving_median_ms"], *run["saving_range_ms"]
    raise LookupError(program)


def test_a_gan_s_step_is_its_iteration_of_two_optimizer_steps_in_every_output() -> None:
    """The window holds optimizer steps 11-50: 20 iterations, the first warm-up, the last cut by the window."""
    a = analysed("gan_dcgan")
    assert (a.steps.source, a.steps.each) == ("marks", ITERATION)
    assert 18 <= a.steps.count <= 19
    for render in (render_terminal, render_markdown, render_html, render_json):
        assert ITERATION in render(a).replace("\n", " "), render.__name__


def test_the_gan_s_five_reads_are_told_not_worth_fixing_as_their_paired_timing_says() -> None:
    """The fix of all five reads measured -0.14 ms an iteration (pairs -0.50 to +0.24 ms, of 5.3 ms): nothing.
    nsync prices the costliest at 0.03 ms (0.5 %), inside the measured range, and tells nothing worth fixing."""
    a = analysed("gan_dcgan")
    median_ms, low_ms, high_ms = paired_saving_ms("gan_dcgan")
    assert low_ms < 0 < high_ms and median_ms == pytest.approx(-0.14, abs=0.01)
    assert not a.verdict.worth_fixing
    assert low_ms < a.verdict.largest_saving_ms_per_step < high_ms


def test_a_loader_bound_loop_is_said_to_wait_for_data_and_its_fix_priced_as_measured() -> None:
    """The host waits for its DataLoader 61 % of a step: a data-loader notice, and the calibration run that the
    replay cannot explain waited for its data (not "a slower host"). The `loss.item()` fix measured 0.32 ms of
    32 ms in one process (pairs -1.6 to +7.9 ms): its predicted saving and range hold it, and nothing is worth
    fixing."""
    a = analysed("loader_bound")
    notice = next(w for w in a.warnings if w.code == "data-loader")
    assert "bound by data loading" in notice.message
    assert "waited longer for its DataLoader" in a.what_if.note and "host was slower" not in a.what_if.note
    median_ms, low_ms, high_ms = paired_saving_ms("loader_bound")
    assert median_ms == pytest.approx(0.32, abs=0.01)
    (read,) = [site for site in a.callsites if site.line == 56]
    assert read.predicted_saving_ms_per_step_low < median_ms < read.predicted_saving_ms_per_step_high
    assert low_ms < read.predicted_saving_ms_per_step < high_ms
    assert not a.verdict.worth_fixing


def test_the_per_batch_copy_is_told_to_pin_and_copy_non_blocking() -> None:
    (copy,) = [site for site in analysed("loader_bound").callsites if site.line == 50]
    told = render_terminal(analysed("loader_bound")).replace("\n", " ")
    assert copy.advice.pattern == "copy between host and device"
    assert "DataLoader(pin_memory=True)" in told and "non_blocking=True" in told


def test_a_llama_generate_capture_is_found_as_its_decode_steps() -> None:
    """Three requests of 128 new tokens: 384 forward passes (a prefill and 127 decode steps each). The sequence
    repeats best by the request (35,885 launches, its prefill with it); the tokens (280 launches) inside it cover
    more and repeat 0.989: they are the steps, within 10 % of the forward passes, each one new token, at the pace
    measured unprofiled (4.0-6.6 ms a token, llama-unprofiled.log) slowed by nsys."""
    a = nsync.analyze(FRESH12 / "hf_llama_generate.sqlite.xz", calibration=None)
    assert abs(a.steps.count - 384) <= 0.1 * 384
    assert a.steps.each == "one new token of generate()"
    assert 4.0 <= a.steps.median_ms <= 2.2 * 6.6
