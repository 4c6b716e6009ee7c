"""Every measured fix of the fixtures, as one list: what it saved unprofiled on the H200 (the fixtures' READMEs),
whether beyond noise, the capture it is scored on, and which part of the ground truth it belongs to: the tuning
part (the likely range and the verdict's cut-offs were fitted on it: scripts/fit_ranges.py) or the held-out
part (the sessions captured after fresh5, and fresh11, captured after the fit)."""

from __future__ import annotations

import functools
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nsync.load.calibration import beside, read_calibration
from nsync.stages.replay.likely import COVERAGE
from nsync.stages.report import StageOutputs
from tests.conftest import FIXTURES
from tests.test_calibration_lab import measured as lab_measured
from tests.test_fresh import NOT_KEPT, SESSIONS, logged_runs
from tests.test_fresh import timings as fresh_measured
from tests.test_real_programs import measured as real_measured

# the programs whose fix does a loop's work for all its items at once (by construction: their 'healthy' mode):
# their fix is priced by the loop's saving, the others' by the fix the verdict names (or every sync of the step)
VECTORISED = {"timm_perclass", "hf_gpt2_perseq", "w_param", "tv_seg_iou", "timm_conf_log", "hf_bert_tokacc",
              "pyg_pergraph", "timm_gradnorm_foreach"}  # fmt: skip
# the programs whose fix removes several call sites' syncs at once, by construction: priced by that fix's scope
SCOPED = {"timm_log_line": "statement", "tm_validate": "setting"}
# the sessions the likely range and the verdict were fitted on; the later ones are held out
TUNING_SESSIONS = {"fresh", "fresh2", "fresh3", "fresh4", "fresh5"}
# programs whose fix paid beyond noise in some session: a session where it did not is noise, not a null
PAID_SOMEWHERE = {"w_tuple", "hf_tok_tqdm", "hf_gpt2_perseq", "timm_conf_log"}


@dataclass(frozen=True)
class Case:
    """One measured fix: ``name`` "set/program", the saving in ms (the median of its runs' or pairs' savings),
    whether it is beyond the noise, the degraded step it was measured on (ms; None where the README gives
    none), the capture scored, and whether it was held out from the fit."""

    name: str
    saving_ms: float
    beyond_noise: bool
    step_ms: float | None
    trace: Path
    held_out: bool

    @property
    def program(self) -> str:
        return self.name.split("/")[1].split(" ")[0]

    @property
    def vectorised(self) -> bool:
        return self.program.removesuffix("_degraded") in VECTORISED or self.name.endswith("(foreach)")

    @property
    def true_null(self) -> bool:
        """Nothing beyond noise, here or in any session of the same program."""
        return not self.beyond_noise and self.program not in PAID_SOMEWHERE


def cases() -> list[Case]:
    """Every measured fix with a capture kept, in the fixtures' order."""
    found = []
    for folder in ("cal", "cal-pinned"):
        for name, (saving, beyond) in lab_measured(folder).items():
            trace = FIXTURES / f"h200/{folder}/{name}_degraded.sqlite.xz"
            found.append(Case(f"{folder}/{name}", saving, beyond, None, trace, held_out=False))
    for program in ("compiled_train", "timm_gradnorm", "resnet_train", "hf_trainer"):
        step, saving, beyond = real_measured(program)
        found.append(Case(f"real/{program}", saving, beyond, step, FIXTURES / f"real/{program}.sqlite.xz", False))
    found.append(Case("reads/w_reads", 1.697, True, None, FIXTURES / "h200/reads/w_reads_degraded.sqlite.xz", False))
    for pair in ("1", "2"):  # the hidden .item(): 6.280 -> 6.771 ms, five separate runs a mode
        trace = FIXTURES / f"h200/hidden/{pair}/w_hidden_degraded.sqlite.xz"
        found.append(Case(f"hidden/{pair}", 6.771 - 6.280, True, 6.771, trace, held_out=False))
    for folder in SESSIONS:
        for name, (step, saving, beyond) in fresh_measured(folder).items():
            trace = folder / f"{name}.sqlite.xz"
            if trace not in NOT_KEPT:
                held = folder.name not in TUNING_SESSIONS
                found.append(Case(f"{folder.name}/{name}", saving, beyond, step, trace, held))
    # timm_gradnorm's capture, its loop done at once (torch._foreach_norm), timed in fresh6's session: 3.237 ms
    runs = logged_runs(FIXTURES / "fresh6/ab-real-timings.log")["timm_gradnorm_foreach"]
    saving = statistics.median(a - b for run in runs for a, b in zip(run["degraded_ms"], run["healthy_ms"]))
    found.append(Case("real/timm_gradnorm (foreach)", saving, True, None, FIXTURES / "real/timm_gradnorm.sqlite.xz",
                      held_out=True))  # fmt: skip
    return found


# where the programs' sources are, as a user would pass them (--source-dir): the sessions' programs are kept
# once, in fixtures/fresh; the lab's in fixtures/h200; the real programs' beside their captures
PROGRAMS = [FIXTURES / "fresh", FIXTURES / "h200"]


@functools.cache
def analysed(trace: Path, calibrated: bool) -> StageOutputs:
    from nsync.analysis import run_stages

    calibration = read_calibration(beside(trace)) if calibrated else None
    return run_stages(trace, calibration=calibration, source_dirs=PROGRAMS)


def predicted(case: Case, calibrated: bool) -> tuple[float, float, float] | None:
    """What nsync predicts the case's fix saves, ms: (point, the likely range's low and high ends): a loop's saving
    where the fix does the loop at once, the scope's where it removes several sites (SCOPED), else every sync of
    the step fixed; None without a what-if."""
    found = analysed(case.trace, calibrated)
    what_if = found.what_if
    if what_if is None:
        return None
    scoped = [k for k, scope in enumerate(found.fix_scopes) if scope.kind == SCOPED.get(case.program)]
    if scoped:
        k = len(found.read_groups) + scoped[0]
        low, high = what_if.group_range_ns[k]
        return what_if.group_saving_ns[k] / 1e6, low / 1e6, high / 1e6
    if case.vectorised and len(what_if.loops) == 1:
        (loop,) = what_if.loops
        return loop.saving_ns / 1e6, loop.range_ns[0] / 1e6, loop.range_ns[1] / 1e6
    low, high = what_if.all_syncs_range_ns
    return what_if.all_syncs_saving_ns / 1e6, low / 1e6, high / 1e6


@dataclass(frozen=True)
class Scored:
    """One case under one analysis: the measured and predicted savings (ms), the basis, the verdict."""

    case: str
    calibrated: bool
    held_out: bool
    beyond_noise: bool
    true_null: bool
    measured_ms: float
    measured_share: float  # of the measured (else the predicted) step
    point_ms: float
    low_ms: float
    high_ms: float
    basis: str
    verdict: str  # worth fixing | measure | nothing
    chance: float  # that the verdict's fix saves the threshold


def score_case(case: Case) -> list[Scored]:
    out = []
    for calibrated in (True, False):
        found = analysed(case.trace, calibrated)
        fix, verdict, what_if = predicted(case, calibrated), found.verdict, found.what_if
        if fix is None or verdict is None or what_if is None:
            continue
        step_ms = case.step_ms or what_if.unprofiled_step_ns / 1e6
        word = "worth fixing" if verdict.worth_fixing else "measure" if verdict.measure else "nothing"
        chance = (verdict.chance_pct or 0) / 100
        facts = (case.held_out, case.beyond_noise, case.true_null, case.saving_ms, case.saving_ms / step_ms)
        out.append(Scored(case.name, calibrated, *facts, *fix, what_if.basis, word, chance))
    return out


def wrong(scored: Scored, verdict: str) -> str:
    """Why a verdict is wrong for a measured fix ('' where it is not): "measure it" where the fix saved twice the
    threshold or nothing beyond noise; "nothing" where it paid beyond noise; "worth fixing" where no session of
    the program ever measured it beyond noise."""
    if verdict == "measure" and scored.beyond_noise and scored.measured_share >= 0.10:
        return "measure, saved twice the threshold"
    if verdict == "measure" and not scored.beyond_noise:
        return "measure, nothing beyond noise"
    if verdict == "nothing" and scored.beyond_noise:
        return "nothing, paid beyond noise"
    if verdict == "worth fixing" and scored.true_null:
        return "worth fixing, never paid"
    return ""


def said(chance: float, worth: float, nothing: float) -> str:
    """The verdict at these cut-offs."""
    return "worth fixing" if chance >= worth else "nothing" if chance <= nothing else "measure"


def log_ratio(scored: Scored) -> float:
    return math.log(scored.measured_ms / scored.point_ms) if scored.point_ms > 0 else math.inf


def fitted_quantiles(tuning: list[Scored]) -> dict[str, tuple[float, float]]:
    """By basis, the order statistics of the log ratios that hold COVERAGE of a new case (split-conformal: the
    k-th of n with k = floor(tail (n + 1)) and ceil((1 - tail) (n + 1))); a calibration set aside gives the
    uncalibrated analysis's figures, so the uncalibrated pool takes the uncalibrated analyses alone."""
    tail = (1 - COVERAGE) / 2
    fitted = {}
    for basis, calibrated in (("calibrated", True), ("uncalibrated", False)):
        ratios = sorted(
            log_ratio(s) for s in tuning if s.basis == basis and s.calibrated == calibrated and s.beyond_noise
        )
        n = len(ratios)
        low = ratios[max(math.floor(tail * (n + 1)), 1) - 1]
        high = ratios[min(math.ceil((1 - tail) * (n + 1)), n) - 1]
        fitted[basis] = (round(low, 3), round(high, 3))
    return fitted


def fitted_cut_offs(tuning: list[Scored]) -> list[tuple[float, float]]:
    """Every pair of cut-offs (worth fixing at or above, nothing at or below) with the fewest wrong verdicts."""
    grid = [(worth, nothing) for worth in np.arange(0.3, 0.95, 0.05) for nothing in np.arange(0.05, 0.5, 0.05)]
    grid = [(round(w, 2), round(n, 2)) for w, n in grid if n < w]

    def errors(cuts: tuple[float, float]) -> int:
        return sum(bool(wrong(s, said(s.chance, *cuts))) for s in tuning)

    fewest = min(errors(cuts) for cuts in grid)
    return [cuts for cuts in grid if errors(cuts) == fewest]
