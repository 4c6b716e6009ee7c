"""``--db``: every sync with its figures, and the call sites, in a SQLite database of nsync's own."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
import sqlite_utils

from tests.test_attribute import base
from tests.test_cli import ROOT, assert_one_line_error, run
from tests.tracebuilder import TraceBuilder, ns


@pytest.mark.slow
def test_each_sync_lands_with_its_known_figures(tmp_path: Path) -> None:
    b = TraceBuilder()
    base(b)  # one stream sync: wait 1095 µs, lead 1090, drain 1110, rebuild 1304, exposed 184 (test_attribute)
    trace = b.write(tmp_path / "t.sqlite")
    result = run("analyze", trace, "--db", tmp_path / "r.db")
    assert result.returncode == 0, result.stderr
    db = sqlite_utils.Database(tmp_path / "r.db")
    (sync,) = db["syncs"].rows
    assert {k: sync[k] for k in ("host_wait_ns", "lead_before_ns", "exposed_idle_ns", "kind", "stream_id")} == {
        "host_wait_ns": ns(1095),
        "lead_before_ns": ns(1090),
        "exposed_idle_ns": ns(184),
        "kind": "stream-sync",
        "stream_id": 7,
    }
    assert sync["drain_ns"] - sync["start_ns"] == ns(1110 - 20) and sync["rebuild_ns"] - sync["start_ns"] == ns(1284)
    (site,) = db["callsites"].rows
    assert site["count"] == 1 and site["exposed_idle_ns"] == ns(184)
    assert dict(db.execute("SELECT key, value FROM nsync_meta").fetchall())["trace_path"].endswith("t.sqlite")
    indexed = {tuple(i.columns) for i in db["syncs"].indexes}
    assert {("callsite_file", "callsite_line"), ("step",), ("kind",)} <= indexed


@pytest.mark.slow
def test_a_real_trace_keeps_every_sync_of_its_call_sites(tmp_path: Path) -> None:
    out = tmp_path / "r.db"
    assert run("analyze", ROOT / "fixtures/h200/print_deg.sqlite.xz", "--db", out).returncode == 0
    db = sqlite_utils.Database(out)
    per_site = db.execute(
        "SELECT callsite_line, sync_frame_file, count(*), sum(exposed_idle_ns) FROM syncs GROUP BY 1, 2"
    ).fetchall()
    (site,) = db["callsites"].rows
    # one print per step: eight syncs from torch's tensor formatting, issued at w_print.py:19
    assert [(line, Path(frame).name, n) for line, frame, n, _ in per_site] == [(19, "w_print.py", site["count"])]
    assert per_site[0][3] == site["exposed_idle_ns"]
    assert db.execute("SELECT count(DISTINCT step) FROM syncs").fetchone()[0] == 59  # one print in every step
    # written again: replaced, not appended
    assert run("analyze", ROOT / "fixtures/h200/print_deg.sqlite.xz", "--db", out).returncode == 0
    assert db["syncs"].count == site["count"]


@pytest.mark.slow
def test_the_trace_and_foreign_databases_are_never_written(tmp_path: Path, h200) -> None:
    trace = tmp_path / "p4.sqlite"
    shutil.copy(h200("p4"), trace)
    before = trace.read_bytes()
    assert_one_line_error(run("analyze", trace, "--db", trace), 2, "nsync never writes into a trace")
    other = tmp_path / "other.sqlite"
    shutil.copy(h200("print_ok"), other)
    assert_one_line_error(run("analyze", trace, "--db", other), 2, "is an nsys export")
    mine = tmp_path / "mine.db"
    with sqlite3.connect(mine) as conn:
        conn.execute("CREATE TABLE notes (x)")
    assert_one_line_error(run("analyze", trace, "--db", mine), 2, "nsync did not write")
    assert trace.read_bytes() == before


@pytest.mark.slow
def test_output_paths_are_checked_before_the_analysis_and_one_failure_spares_the_others(tmp_path: Path) -> None:
    trace = ROOT / "fixtures/h200/p4.sqlite.xz"
    result = run("analyze", trace, "--html", tmp_path / "nope" / "r.html", "--json", tmp_path / "r.json")
    assert_one_line_error(result, 2, "--html")
    assert not (tmp_path / "r.json").exists()  # refused before anything ran
    assert_one_line_error(run("analyze", trace, "--markdown", tmp_path), 2, "is a folder")
    # a file that goes bad while writing (a read-only file we own cannot be refused up front as root): /dev/full
    result = run("analyze", trace, "--markdown", "/dev/full", "--json", tmp_path / "r.json")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith("nsync: error: cannot write /dev/full")
    assert (tmp_path / "r.json").is_file()


@pytest.mark.slow
def test_the_database_numbers_steps_as_the_json_and_the_trace_do(tmp_path: Path, h200) -> None:
    """Step N is the N-th 'step' NVTX range of the trace (from 1, the warm-up included), in the database as in
    the JSON's per_step (before, the database counted 0-58 where the JSON and the HTML said 2-60)."""
    out, result = tmp_path / "r.db", tmp_path / "r.json"
    done = run("analyze", ROOT / "fixtures/h200/print_deg.sqlite.xz", "--db", out, "--json", result)
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(h200("print_deg")) as trace:
        ranges = trace.execute(
            "SELECT e.start, e.end FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
            "WHERE coalesce(e.text, s.value) = 'step' ORDER BY e.start"
        ).fetchall()
    db = sqlite_utils.Database(out)
    rows = db.execute("SELECT step, min(start_ns), max(end_ns), sum(exposed_idle_ns) FROM syncs GROUP BY step")
    by_step = {step: (first, last, exposed) for step, first, last, exposed in rows.fetchall()}
    assert sorted(by_step) == list(range(2, 61))
    for step, (first, last, _) in by_step.items():
        start, end = ranges[step - 1]
        assert start <= first and last <= end  # the syncs of step N lie in the trace's N-th step range
    per_step = json.loads(result.read_text())["per_step"]
    worst = max(by_step, key=lambda step: by_step[step][2])
    assert worst == per_step["number"][per_step["exposed_idle_ns"].index(max(per_step["exposed_idle_ns"]))]
