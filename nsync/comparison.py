"""Compare two analyses: step time against its noise, GPU idle, and call sites added, removed, grown, shrunk.

Runs are aligned by step (per-step figures); without steps on both sides nothing per step can be compared
and the verdict is ``inconclusive``, with the reason. When both runs are calibrated (nsync profile), the
verdict is taken on their predicted unprofiled step times, against the noise of the calibration runs they
are fitted to: the profiler can hide a regression (a loop it makes host-bound in both runs) that the
program's own speed shows, and its own slow-down varies from one capture to the next by more than the steps
of one capture do. ``step_ms.verdict_basis`` says which. Runs on two machines (the exports name different
physical GPUs) differ by more still: their noise is at least BETWEEN_MACHINES_PCT (``step_ms.two_machines``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from nsync.analysis import Analysis
from nsync.stages.callsites import issued_by_own_code

SCHEMA = "nsync.diff/1"
NOISE_FLOOR_PCT = 2.0  # step-time changes below this never count, however quiet the runs
# Runs on two machines (two physical GPUs): the same program's step differs by more than one run's steps
# say. Measured on the H200 (fixtures/h200/README.md, "Two machines"): same-code captures of the fresh
# programs from sessions 1-4, each on its own machine, differed by up to 32.8 % predicted unprofiled and 40.3 %
# profiled; rounded up, these are the least change two machines' runs can show.
BETWEEN_MACHINES_PCT = {"unprofiled": 33.0, "profiled": 41.0}
# what may set a calibrated diff's noise (UnprofiledStepTimes.noise_from): the largest of them
NOISE_SOURCES = ("floor", "calibration runs", "runs on one machine", "two machines")
SITE_FLOOR_NS = 5_000  # per step: call-site changes below 5 µs are "unchanged"
SITE_RELATIVE = 0.10  # ... and so are changes under 10 % of the larger side
MIN_KERNEL_OVERLAP = 0.5  # share of kernel time in common kernels under which runs are different programs
MAX_STEP_RATIO = 2.0


@dataclass(frozen=True)
class Change:
    """One figure in both runs, and the candidate's minus the baseline's (None where a side has none)."""

    baseline: float | None
    candidate: float | None
    delta: float | None


@dataclass(frozen=True)
class UnprofiledStepTimes:
    """The two runs' step times predicted without the profiler (each run's what-if), in ms."""

    baseline: float
    candidate: float
    delta_pct: float | None
    calibrated: bool  # both runs calibrated: the verdict's basis then
    noise_pct: float | None  # where the calibration runs are the verdict's basis: the largest of noise_from's
    between_runs_pct: float | None = None  # of that noise: two runs' hosts on one machine (WhatIf.between_runs_pct)
    noise_from: str = ""  # what sets the noise: one of NOISE_SOURCES


@dataclass(frozen=True)
class StepTimes:
    """The two runs' median step times under the profiler (ms), their noise, and which the verdict used."""

    baseline: float | None
    candidate: float | None
    delta: float | None
    delta_pct: float | None
    noise_pct: float | None
    basis: str  # gpu | nvtx | none: which step times
    verdict_basis: str  # profiled | unprofiled (calibrated)
    profiled_verdict: str  # what the profiled steps alone say, whichever basis the verdict takes
    unprofiled: UnprofiledStepTimes | None  # where both runs have a what-if
    two_machines: bool = False  # the runs ran on two physical GPUs: the noise takes in BETWEEN_MACHINES_PCT


@dataclass(frozen=True)
class Diff:
    baseline: Analysis
    candidate: Analysis
    step_ms: StepTimes
    gpu_idle_ms_per_step: Change
    exposed_idle_ms_per_step: Change
    verdict: str  # regression | improvement | no-change | inconclusive
    reasons: list[str]
    callsites: pd.DataFrame
    noise_floor_pct: float = NOISE_FLOOR_PCT  # step-time changes below this never counted

    @property
    def verdict_delta_pct(self) -> float | None:
        """The step time's change on the verdict's basis (profiled, or predicted unprofiled)."""
        step = self.step_ms
        if step.verdict_basis != "profiled" and step.unprofiled is not None:
            return step.unprofiled.delta_pct
        return step.delta_pct

    def regressed_beyond(self, pct: float) -> bool:
        """The CI gate: a regression verdict with the step time worse by more than ``pct`` percent (on the
        verdict's basis)."""
        delta = self.verdict_delta_pct
        return self.verdict == "regression" and delta is not None and delta > pct


def step_times_ns(analysis: Analysis) -> tuple[np.ndarray, str]:
    """Per-step times on the GPU when known (the throughput), else the NVTX ranges' host times."""
    stats = analysis.step_stats
    if stats.empty:
        return np.zeros(0), "none"
    gpu = stats["gpu_duration_ns"].to_numpy(dtype=float)
    if np.isfinite(gpu).sum() >= max(1, len(gpu) // 2):
        return gpu[np.isfinite(gpu)], "gpu"
    return stats["duration_ns"].to_numpy(dtype=float), "nvtx"


def noise_pct(times: np.ndarray) -> float:
    """Half the interquartile range, relative to the median: how much a typical step strays."""
    if len(times) < 2:
        return 0.0
    q1, median, q3 = np.percentile(times, [25, 50, 75])
    return float(100 * (q3 - q1) / 2 / median) if median > 0 else 0.0


def kernel_overlap(a: dict[str, int], b: dict[str, int]) -> float | None:
    """The smaller of the two runs' shares of kernel time spent in kernels both runs have."""
    if not a or not b:
        return None
    common = a.keys() & b.keys()
    return min(sum(a[k] for k in common) / max(sum(a.values()), 1), sum(b[k] for k in common) / max(sum(b.values()), 1))


def comparability(baseline: Analysis, candidate: Analysis) -> list[str]:
    """Why the two runs cannot be compared (empty when they can)."""
    reasons = []
    for side, a in (("baseline", baseline), ("candidate", candidate)):
        if a.status != "ok":
            reasons.append(f"the {side} has no GPU work to compare ({a.status})")
        elif a.steps.count == 0:
            reasons.append(f"the {side} has no steps (no NVTX step ranges and none detected)")
    if baseline.gpus and candidate.gpus and baseline.gpus != candidate.gpus:
        reasons.append(f"different GPUs: {', '.join(baseline.gpus)} vs {', '.join(candidate.gpus)}")
    if baseline.program and candidate.program and baseline.program != candidate.program:
        reasons.append(f"different programs: '{baseline.program}' vs '{candidate.program}'")
    overlap = kernel_overlap(baseline.kernel_time_ns, candidate.kernel_time_ns)
    if overlap is not None and overlap < MIN_KERNEL_OVERLAP:
        reasons.append(f"the runs share too little GPU work to be the same program ({100 * overlap:.0f}% in common)")
    counts = sorted((baseline.steps.count, candidate.steps.count))
    if counts[0] > 0 and counts[1] / counts[0] > MAX_STEP_RATIO:
        reasons.append(f"step counts differ too much ({baseline.steps.count} vs {candidate.steps.count})")
    return reasons


def on_two_machines(baseline: Analysis, candidate: Analysis) -> bool:
    """Whether the runs ran on different physical GPUs (so machines), as far as both exports say."""
    return bool(baseline.gpu_uuids and candidate.gpu_uuids) and not set(baseline.gpu_uuids) & set(candidate.gpu_uuids)


def diff(baseline: Analysis, candidate: Analysis, noise_floor_pct: float = NOISE_FLOOR_PCT) -> Diff:
    """Compare two runs of one program: the step time against its noise (on the predicted unprofiled step times
    when both were calibrated), and the call sites whose syncs were added, removed, grew or shrank.

    ``noise_floor_pct``: step-time changes below this never count. Returns the :class:`Diff`, whose ``verdict``
    is regression, improvement, no-change, or inconclusive with its ``reasons`` (different programs or GPUs,
    no steps); it raises nothing for runs it cannot compare (``nsync.gates.fail_on_regression`` does).

        >>> change = nsync.diff(nsync.analyze("main.sqlite"), nsync.analyze("pr.sqlite"))
        >>> change.verdict, change.step_ms.delta_pct
    """
    reasons = comparability(baseline, candidate)
    base_times, base_basis = step_times_ns(baseline)
    cand_times, cand_basis = step_times_ns(candidate)
    basis = base_basis if base_basis == cand_basis else "nvtx"
    if basis == "nvtx" and base_basis != cand_basis:
        base_times = baseline.step_stats["duration_ns"].to_numpy(dtype=float)
        cand_times = candidate.step_stats["duration_ns"].to_numpy(dtype=float)
    verdict = "inconclusive"
    two_machines = on_two_machines(baseline, candidate)
    machines = BETWEEN_MACHINES_PCT if two_machines else dict.fromkeys(BETWEEN_MACHINES_PCT, 0.0)
    measured = StepTimes(None, None, None, None, None, basis, "profiled", verdict, None, two_machines)
    if len(base_times) and len(cand_times):
        b, c = float(np.median(base_times)) / 1e6, float(np.median(cand_times)) / 1e6
        noise = max(noise_floor_pct, noise_pct(base_times), noise_pct(cand_times), machines["profiled"])
        delta_pct = 100 * (c - b) / b if b > 0 else None
        if not reasons and delta_pct is not None:
            verdict = _verdict(delta_pct, noise)
        measured = replace(
            measured,
            baseline=round(b, 6),
            candidate=round(c, 6),
            delta=round(c - b, 6),
            delta_pct=None if delta_pct is None else round(delta_pct, 3),
            noise_pct=round(noise, 3),
            profiled_verdict=verdict,
        )
    verdict_basis, unprofiled = "profiled", None
    base_if, cand_if = baseline.what_if, candidate.what_if
    if base_if is not None and cand_if is not None and measured.noise_pct is not None:
        b, c = base_if.unprofiled_step_ns / 1e6, cand_if.unprofiled_step_ns / 1e6
        unprofiled_pct = 100 * (c - b) / b if b > 0 else None
        calibrated = base_if.calibrated and cand_if.calibrated
        unprofiled_noise = between_runs = None
        noise_from = ""
        if calibrated and unprofiled_pct is not None and not reasons:
            runs = (w.calibrated_steps_ns for w in (base_if, cand_if) if w.calibrated_steps_ns is not None)
            between_runs = float(np.hypot(base_if.between_runs_pct, cand_if.between_runs_pct))
            in_steps = max(noise_pct(steps) for steps in runs)
            sources = dict(zip(NOISE_SOURCES, (noise_floor_pct, in_steps, between_runs, machines["unprofiled"])))
            noise_from = max(sources, key=sources.__getitem__)
            verdict = _verdict(unprofiled_pct, sources[noise_from])
            unprofiled_noise = round(sources[noise_from], 3)
            verdict_basis = "unprofiled (calibrated)"
        unprofiled = UnprofiledStepTimes(
            baseline=round(b, 6),
            candidate=round(c, 6),
            delta_pct=None if unprofiled_pct is None else round(unprofiled_pct, 3),
            calibrated=calibrated,
            noise_pct=unprofiled_noise,
            between_runs_pct=None if between_runs is None else round(between_runs, 3),
            noise_from=noise_from,
        )
    step = replace(measured, verdict_basis=verdict_basis, unprofiled=unprofiled)
    return Diff(
        baseline=baseline,
        candidate=candidate,
        step_ms=step,
        gpu_idle_ms_per_step=_per_step_pair(baseline, candidate, "gpu_idle_ns"),
        exposed_idle_ms_per_step=_per_step_pair(baseline, candidate, "exposed_idle_ns"),
        verdict=verdict,
        reasons=reasons,
        callsites=compare_callsites(baseline, candidate),
        noise_floor_pct=noise_floor_pct,
    )


def _verdict(delta_pct: float, noise_pct: float) -> str:
    return "regression" if delta_pct > noise_pct else "improvement" if delta_pct < -noise_pct else "no-change"


def _per_step_pair(baseline: Analysis, candidate: Analysis, key: str) -> Change:
    before, after = (a.totals[key] / a.steps.count / 1e6 if a.steps.count else None for a in (baseline, candidate))
    return Change(before, after, None if before is None or after is None else after - before)


def _sites(analysis: Analysis) -> pd.DataFrame:
    sites = analysis.callsites
    if sites.empty:
        return pd.DataFrame({"name": [], "line": [], "function": [], "issued": [], "file": [], "per_step_ns": []})
    per = analysis.steps.count or np.nan
    own = issued_by_own_code(sites)
    issued = [f"{Path(str(f)).name}:{ln}" for f, ln in zip(sites["sync_file"], sites["sync_line"])]
    return pd.DataFrame(
        {
            "name": [Path(str(f)).name for f in sites["file"]],
            "line": sites["line"].astype(int),
            "function": sites["function"].astype(str),
            # where a library issues the sync ('' when it is the user's own line, which may move)
            "issued": np.where(own.to_numpy(), "", np.array(issued, dtype=object)),
            "file": sites["file"].astype(str),
            "per_step_ns": sites["exposed_idle_ns"].astype(float) / per,
        }
    )


def compare_callsites(baseline: Analysis, candidate: Analysis) -> pd.DataFrame:
    """Call sites of both runs matched by file name, line, function and the library line that issues the
    sync (then without the line, when that pairs exactly one site on each side: the line moved), with their
    change per step."""
    base, cand = _sites(baseline), _sites(candidate)
    exact = ["name", "line", "function", "issued"]
    merged = base.merge(cand, on=exact, how="outer", suffixes=("_b", "_c"), indicator=True)
    only_b = merged.loc[merged["_merge"] == "left_only"]
    only_c = merged.loc[merged["_merge"] == "right_only"]
    loose = ["name", "function", "issued"]
    unique_b = only_b.drop_duplicates(loose, keep=False)
    unique_c = only_c.drop_duplicates(loose, keep=False)
    moved = unique_b.merge(unique_c, on=loose, suffixes=("_l", "_r"))
    rows = merged.loc[merged["_merge"] == "both"].assign(line_b=lambda d: d["line"], line_c=lambda d: d["line"])
    rows = rows[["name", "function", "issued", "file_b", "line_b", "line_c", "per_step_ns_b", "per_step_ns_c"]]
    moved_rows = pd.DataFrame(
        {
            "name": moved["name"],
            "function": moved["function"],
            "issued": moved["issued"],
            "file_b": moved["file_b_l"],
            "line_b": moved["line_l"],
            "line_c": moved["line_r"],
            "per_step_ns_b": moved["per_step_ns_b_l"],
            "per_step_ns_c": moved["per_step_ns_c_r"],
        }
    )
    paired = set(zip(moved["name"], moved["function"], moved["issued"]))
    rest_b = only_b.loc[[key not in paired for key in zip(only_b["name"], only_b["function"], only_b["issued"])]]
    rest_c = only_c.loc[[key not in paired for key in zip(only_c["name"], only_c["function"], only_c["issued"])]]
    removed = pd.DataFrame(
        {
            "name": rest_b["name"],
            "function": rest_b["function"],
            "issued": rest_b["issued"],
            "file_b": rest_b["file_b"],
            "line_b": rest_b["line"],
            "line_c": np.nan,
            "per_step_ns_b": rest_b["per_step_ns_b"],
            "per_step_ns_c": 0.0,
        }
    )
    added = pd.DataFrame(
        {
            "name": rest_c["name"],
            "function": rest_c["function"],
            "issued": rest_c["issued"],
            "file_b": rest_c["file_c"],
            "line_b": np.nan,
            "line_c": rest_c["line"],
            "per_step_ns_b": 0.0,
            "per_step_ns_c": rest_c["per_step_ns_c"],
        }
    )
    table = (
        pd.concat([df for df in (rows, moved_rows, removed, added) if len(df)], ignore_index=True)
        if (len(rows) + len(moved_rows) + len(removed) + len(added))
        else pd.DataFrame(columns=rows.columns)
    )
    b = table["per_step_ns_b"].astype(float).fillna(0.0)
    c = table["per_step_ns_c"].astype(float).fillna(0.0)
    delta = c - b
    small = delta.abs() <= np.maximum(SITE_FLOOR_NS, SITE_RELATIVE * np.maximum(b, c))
    status = np.select(
        [table["line_b"].isna(), table["line_c"].isna(), small, delta > 0],
        ["added", "removed", "unchanged", "grown"],
        default="shrunk",
    )
    table = table.assign(status=status, delta_ns=delta, per_step_ns_b=b, per_step_ns_c=c).rename(
        columns={"file_b": "file"}
    )
    order = np.argsort(-table["delta_ns"].abs().to_numpy(), kind="stable")
    return table.iloc[order].reset_index(drop=True)
