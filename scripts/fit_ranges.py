"""Fit the likely range and the verdict's cut-offs (nsync/knowledge/fitted.py) on the
tuning part of the ground truth, and score both parts (docs/accuracy.md, "How sure is a saving?").

    .venv/bin/python scripts/fit_ranges.py            # the fit, then the scores with the constants in the code
    .venv/bin/python scripts/fit_ranges.py --json F   # also every case's figures, as JSON

The range: the 10th and 90th percentiles of ln(measured / predicted) over the fixes that paid beyond noise, by
what the capture rests on (calibrated, or uncalibrated: no calibration, or one set aside). The cut-offs: the
pair (worth fixing, nothing) of chances that gives the fewest wrong verdicts by the rules below on the tuning
part, the more cautious pair on a tie. Runs in about two minutes on two cores."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nsync.knowledge import LOG_RATIO_QUANTILES, NOTHING_CHANCE, WORTH_FIXING_CHANCE
from tests.ground_truth import Scored, cases, fitted_cut_offs, fitted_quantiles, score_case, wrong


def report(part: str, scored: list[Scored]) -> None:
    for calibrated in (True, False):
        basis = "calibrated" if calibrated else "uncalibrated"
        paid = [s for s in scored if s.calibrated == calibrated and s.beyond_noise and s.point_ms > 0]
        if not paid:
            continue
        inside = sum(s.low_ms <= s.measured_ms <= s.high_ms for s in paid)
        width = statistics.median(s.high_ms / s.low_ms for s in paid)
        error = statistics.median(abs(s.point_ms / s.measured_ms - 1) for s in paid)
        share = f"{inside}/{len(paid)} ({100 * inside / len(paid):.0f} %)"
        print(f"{part:9} {basis:12} {len(paid):3} fixes: inside {share}, median width {width:.2f}, "
              f"median point error {100 * error:.0f} %")  # fmt: skip
    for calibrated in (True, False):
        mine = [s for s in scored if s.calibrated == calibrated]
        bad = [(s.case, wrong(s, s.verdict)) for s in mine if wrong(s, s.verdict)]
        print(f"{part:9} {'calibrated' if calibrated else 'uncalibrated':12} verdicts wrong: {len(bad)} of {len(mine)}"
              + "".join(f"\n              {case}: {why}" for case, why in bad))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="write every case's figures here")
    args = parser.parse_args()
    with ProcessPoolExecutor(2) as pool:
        scored = [s for found in pool.map(score_case, cases()) for s in found]
    tuning = [s for s in scored if not s.held_out]
    print(f"fitted on the tuning part: LOG_RATIO_QUANTILES = {fitted_quantiles(tuning)}")
    print(f"  in the code:                 LOG_RATIO_QUANTILES = {LOG_RATIO_QUANTILES}")
    best = fitted_cut_offs(tuning)
    worth, nothing = sorted({w for w, _ in best}), sorted({n for _, n in best})
    print(f"cut-offs with the fewest wrong verdicts: worth fixing {worth[0]}-{worth[-1]}, nothing {nothing[0]}-"
          f"{nothing[-1]} ({len(best)} pairs); in the code: ({WORTH_FIXING_CHANCE}, {NOTHING_CHANCE}), "
          f"{'among them' if (WORTH_FIXING_CHANCE, NOTHING_CHANCE) in best else 'NOT among them'}")  # fmt: skip
    report("tuning", tuning)
    report("held out", [s for s in scored if s.held_out and not s.case.startswith("fresh11/")])
    report("fresh11", [s for s in scored if s.case.startswith("fresh11/")])  # captured after the fit
    if args.json:
        args.json.write_text(json.dumps([asdict(s) for s in scored], indent=1))


if __name__ == "__main__":
    main()
