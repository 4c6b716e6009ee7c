"""A real nsys (Debian's nsight-systems 2022.4, no GPU needed) produces a trace nsync must handle."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

NSYS = shutil.which("nsys")
needs_nsys = pytest.mark.skipif(
    NSYS is None and not os.environ.get("CI"), reason="nsys not installed (make system-deps installs it)"
)


@pytest.mark.slow
@needs_nsys
def test_cpu_only_trace_from_real_nsys_reports_no_cuda_activity(cpu_only_export):
    nsync = Path(sys.executable).parent / "nsync"
    result = subprocess.run(
        [str(nsync), "analyze", str(cpu_only_export), "--json", "-"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["status"] == "no-cuda"
    assert data["trace"]["nsys_version"].startswith("2022.4")
    assert data["trace"]["export_schema_version"] == "3.0.0"
    assert any(w["code"] == "no-cuda" and "no CUDA activity in this trace" in w["message"] for w in data["warnings"])
    assert data["callsites"] == [] and data["totals"]["sync_count"] == 0
