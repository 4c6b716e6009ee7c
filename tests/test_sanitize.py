"""scripts/sanitize_trace.py, run as a real subprocess on real H200 exports: what it drops, nsync never reads."""

from __future__ import annotations

import lzma
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from nsync import analyze

ROOT = Path(__file__).resolve().parents[1]


def callchain_rows(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT count(*) FROM CUDA_CALLCHAINS").fetchone()[0]


def report_json(path: Path) -> dict:
    """The report as JSON, without what names the file."""
    report = analyze(path).to_dict()
    report.pop("trace", None)
    return report


@pytest.mark.slow
@pytest.mark.parametrize(
    ("export", "kept"),
    [
        # every CUDA call carries a native backtrace, and every call that may sync its Python frames: none is read
        # (the one fixture left as captured for this: the shrink gained it under 30 KB, device-capture.md)
        ("fresh/lightning_mlp", "none"),
        # its Python frames were not exported: the backtraces of the calls that may sync are its call sites
        ("h200/p2", "all"),
    ],
)
def test_shrink_drops_only_the_native_backtraces_nsync_never_reads(tmp_path: Path, export: str, kept: str):
    source = ROOT / "fixtures" / f"{export}.sqlite.xz"
    trace = tmp_path / source.name.removesuffix(".xz")
    trace.write_bytes(lzma.decompress(source.read_bytes()))
    calibration = source.with_name(source.name.replace(".sqlite.xz", ".calibration.json"))
    if calibration.exists():
        shutil.copy(calibration, tmp_path)
    before_rows, before = callchain_rows(trace), report_json(trace)
    argv = [sys.executable, str(ROOT / "scripts/sanitize_trace.py"), str(trace), "/no/such/capture/dir", "--shrink"]
    subprocess.run(argv, check=True, timeout=300, capture_output=True)
    assert before_rows > 0 and callchain_rows(trace) == (0 if kept == "none" else before_rows)
    assert report_json(trace) == before
