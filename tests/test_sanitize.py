"""scripts/sanitize_trace.py, run as a real subprocess on real H200 exports: what it drops, nsync never reads."""

from __future__ import annotations

import lzma
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
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


# a variable set to a path, at a string's start or after a NUL: how nsys keeps each process's environment
ENVIRONMENT_WITH_A_PATH = re.compile(r"(?:^|\x00)[A-Z_][A-Z0-9_]*=/")


def environment_strings(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [v for (v,) in conn.execute("SELECT value FROM StringIds") if ENVIRONMENT_WITH_A_PATH.search(str(v))]


@pytest.mark.slow
def test_every_environment_string_goes_nul_separated_or_not(tmp_path: Path) -> None:
    """A real H200 capture with this process's environment added as nsys writes it (one NUL-separated block
    beginning OLDPWD=, and variables alone): every one goes, and the report is the same."""
    source = ROOT / "fixtures/fresh11/lightning_mlp.sqlite.xz"
    trace = tmp_path / "capture.sqlite"
    trace.write_bytes(lzma.decompress(source.read_bytes()))
    before = report_json(trace)
    block = "\0".join(["OLDPWD=/home/someone/secret-project", *(f"{k}={v}" for k, v in os.environ.items())])
    with sqlite3.connect(trace) as conn:
        first = conn.execute("SELECT max(id) + 1 FROM StringIds").fetchone()[0]
        added = [block, "CUDA_HOME=/usr/local/cuda-13", "lowercase_proxy=http://x\0HOME=/root"]
        conn.executemany("INSERT INTO StringIds VALUES (?, ?)", list(enumerate(added, first)))
    assert len(environment_strings(trace)) == 3
    argv = [sys.executable, str(ROOT / "scripts/sanitize_trace.py"), str(trace), "/no/such/capture/dir"]
    subprocess.run(argv, check=True, timeout=300, capture_output=True)
    assert environment_strings(trace) == []
    with sqlite3.connect(trace) as conn:
        assert "secret-project" not in "".join(str(v) for (v,) in conn.execute("SELECT value FROM StringIds"))
    assert report_json(trace) == before


@pytest.mark.slow
def test_no_fixture_holds_an_environment_string() -> None:
    """Every committed capture, read whole: no variable set to a path survives in its strings."""
    leaking = []
    for source in sorted((ROOT / "fixtures").rglob("*.sqlite.xz")):
        with tempfile.NamedTemporaryFile(suffix=".sqlite") as trace:
            trace.write(lzma.decompress(source.read_bytes()))
            trace.flush()
            if environment_strings(Path(trace.name)):
                leaking.append(source.relative_to(ROOT).as_posix())
    assert leaking == []
