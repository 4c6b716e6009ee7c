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

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from nsync.errors import UsageError
from nsync.report import Analysis, Diff
from nsync.report.analysis import ns_to_ms
from nsync.report.diff import (
    NOISE_FLOOR_PCT,
    SCHEMA,
    Change,
    DiffSide,
    DiffSite,
    DiffVerdict,
    StepTimes,
    UnprofiledStepTimes,
)
from nsync.report.tables import AnalysisTables
from nsync.stages.callsites import issued_by_own_code

# Runs on two machines (two physical GPUs): the same program's step differs by more than one run's steps
# say. Measured on the H200 (fixtures/h200/README.md, "Two machines"): same-code captures of the fresh
# programs from sessions 1-4, each on its own machine, differed by up to 32.8 % predicted unprofiled and 40.3 %
# profiled; rounded up, these are the least change two machines' runs can show.
BETWEEN_MACHINES_PCT = {"unprofiled": 29.0, "profiled": 41.0}
# what may set a calibrated diff's noise (UnprofiledStepTimes.noise_from): the largest of them
NOISE_SOURCES = ("floor", "calibration runs", "runs on one machine", "two machines")
SITE_FLOOR_NS = 5_000  # per step: call-site changes below 5 µs are "unchanged"
SITE_RELATIVE = 0.10  # ... and so are changes under 10 % of the larger side
MIN_KERNEL_OVERLAP = 0.5  # share of kernel time in common kernels under which runs are different programs
MAX_STEP_RATIO = 2.0


def tables_of(analysis: Analysis) -> AnalysisTables:
    """The analysis's tables, which comparing two runs needs: a result read back from JSON has none."""
    if analysis.tables is None:
        raise UsageError(
            f"{analysis.trace.path}: this analysis was read back from JSON, without the tables a diff compares: "
            "diff the traces"
        )
    return analysis.tables


def step_times_ns(analysis: Analysis) -> tuple[np.ndarray, str]:
    """Per-step times on the GPU when known (the throughput), else the NVTX ranges' host times."""
    stats = tables_of(analysis).step_stats
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
    base, cand = tables_of(baseline), tables_of(candidate)
    base_gpus, cand_gpus = baseline.trace.gpus, candidate.trace.gpus
    if base_gpus and cand_gpus and base_gpus != cand_gpus:
        reasons.append(f"different GPUs: {', '.join(base_gpus)} vs {', '.join(cand_gpus)}")
    if base.program and cand.program and base.program != cand.program:
        reasons.append(f"different programs: '{base.program}' vs '{cand.program}'")
    overlap = kernel_overlap(base.kernel_time_ns, cand.kernel_time_ns)
    if overlap is not None and overlap < MIN_KERNEL_OVERLAP:
        reasons.append(f"the runs share too little GPU work to be the same program ({100 * overlap:.0f}% in common)")
    counts = sorted((baseline.steps.count, candidate.steps.count))
    if counts[0] > 0 and counts[1] / counts[0] > MAX_STEP_RATIO:
        reasons.append(f"step counts differ too much ({baseline.steps.count} vs {candidate.steps.count})")
    return reasons


def on_two_machines(baseline: Analysis, candidate: Analysis) -> bool:
    """Whether the runs ran on different physical GPUs (so machines), as far as both exports say."""
    base, cand = tables_of(baseline).gpu_uuids, tables_of(candidate).gpu_uuids
    return bool(base and cand) and not set(base) & set(cand)


def diff(baseline: Analysis, candidate: Analysis, noise_floor_pct: float = NOISE_FLOOR_PCT) -> Diff:
    """Compare two runs of one program: the step time against its noise (on the predicted unprofiled step times
    when both were calibrated), and the call sites whose syncs were added, removed, grew or shrank.

    ``noise_floor_pct``: step-time changes below this never count. Returns the :class:`nsync.Diff`, whose
    ``verdict`` is regression, improvement, no-change, unclear (uncalibrated, the profiler may hide a
    regression: _hidden) or inconclusive, the last two with their ``reasons`` (different programs or GPUs, no
    steps); it raises nothing for runs it cannot compare (``nsync.gates.fail_on_regression`` does), and
    UsageError for an analysis read back from JSON (it has no tables to compare).

        >>> change = nsync.diff(nsync.analyze("main.sqlite"), nsync.analyze("pr.sqlite"))
        >>> change.verdict, change.step_ms.delta_pct
    """
    reasons = comparability(baseline, candidate)
    machines = BETWEEN_MACHINES_PCT if on_two_machines(baseline, candidate) else None
    measured = _profiled(baseline, candidate, reasons, noise_floor_pct, machines)
    unprofiled, calibrated_verdict = None, None
    if measured.noise_pct is not None:
        base, cand = tables_of(baseline), tables_of(candidate)
        unprofiled, calibrated_verdict = _unprofiled(base, cand, reasons, noise_floor_pct, machines)
    basis = "profiled" if calibrated_verdict is None else "unprofiled (calibrated)"
    verdict = calibrated_verdict or measured.profiled_verdict
    sites = compare_callsites(baseline, candidate)
    if basis == "profiled" and verdict in ("no-change", "improvement"):
        hidden = _hidden(candidate, sites, unprofiled, measured.noise_pct)
        verdict, reasons = ("unclear", hidden) if hidden else (verdict, reasons)
    return Diff(
        schema=SCHEMA,
        verdict=verdict,
        reasons=reasons,
        baseline=_side(baseline),
        candidate=_side(candidate),
        step_ms=replace(measured, verdict_basis=basis, unprofiled=unprofiled),
        gpu_idle_ms_per_step=_per_step_pair(baseline, candidate, "gpu_idle_ns"),
        exposed_idle_ms_per_step=_per_step_pair(baseline, candidate, "exposed_idle_ns"),
        callsites=_diff_sites(sites),
        noise_floor_pct=noise_floor_pct,
        timelines=(baseline.timeline, candidate.timeline),
    )


def _profiled(
    baseline: Analysis,
    candidate: Analysis,
    reasons: list[str],
    noise_floor_pct: float,
    machines: dict[str, float] | None,
) -> StepTimes:
    """The step times under the profiler: their medians, change and noise, and the verdict they alone give."""
    base_times, base_basis = step_times_ns(baseline)
    cand_times, cand_basis = step_times_ns(candidate)
    basis = base_basis if base_basis == cand_basis else "nvtx"
    if basis == "nvtx" and base_basis != cand_basis:
        base_times = tables_of(baseline).step_stats["duration_ns"].to_numpy(dtype=float)
        cand_times = tables_of(candidate).step_stats["duration_ns"].to_numpy(dtype=float)
    measured = StepTimes(None, None, None, None, None, basis, "profiled", "inconclusive", None, machines is not None)
    if not (len(base_times) and len(cand_times)):
        return measured
    b, c = float(np.median(base_times)) / 1e6, float(np.median(cand_times)) / 1e6
    between = machines["profiled"] if machines else 0.0
    noise = max(noise_floor_pct, noise_pct(base_times), noise_pct(cand_times), between)
    delta_pct = 100 * (c - b) / b if b > 0 else None
    return replace(
        measured,
        baseline=round(b, 6),
        candidate=round(c, 6),
        delta=round(c - b, 6),
        delta_pct=None if delta_pct is None else round(delta_pct, 3),
        noise_pct=round(noise, 3),
        profiled_verdict=_verdict(delta_pct, noise) if not reasons and delta_pct is not None else "inconclusive",
    )


def _unprofiled(
    base: AnalysisTables,
    cand: AnalysisTables,
    reasons: list[str],
    noise_floor_pct: float,
    machines: dict[str, float] | None,
) -> tuple[UnprofiledStepTimes | None, DiffVerdict | None]:
    """The step times each run's what-if predicts without the profiler (None: a run has no what-if), and, when
    both were calibrated, their noise and the verdict they give: the verdict's basis then."""
    if base.unprofiled_step_ns is None or cand.unprofiled_step_ns is None:
        return None, None
    b, c = base.unprofiled_step_ns / 1e6, cand.unprofiled_step_ns / 1e6
    unprofiled_pct = 100 * (c - b) / b if b > 0 else None
    calibrated = base.calibrated_steps_ns is not None and cand.calibrated_steps_ns is not None
    unprofiled = UnprofiledStepTimes(
        baseline=round(b, 6),
        candidate=round(c, 6),
        delta_pct=None if unprofiled_pct is None else round(unprofiled_pct, 3),
        calibrated=calibrated,
        noise_pct=None,
    )
    if not calibrated or unprofiled_pct is None or reasons:
        return unprofiled, None
    between_runs = float(np.hypot(base.between_runs_pct, cand.between_runs_pct))
    in_steps = max(noise_pct(t.calibrated_steps_ns) for t in (base, cand) if t.calibrated_steps_ns is not None)
    between_machines = machines["unprofiled"] if machines else 0.0
    sources = dict(zip(NOISE_SOURCES, (noise_floor_pct, in_steps, between_runs, between_machines)))
    noise_from = max(sources, key=sources.__getitem__)
    noise = replace(
        unprofiled,
        noise_pct=round(sources[noise_from], 3),
        between_runs_pct=round(between_runs, 3),
        noise_from=noise_from,
    )
    return noise, _verdict(unprofiled_pct, sources[noise_from])


def _hidden(
    candidate: Analysis, sites: pd.DataFrame, unprofiled: UnprofiledStepTimes | None, noise_pct: float | None
) -> list[str]:
    """Why a diff under the profiler that sees no regression cannot rule one out ('' each where it can): the
    what-if predicts the unprofiled step longer beyond the noise, or a call site new in the candidate is
    predicted to cost the candidate's worth-fixing share of its step or more. The profiler slows the host so
    much that a loop it makes host-bound hides a sync's wait (fixtures/h200/hidden: +7.8 % unprofiled read +1.9 %
    under it)."""
    reasons = []
    if unprofiled is not None and unprofiled.delta_pct is not None and unprofiled.delta_pct > (noise_pct or 0):
        reasons.append(
            f"without the profiler the step is predicted {unprofiled.delta_pct:+.1f} % (uncalibrated), beyond "
            f"the {noise_pct or 0:.1f} % noise: the profiler can hide a change of that size"
        )
    tables, verdict = tables_of(candidate), candidate.verdict
    step_ns = tables.unprofiled_step_ns
    if verdict is None or step_ns is None or "predicted_saving_ns_per_step" not in tables.callsites:
        return reasons
    saving = {
        (Path(str(file)).name, int(line)): float(cost)
        for file, line, cost in zip(
            tables.callsites["file"], tables.callsites["line"], tables.callsites["predicted_saving_ns_per_step"]
        )
    }
    threshold_ns = verdict.threshold_pct / 100 * step_ns
    for name, line, status in zip(sites["name"], sites["line_c"], sites["status"]):
        cost = saving.get((name, int(line)), 0.0) if status == "added" else 0.0
        if cost >= threshold_ns:
            reasons.append(
                f"new in the candidate, {name}:{int(line)} is predicted to cost {cost / 1e6:.2f} ms a step "
                f"({100 * cost / step_ns:.1f} %, at least the {verdict.threshold_pct:g} % worth fixing), which the "
                "profiler can hide"
            )
    return reasons


def _verdict(delta_pct: float, noise_pct: float) -> DiffVerdict:
    return "regression" if delta_pct > noise_pct else "improvement" if delta_pct < -noise_pct else "no-change"


def _per_step_pair(baseline: Analysis, candidate: Analysis, key: str) -> Change:
    """A per-step figure of both runs (``key``: a column of their step_stats), in ms."""
    before, after = (
        int(tables_of(a).step_stats[key].sum()) / a.steps.count / 1e6 if a.steps.count else None
        for a in (baseline, candidate)
    )
    return Change(before, after, None if before is None or after is None else after - before)


def _side(analysis: Analysis) -> DiffSide:
    trace, steps = analysis.trace, analysis.steps
    program = tables_of(analysis).program
    return DiffSide(trace.path, trace.nsys_version, program, list(trace.gpus), steps.count, steps.source)


def _diff_sites(table: pd.DataFrame) -> list[DiffSite]:
    return [_diff_site(row) for row in table.astype({"line_b": float, "line_c": float}).to_dict("records")]


def _diff_site(row: dict[str, Any]) -> DiffSite:
    line = None if math.isnan(row["line_c"]) else int(row["line_c"])
    baseline_line = None if math.isnan(row["line_b"]) else int(row["line_b"])
    return DiffSite(
        file=row["file"],
        line=line if line is not None else baseline_line,
        baseline_line=baseline_line,
        function=row["function"],
        issued_at=row["issued"] or None,
        status=row["status"],
        baseline_exposed_idle_ms_per_step=ns_to_ms(row["per_step_ns_b"]),
        candidate_exposed_idle_ms_per_step=ns_to_ms(row["per_step_ns_c"]),
        delta_ms_per_step=ns_to_ms(row["delta_ns"]),
    )


def _sites(analysis: Analysis) -> pd.DataFrame:
    sites = tables_of(analysis).callsites
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


PAIRED_COLUMNS = ["name", "function", "issued", "file_b", "line_b", "line_c", "per_step_ns_b", "per_step_ns_c"]


def compare_callsites(baseline: Analysis, candidate: Analysis) -> pd.DataFrame:
    """Call sites of both runs matched by file name, line, function and the library line that issues the
    sync (then without the line, when that pairs exactly one site on each side: the line moved), with their
    change per step."""
    base, cand = _sites(baseline), _sites(candidate)
    merged = base.merge(
        cand, on=["name", "line", "function", "issued"], how="outer", suffixes=("_b", "_c"), indicator=True
    )
    only_b = merged.loc[merged["_merge"] == "left_only"]
    only_c = merged.loc[merged["_merge"] == "right_only"]
    loose = ["name", "function", "issued"]
    moved = only_b.drop_duplicates(loose, keep=False).merge(
        only_c.drop_duplicates(loose, keep=False), on=loose, suffixes=("_l", "_r")
    )
    same = merged.loc[merged["_merge"] == "both"].assign(line_b=lambda d: d["line"], line_c=lambda d: d["line"])
    paired = set(zip(moved["name"], moved["function"], moved["issued"]))

    def unpaired(rows: pd.DataFrame) -> pd.DataFrame:
        return rows.loc[[key not in paired for key in zip(rows["name"], rows["function"], rows["issued"])]]

    rest_b, rest_c = unpaired(only_b), unpaired(only_c)
    parts = [
        same[PAIRED_COLUMNS],
        _paired(
            moved,
            moved["file_b_l"],
            moved["line_l"],
            moved["line_r"],
            moved["per_step_ns_b_l"],
            moved["per_step_ns_c_r"],
        ),
        _paired(rest_b, rest_b["file_b"], rest_b["line"], np.nan, rest_b["per_step_ns_b"], 0.0),  # removed
        _paired(rest_c, rest_c["file_c"], np.nan, rest_c["line"], 0.0, rest_c["per_step_ns_c"]),  # added
    ]
    found = [part for part in parts if len(part)]
    table = pd.concat(found, ignore_index=True) if found else pd.DataFrame(columns=PAIRED_COLUMNS)
    return _with_status(table)


def _paired(rows: pd.DataFrame, file: Any, line_b: Any, line_c: Any, per_step_b: Any, per_step_c: Any) -> pd.DataFrame:
    """``rows`` as the table's rows: their names, and the given file, lines and figures of each side."""
    return pd.DataFrame(
        {
            "name": rows["name"],
            "function": rows["function"],
            "issued": rows["issued"],
            "file_b": file,
            "line_b": line_b,
            "line_c": line_c,
            "per_step_ns_b": per_step_b,
            "per_step_ns_c": per_step_c,
        }
    )


def _with_status(table: pd.DataFrame) -> pd.DataFrame:
    """Each site's change and status (added, removed, grown, shrunk, unchanged: within the floor), the largest
    change first."""
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
