"""The real entry points, run as subprocesses: outputs, exit codes, and one-line errors on bad input."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.tracebuilder import TraceBuilder

ROOT = Path(__file__).resolve().parent.parent
NSYNC = [str(Path(sys.executable).parent / "nsync")]
PY_M = [sys.executable, "-m", "nsync"]


def run(*args: object, entry: list[str] = NSYNC) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*entry, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200", "HOME": "/tmp"},
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], code: int, fragment: str) -> None:
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.strip().splitlines()
    # the error is one line, the last; before it only nsync's own notes and warnings on the trace (stderr)
    assert lines and lines[-1].startswith("nsync: error: "), result.stderr
    assert all(line.startswith(("nsync: warning: ", "nsync: note: ", "nsync: calibrated by ")) for line in lines[:-1])
    assert fragment in lines[-1]


@pytest.mark.slow
@pytest.mark.parametrize("entry", [NSYNC, PY_M])
def test_help_runs_from_both_entry_points(entry):
    result = run("analyze", "--help", entry=entry)
    assert result.returncode == 0
    assert "Examples" in result.stdout and "--json" in result.stdout


@pytest.mark.slow
def test_analyze_print_deg_json_contract(tmp_path):
    out = tmp_path / "r.json"
    result = run("analyze", ROOT / "fixtures/h200/print_deg.sqlite.xz", "--json", out, "--top", "5")
    assert result.returncode == 0, result.stderr
    assert "w_print.py:19" in result.stdout
    data = json.loads(out.read_text())
    assert data["schema"] == "nsync.analysis/2"
    assert set(data["trace"]) >= {"path", "nsys_version", "export_schema_version"}
    assert data["trace"]["nsys_version"] == "2025.3.2.0" and data["trace"]["export_schema_version"] == "3.20.3"
    assert set(data["steps"]) >= {"count", "median_ms", "source"}
    assert set(data["totals"]) >= {"span_ms", "gpu_idle_ms", "exposed_idle_ms", "host_wait_ms", "sync_count"}
    site = data["callsites"][0]
    assert set(site) >= {
        "file",
        "line",
        "function",
        "count",
        "syncs_per_step",
        "exposed_idle_ms",
        "exposed_idle_ms_per_step",
        "host_wait_ms",
        "lead_before_ms_mean",
        "apis",
        "stack",
        "callsite_source",
        "hint",
    }
    assert (site["file"].endswith("w_print.py"), site["line"], site["function"]) == (True, 19, "step")
    exposed = [c["exposed_idle_ms"] for c in data["callsites"]]
    assert exposed == sorted(exposed, reverse=True)
    assert site["stack"][5] == {"function": "step", "file": "/home/user/proj/w_print.py", "line": 19}
    assert site["predicted_saving_ms_per_step"] == pytest.approx(0.39, rel=0.3)
    assert data["totals"]["predicted_step_ms_without_syncs"] == pytest.approx(2.83, rel=0.15)
    assert data["what_if"]["host_scale"] == 0.6


@pytest.mark.slow
def test_json_to_stdout(tmp_path):
    result = run("analyze", ROOT / "fixtures/h200/p4.sqlite.xz", "--json", "-")
    assert result.returncode == 0
    assert len(json.loads(result.stdout)["callsites"]) == 6


@pytest.mark.slow
def test_not_sqlite(tmp_path):
    bad = tmp_path / "notes.sqlite"
    bad.write_text("hello, I am text\n" * 20)
    assert_one_line_error(run("analyze", bad), 1, "not a SQLite file")


@pytest.mark.slow
def test_empty_file(tmp_path):
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    assert_one_line_error(run("analyze", empty), 1, "not a SQLite file")


@pytest.mark.slow
def test_sqlite_that_is_not_an_nsys_export(tmp_path):
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE users (name TEXT)")
    assert_one_line_error(run("analyze", other), 1, "not an nsys export")


@pytest.mark.slow
def test_truncated_export(tmp_path, h200):
    cut = tmp_path / "cut.sqlite"
    data = h200("print_ok").read_bytes()
    cut.write_bytes(data[: len(data) * 2 // 5])
    assert_one_line_error(run("analyze", cut), 1, "damaged or truncated")


@pytest.mark.slow
def test_corrupt_xz(tmp_path):
    bad = tmp_path / "bad.sqlite.xz"
    bad.write_bytes(b"\xfd7zXZ\x00garbage" * 10)
    assert_one_line_error(run("analyze", bad), 1, "not a valid .xz file")


@pytest.mark.slow
def test_damaged_nsys_report_is_an_nsys_error(tmp_path):
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"\x00" * 200)
    assert_one_line_error(run("analyze", rep), 4, "nsys export failed")


@pytest.mark.slow
def test_missing_file_is_a_usage_error_and_creates_nothing(tmp_path):
    missing = tmp_path / "nope.sqlite"
    assert_one_line_error(run("analyze", missing), 2, "no such file")
    assert not missing.exists()


@pytest.mark.slow
def test_unknown_step_range_is_a_usage_error():
    result = run("analyze", ROOT / "fixtures/h200/p4.sqlite.xz", "--step-range", "epoch")
    assert_one_line_error(result, 2, "no NVTX range named 'epoch'")


def test_unwritable_json_path(tmp_path):
    result = run("analyze", ROOT / "fixtures/h200/p4.sqlite.xz", "--json", tmp_path / "no/such/dir/r.json")
    assert_one_line_error(result, 2, "cannot write there, no such folder")


def test_a_path_the_file_system_refuses_is_said_before_the_analysis(tmp_path):
    """issue 64: /proc exists and root may write into it as far as os.access says, but no file can be made there:
    rc 2 and one line at once, nothing printed before it; the try leaves no file behind where one can be made."""
    result = run("analyze", ROOT / "fixtures/h200/p4.sqlite.xz", "--json", "/proc/nsync-out.json")
    assert_one_line_error(result, 2, "--json /proc/nsync-out.json: cannot write there")
    assert result.stdout == ""
    bad, kept = tmp_path / "bad.sqlite", tmp_path / "r.md"
    bad.write_text("not a trace")
    refused = run("analyze", bad, "--markdown", kept)
    assert refused.returncode == 1 and "not a SQLite file" in refused.stderr
    assert not kept.exists()


@pytest.mark.slow
def test_trace_with_api_calls_but_no_gpu_work(tmp_path):
    b = TraceBuilder()
    b.api(1, "cudaGetDeviceProperties_v12000", 0, 5)
    b.api(1, "cudaStreamSynchronize_v3020", 10, 12)
    result = run("analyze", b.write(tmp_path / "nogpu.sqlite"), "--json", "-")
    assert result.returncode == 0
    data = json.loads(result.stdout)
    assert data["status"] == "no-gpu-work" and data["callsites"] == []
    assert any(w["code"] == "no-cuda" and "no GPU work" in w["message"] for w in data["warnings"])


@pytest.mark.slow
def test_2022_4_export_without_python_frames_warns_and_still_ranks(tmp_path):
    b = TraceBuilder(schema="2022.4")
    b.kernel(1, 0, 10, 1010, name="k1")
    b.stream_sync(1, 20, 1015)
    b.kernel(1, 1100, 1110, 3000, name="k2")
    result = run("analyze", b.write(tmp_path / "old.sqlite"), "--json", "-")
    assert result.returncode == 0
    data = json.loads(result.stdout)
    assert data["trace"]["nsys_version"] == "2022.4.2.1"
    assert data["callsites"][0]["callsite_source"] == "none"
    assert data["callsites"][0]["exposed_idle_ms"] == pytest.approx(0.094)
    assert any(
        w["code"] == "python-frames" and "cannot record Python backtraces" in w["message"] for w in data["warnings"]
    )


@pytest.mark.slow
def test_missing_tables_and_a_future_schema_still_analyse(tmp_path):
    b = TraceBuilder()
    b.kernel(1, 0, 10, 1010, name="k1")
    b.stream_sync(1, 20, 1015)
    b.kernel(1, 1100, 1110, 3000, name="k2")
    path = b.write(tmp_path / "future.sqlite", tables=("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL"))
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE META_DATA_EXPORT SET value = '4.2.0' WHERE name = 'EXPORT_SCHEMA_VERSION'")
        conn.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL ADD COLUMN someFutureColumn INTEGER")
    result = run("analyze", path, "--json", "-")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["totals"]["sync_count"] == 1
    assert any(w["code"] == "export-version" and "newer than" in w["message"] for w in data["warnings"])


@pytest.mark.slow
def test_hostile_names_print_literally_in_the_terminal(tmp_path):
    b = TraceBuilder()
    b.kernel(1, 0, 10, 1010, name="k1")
    corr = b.stream_sync(1, 20, 1015)
    b.python_stack(1, corr, [("[bold red]boom[/]", "/home/u/[link=x]evil.py", 3)])
    b.kernel(1, 1100, 1110, 3000, name="k2")
    result = run("analyze", b.write(tmp_path / "evil.sqlite"))
    assert result.returncode == 0, result.stderr
    assert "[bold red]boom[/]" in result.stdout
    assert "evil.py:3" in result.stdout


@pytest.mark.slow
def test_trace_is_opened_read_only(tmp_path, h200):
    copy = tmp_path / "ro.sqlite"
    shutil.copy(h200("p4"), copy)
    copy.chmod(0o444)
    before = copy.read_bytes()
    assert run("analyze", copy).returncode == 0
    assert copy.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ro.sqlite"]  # no -journal, -wal or -shm left


@pytest.mark.parametrize("command", ["", "analyze", "profile", "diff", "ranks", "measure"])
def test_help_reads_at_80_columns_with_examples(command: str) -> None:
    """Piped or narrow, typer's boxes cut option names ('--fail-on-regress…'), showed '<int range>' and
    '<bool>', broke the command list mid-sentence and gave no example."""
    args = [command, "--help"] if command else ["--help"]
    done = subprocess.run(
        [*NSYNC, *args], capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "COLUMNS": "80"}
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(map(len, lines)) <= 80
    assert not re.search(r"<[a-z]|…|[╭│]|\.\.\.$", done.stdout), done.stdout
    if command:
        assert "Examples:" in done.stdout
        shown = [line.strip() for line in lines[lines.index("  Examples:") + 1 :] if line.strip()]
        assert shown and all(example.startswith(f"nsync {command} ") for example in shown)
    else:
        assert all(f"  {name}  " in done.stdout for name in ("analyze", "profile", "diff", "ranks", "measure"))


def test_a_closed_pipe_after_the_first_line_of_help_exits_0() -> None:
    for args in (["--help"], ["profile", "--help"]):
        shell = subprocess.run(
            ["bash", "-c", f"{NSYNC[0]} {' '.join(args)} | head -1 >/dev/null; echo ${{PIPESTATUS[0]}}"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert shell.stdout.strip() == "0"


@pytest.mark.slow
@pytest.mark.parametrize("command", [["analyze", "nosuch.sqlite"], ["diff", "nosuch.sqlite", "other.sqlite"]])
def test_a_missing_trace_is_said_before_pandas_loads(tmp_path, command):
    """issue 47: `nsync analyze nosuch.sqlite` took a second, pandas and pyarrow imported before the path was
    looked at."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "nsync", *command], capture_output=True, text=True, cwd=tmp_path,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == "nsync: error: nosuch.sqlite: no such file"
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "pandas" not in imported and "pyarrow" not in imported
