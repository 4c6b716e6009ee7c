"""Captures of `nsync profile`'s default window on the H200, of programs nobody here tuned on
(fixtures/fresh/README.md): nsys 2025.3 times such a capture's rows from the capture's own start."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from nsync import AnalysisConfig, analyze
from nsync.analysis import Analysis
from nsync.calibration import beside, read_calibration
from tests.conftest import FIXTURES

FRESH = FIXTURES / "fresh"
# by construction of the programs: the line of each degraded sync, and how many a step
SYNCS = {"hf_bert_hooks": {26: 8}, "timm_convnext": {30: 1, 31: 1}}
CAPTURED_STEPS = 40  # optimizer steps 11-50: nsync profile's default window


@functools.cache
def fresh(name: str) -> Analysis:
    trace = FRESH / f"{name}.sqlite.xz"
    return analyze(trace, calibration=read_calibration(beside(trace)))


@pytest.mark.parametrize("name", sorted(SYNCS))
def test_a_window_capture_keeps_every_row_and_finds_the_captured_steps(name: str):
    a = fresh(name)
    assert not [w for w in a.warnings if "set aside" in w]
    assert a.steps.source == "marks"
    assert CAPTURED_STEPS - 2 <= a.steps.count <= CAPTURED_STEPS  # the first is warm-up; the last may be cut
    main = a.callsites.loc[a.callsites["file"].map(lambda f: Path(f).name) == f"{name}.py"]
    per_step = dict(zip(main["line"], main["syncs_per_step"].round(2)))
    assert per_step == SYNCS[name]


@pytest.mark.parametrize("name", sorted(SYNCS))
def test_nothing_is_worth_fixing_where_the_fix_measured_nothing(name: str):
    """The README's ab timings: neither fix saves time beyond the noise."""
    assert not fresh(name).verdict.worth_fixing


def test_a_part_of_a_window_capture_is_read_in_seconds_from_the_capture_s_start():
    trace = FRESH / "hf_bert_hooks.sqlite.xz"
    part = analyze(trace, AnalysisConfig(window_s=(0.5, 1.0)))
    assert 10 <= part.steps.count <= 16  # about 0.5 s of steps of 36.8 ms under nsys


def test_rows_timed_from_a_range_started_capture_are_kept_even_where_they_overlap_the_session_span(tmp_path):
    """A capture started by a range 12 ms into its session and 20 ms long, its rows timed from its own start
    (10-15 ms): some lie before the session's start time, all inside the capture's own [0, 20 ms]."""
    from tests.tracebuilder import TraceBuilder

    b = TraceBuilder()
    for i in range(5):  # (the builder's times are in µs)
        t0 = 10_000 + i * 1000
        b.nvtx_range(1, "step", t0, t0 + 999)
        b.kernel(1, t0, t0 + 10, t0 + 600, name="matmul")
        b.stream_sync(1, t0 + 100, t0 + 612)
    b.rows["ANALYSIS_DETAILS"] = [
        {"globalVid": 0, "duration": 20_000_000, "startTime": 12_000_000, "stopTime": 32_000_000}
    ]
    a = analyze(b.write(tmp_path / "late.sqlite"))
    assert not [w for w in a.warnings if "set aside" in w]
    assert a.phases["sync_count"].sum() == 5 and a.steps.count == 4  # every sync; every step, the first warm-up


def test_the_readme_table_is_what_the_raw_timings_give():
    """fixtures/fresh/README.md's table, recomputed from ab-timings.log (medians of the blocks, of the pairs'
    savings, their quartiles, and 'beyond noise' when the quartiles exclude 0)."""
    import json
    import re
    import statistics

    rows = re.findall(r"^\| (\w+) \| 1 \| 7 \| ([\d.]+) \| ([\d.]+) \| (-?[\d.]+) \| (-?[\d.]+) to (-?[\d.]+) \|"
                      r" (\d)/7 \| (yes|no) \|$", (FRESH / "README.md").read_text(), re.M)  # fmt: skip
    logged = {}
    for line in (FRESH / "ab-timings.log").read_text().splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line.removeprefix("RESULT "))
            logged[result["program"]] = result
    assert [row[0] for row in rows] == list(logged)
    for name, degraded, healthy, saving, low, high, pairs, beyond in rows:
        d, h = logged[name]["degraded_ms"], logged[name]["healthy_ms"]
        savings = [a - b for a, b in zip(d, h)]
        quartiles = statistics.quantiles(savings, n=4)
        computed = [statistics.median(d), statistics.median(h), statistics.median(savings), *quartiles[::2]]
        assert [degraded, healthy, saving, low, high] == [f"{value:.3f}" for value in computed]
        assert int(pairs) == sum(s > 0 for s in savings)
        assert (beyond == "yes") == (quartiles[0] > 0 or quartiles[2] < 0)
