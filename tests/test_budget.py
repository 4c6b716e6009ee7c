"""Traces bigger than memory: a planned time window and a warning instead of an out-of-memory kill."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from nsync import AnalysisConfig
from nsync.analysis import run_stages
from nsync.cli.options import parse_size
from nsync.errors import NsyncError, UsageError
from nsync.load.nsys import budget
from tests.test_cli import assert_one_line_error, run


def _span_and_rows(path: Path) -> tuple[tuple[int, int], int]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        span = conn.execute("SELECT min(startTime), max(stopTime) FROM ANALYSIS_DETAILS").fetchone()
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        rows = sum(
            conn.execute(f'SELECT max(rowid) FROM "{t}"').fetchone()[0] or 0 for t in budget.BIG_TABLES if t in tables
        )
    return span, rows


def _steps_starting_in(path: Path, start: int, stop: int) -> int:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return conn.execute(
            "SELECT count(*) FROM NVTX_EVENTS AS e LEFT JOIN StringIds AS s ON s.id = e.textId "
            "WHERE COALESCE(e.text, s.value) = 'step' AND e.eventType = 59 AND e.end IS NOT NULL "
            "AND e.start >= ? AND e.start < ?",
            (start, stop),
        ).fetchone()[0]


def test_a_trace_over_the_budget_is_analysed_for_the_part_that_fits(h200: Callable[[str], Path]) -> None:
    path = h200("print_deg")
    span, rows = _span_and_rows(path)
    # a budget under which exactly 75 % of the capture's time fits, by the planner's own cost model
    usable = budget.BASE_BYTES + 0.75 * budget.BYTES_PER_ROW * rows
    allowed = int(usable / budget.SAFETY) + 1
    cut_end = span[0] + int((span[1] - span[0]) * 0.75)
    expected_steps = _steps_starting_in(path, span[0], cut_end)
    assert 0 < expected_steps < _steps_starting_in(path, span[0], span[1])  # the cut really drops steps

    result = run_stages(path, AnalysisConfig(max_memory_bytes=allowed))

    assert len(result.steps.table) == expected_steps
    assert result.warnings[0].code == "trace-cut" and result.warnings[0].message.startswith("this trace needs about")
    assert "AnalysisConfig.window_s" in result.warnings[0].message  # the API the library was called through
    assert int(result.syncs["start"].max()) < cut_end


def test_a_chosen_window_reads_only_what_starts_in_it(h200: Callable[[str], Path]) -> None:
    path = h200("print_deg")
    span, _rows = _span_and_rows(path)
    start_s, end_s = 3.5, 3.8  # seconds from the capture's start: the middle of the stepping
    start, stop = span[0] + int(start_s * 1e9), span[0] + int(end_s * 1e9)

    result = run_stages(path, AnalysisConfig(window_s=(start_s, end_s)))

    assert len(result.steps.table) == _steps_starting_in(path, start, stop) > 0
    assert result.syncs["start"].between(start, stop).all()
    assert not any(w.code == "trace-cut" for w in result.warnings)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("800M", 800 << 20), ("2G", 2 << 30), ("1.5GiB", int(1.5 * (1 << 30))), ("4096", 4096), ("64kb", 64 << 10)],
)
def test_sizes_parse(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["lots", "", "-1G", "0"])
def test_bad_sizes_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError):
        parse_size(text)


def test_a_budget_below_the_interpreter_is_refused(h200: Callable[[str], Path]) -> None:
    with pytest.raises(NsyncError, match="before it reads any trace"):
        run_stages(h200("print_deg"), AnalysisConfig(max_memory_bytes=50 << 20))


@pytest.mark.slow
def test_cli_window_and_memory_options(h200: Callable[[str], Path], tmp_path: Path) -> None:
    path = h200("print_deg")
    out = tmp_path / "w.json"
    result = run("analyze", path, "--window", "3.5:3.8", "--json", out)
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())
    assert report["config"]["window_s"] == [3.5, 3.8]
    span, _rows = _span_and_rows(path)
    assert report["steps"]["total"] == _steps_starting_in(path, span[0] + int(3.5e9), span[0] + int(3.8e9))
    assert_one_line_error(run("analyze", path, "--window", "3:2"), 2, "--window")
    assert_one_line_error(run("analyze", path, "--window", "soon"), 2, "--window")
    assert_one_line_error(run("analyze", path, "--max-memory", "lots"), 2, "--max-memory")
    # too little to read anything: the user's own limit, a usage error (rc 2; issue 64: it was 1)
    assert_one_line_error(run("analyze", path, "--max-memory", "20M"), 2, "(--max-memory): nsync needs about")
