"""How much of the point's error is the calibration run's? Scores the fresh sessions' fixes that paid beyond noise
(tests/ground_truth.py's cases) twice: calibrated as nsync is, and with the calibration's steps scaled so that
their median is the session's own timing runs' degraded median (an oracle calibration run, as fast as the runs
that measured the saving). Prints each case and both medians and means of the absolute error
(fixtures/h200/README.md, "The measured savings' own noise"). `python scripts/score-oracle-calibration.py`."""

import statistics
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nsync.analysis import run_stages
from nsync.load.calibration import beside, read_calibration
from tests.ground_truth import VECTORISED
from tests.test_fresh import NOT_KEPT, SESSIONS, timings

errors: dict[str, list[float]] = {"calibrated": [], "oracle": []}
for folder in SESSIONS:
    for name, (degraded_ms, saving_ms, beyond) in timings(folder).items():
        trace = folder / f"{name}.sqlite.xz"
        if not beyond or trace in NOT_KEPT:
            continue
        calibration = read_calibration(beside(trace))
        factor = degraded_ms * 1e6 / statistics.median(next(iter(calibration.intervals_ns.values())))
        oracle = replace(calibration, intervals_ns={k: v * factor for k, v in calibration.intervals_ns.items()})
        said = []
        for kind, given in (("calibrated", calibration), ("oracle", oracle)):
            what_if = run_stages(trace, calibration=given).what_if
            assert what_if is not None
            loop = name in VECTORISED and len(what_if.loops) == 1
            point = (what_if.loops[0].saving_ns if loop else what_if.all_syncs_saving_ns) / 1e6
            errors[kind].append(abs(point / saving_ms - 1))
            said.append(f"{kind} {point:.3f} ({100 * (point / saving_ms - 1):+.0f} %)")
        print(f"{folder.name}/{name}: measured {saving_ms:.3f}, " + ", ".join(said) + f", steps x{factor:.2f}")
for kind, values in errors.items():
    print(f"{kind}: {len(values)} cases, median {statistics.median(values):.1%}, mean {statistics.mean(values):.1%}")
