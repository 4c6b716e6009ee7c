"""Tried, not adopted (fixtures/h200/README.md, "Each call's profiler time taken off"): score issue 26's 48 kept
cases, calibrated, with CALL_OVERHEAD_NS of each CUDA call's time taken off the host's time before the host
scale is fitted. `python scripts/score-call-overhead.py 4000` prints the median and mean absolute error and how
many measured savings lie inside their range, and writes each case to /tmp/call-overhead-NS.json."""

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import nsync.calibration
from tests import test_intervals

overhead_ns = float(sys.argv[1])
nsync.calibration.Calibration.call_overhead_ns = property(lambda _self: overhead_ns)  # type: ignore[assignment,method-assign]
cases = {
    name: {"measured": measured, "point": point, "low": low, "high": high, "error": (point - measured) / measured}
    for name, (measured, (point, low, high)) in test_intervals.held_out(True).items()
}
errors = [abs(case["error"]) for case in cases.values()]
inside = sum(case["low"] <= case["measured"] <= case["high"] for case in cases.values())
print(
    f"overhead {overhead_ns:.0f} ns a call: {len(cases)} cases, median error {statistics.median(errors):.1%}, "
    f"mean {statistics.mean(errors):.1%}, {inside} inside their range"
)
Path(f"/tmp/call-overhead-{overhead_ns:.0f}.json").write_text(json.dumps(cases, indent=1))
