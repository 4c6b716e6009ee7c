"""The report stage, the analysis's last: what the stages produced (frames in ns), as the typed result every
output prints (nsync.report.Analysis, in ms). It converts and names; it computes nothing."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import pandas as pd

from nsync.config import AnalysisConfig
from nsync.notices import Notice
from nsync.report.analysis import (
    SCHEMA,
    Analysis,
    GpuIdle,
    PerStep,
    Phase,
    Status,
    StepFacts,
    Totals,
    TraceFacts,
    VerdictFacts,
    WhatIfFacts,
    Window,
    ns_to_ms,
)
from nsync.report.fixes import Reads
from nsync.report.sites import CallSite, FixedTogether, OnceSite, ReadTogether, StackFrame, SyncFrame, where
from nsync.report.tables import AnalysisTables
from nsync.report.timeline import Timeline, TimelineCalls, TimelineLead, TimelineOps, TimelineSyncs
from nsync.stages.advice import ReadGroup
from nsync.stages.advice.scopes import FixScope
from nsync.stages.excerpt import TimelineExcerpt
from nsync.stages.replay import WhatIf
from nsync.stages.steps import Steps, what_a_step_is


@dataclass(frozen=True)
class StageOutputs:
    """What the stages found in one trace, as frames and stage objects (nsync.analysis runs them)."""

    trace_path: str
    nsys_version: str | None
    schema_version: str | None
    gpus: list[str]
    config: AnalysisConfig
    steps: Steps
    step_stats: pd.DataFrame  # one row per analysed step
    window_ns: tuple[int, int]
    # the syncs inside the analysed steps (the whole window without steps), in detect.SYNC_ORDER: the per-step
    # figures' syncs. The what-if, the timeline excerpt and the phases see all of them.
    syncs: pd.DataFrame
    callsites: pd.DataFrame
    totals: dict[str, Any]
    warnings: list[Notice] = field(default_factory=list)
    status: Status = "ok"
    timeline: TimelineExcerpt | None = None
    thread_names: dict[int, str] = field(default_factory=dict)
    what_if: WhatIf | None = None
    program: str = ""  # the captured command line, as nsys recorded it (empty when unknown)
    kernel_time_ns: dict[str, int] = field(default_factory=dict)  # GPU time per kernel name
    phases: pd.DataFrame = field(default_factory=pd.DataFrame)
    phase_sites: pd.DataFrame = field(default_factory=pd.DataFrame)
    verdict: VerdictFacts | None = None
    read_groups: list[ReadGroup] = field(default_factory=list)  # reads one copy would do (what_if prices them)
    fix_scopes: list[FixScope] = field(default_factory=list)  # fixes of several sites (priced after the reads)
    gpu_uuids: list[str] = field(default_factory=list)  # the physical GPUs the work ran on, where the export says
    profiler: str = "nsys"  # what wrote the trace (nsync.load: Trace.profiler)


def analysis_result(found: StageOutputs) -> Analysis:
    """The result of one analysis, with every call site (renderers show the first ``top``)."""
    gpu_idle = found.totals["gpu_idle_ns"]
    return Analysis(
        schema=SCHEMA,
        status=found.status,
        trace=TraceFacts(found.trace_path, found.nsys_version, found.schema_version, list(found.gpus), found.profiler),
        steps=_step_facts(found),
        window=Window(start_ns=found.window_ns[0], end_ns=found.window_ns[1]),
        totals=_totals(found),
        verdict=found.verdict,
        phases=_phases(found),
        callsites=[_callsite(row, gpu_idle) for row in found.callsites.to_dict("records")],
        outside_main_loop=[
            OnceSite(
                **_frames(row), phase=row["phase"], count=int(row["count"]), host_wait_ms=ns_to_ms(row["host_wait_ns"])
            )
            for row in found.phase_sites.to_dict("records")
        ],
        what_if=_what_if(found.what_if),
        warnings=list(found.warnings),
        config=found.config,
        per_step=_per_step(found),
        timeline=None if found.timeline is None else _timeline(found.timeline),
        read_together=_read_together(found),
        fixed_together=_fixed_together(found),
        tables=_tables(found),
    )


def _tables(found: StageOutputs) -> AnalysisTables:
    what_if = found.what_if
    return AnalysisTables(
        syncs=found.syncs,
        callsites=found.callsites,
        steps=found.steps.table,
        step_stats=found.step_stats,
        thread_names=found.thread_names,
        kernel_time_ns=found.kernel_time_ns,
        gpu_uuids=found.gpu_uuids,
        program=found.program,
        unprofiled_step_ns=None if what_if is None else what_if.unprofiled_step_ns,
        calibrated_steps_ns=None if what_if is None else what_if.calibrated_steps_ns,
        between_runs_pct=0.0 if what_if is None else what_if.between_runs_pct,
    )


def _num(value: float | None) -> float | None:
    return None if value is None or math.isnan(float(value)) else round(float(value), 4)


def _pct(part: float, whole: float) -> float | None:
    return round(100 * part / whole, 2) if whole else None


def _ints(values: pd.Series) -> list[int]:
    return values.to_numpy(np.int64).tolist()


def _step_facts(found: StageOutputs) -> StepFacts:
    stats, steps = found.step_stats, found.steps
    durations = stats["duration_ns"] if len(stats) else None
    gpu_durations = stats["gpu_duration_ns"].dropna() if len(stats) else None
    sites = found.callsites
    return StepFacts(
        count=steps.count,
        median_ms=ns_to_ms(float(durations.median())) if durations is not None else None,
        gpu_median_ms=ns_to_ms(float(gpu_durations.median()))
        if gpu_durations is not None and len(gpu_durations)
        else None,
        source=steps.source,
        total=len(steps.table),
        warmup_skipped=steps.warmup,
        set_aside=steps.set_aside,
        each=steps.each
        or (what_a_step_is(steps.source, sites["sync_file"], sites["syncs_per_step"]) if len(sites) else ""),
        mean_ms=ns_to_ms(float(durations.mean())) if durations is not None else None,
        data_wait_ms=ns_to_ms(float(stats["data_wait_ns"].mean())) if len(stats) else None,
    )


def _totals(found: StageOutputs) -> Totals:
    totals = found.totals
    gpu_idle, span, gpus = totals["gpu_idle_ns"], totals["span_ns"], totals["gpu_count"]
    return Totals(
        span_ms=ns_to_ms(span),
        gpu_count=gpus,
        gpu_idle_ms=ns_to_ms(gpu_idle),
        gpu_busy_ms=ns_to_ms(totals["gpu_busy_ns"]),
        gpu_idle_pct=_pct(gpu_idle, span * gpus),
        per_gpu=[
            GpuIdle(gpu["device_id"], gpu["name"], ns_to_ms(gpu["idle_ns"]), _pct(gpu["idle_ns"], span))
            for gpu in totals["per_gpu"]
        ],
        exposed_idle_ms=ns_to_ms(totals["exposed_idle_ns"]),
        host_wait_ms=ns_to_ms(totals["host_wait_ns"]),
        sync_count=totals["sync_count"],
        syncs_outside_window=totals.get("syncs_outside_window", 0),
        predicted_step_ms_without_syncs=ns_to_ms(found.what_if.without_syncs_step_ns) if found.what_if else None,
    )


def _phases(found: StageOutputs) -> list[Phase]:
    gpus = max(found.totals["gpu_count"], 1)
    return [
        Phase(
            phase=row["phase"],
            start_ns=int(row["start"]),
            end_ns=int(row["end"]),
            duration_ms=ns_to_ms(row["duration_ns"]),
            intervals=int(row["intervals"]),
            gpu_idle_ms=ns_to_ms(row["gpu_idle_ns"]),
            gpu_idle_pct=_pct(row["gpu_idle_ns"], row["duration_ns"] * gpus),
            sync_count=int(row["sync_count"]),
            host_wait_ms=ns_to_ms(row["host_wait_ns"]),
        )
        for row in found.phases.to_dict("records")
    ]


def _frames(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "file": row["file"],
        "line": int(row["line"]),
        "function": row["function"],
        "sync_frame": SyncFrame(file=row["sync_file"], line=int(row["sync_line"]), function=row["sync_function"]),
    }


# CallSite's figures in ms, and the call-site columns in ns they are read from (absent: None)
_MS_OF_NS = {
    "exposed_idle_ms": "exposed_idle_ns",
    "exposed_idle_ms_per_step": "exposed_idle_ns_per_step",
    "host_wait_ms": "host_wait_ns",
    "host_wait_ms_per_step": "host_wait_ns_per_step",
    "lead_before_ms_mean": "lead_before_ns_mean",
    "predicted_saving_ms_per_step": "predicted_saving_ns_per_step",
    "predicted_saving_ms_per_step_low": "predicted_saving_ns_per_step_low",
    "predicted_saving_ms_per_step_high": "predicted_saving_ns_per_step_high",
    "loop_saving_ms_per_step": "loop_saving_ns_per_step",
    "loop_saving_ms_per_step_low": "loop_saving_ns_per_step_low",
    "loop_saving_ms_per_step_high": "loop_saving_ns_per_step_high",
}


def _callsite(row: dict[str, Any], gpu_idle_ns: int) -> CallSite:
    in_ms: dict[str, Any] = {name: ns_to_ms(row.get(column)) for name, column in _MS_OF_NS.items()}
    return CallSite(
        **_frames(row),
        **in_ms,
        count=int(row["count"]),
        syncs_per_step=_num(row["syncs_per_step"]),
        executions_per_step=_num(row["executions_per_step"]),
        share_of_gpu_idle=_num(row["exposed_idle_ns"] / gpu_idle_ns) if gpu_idle_ns else None,
        apis=list(row["apis"]),
        kinds=list(row["kinds"]),
        copy_directions=list(row["copy_directions"]),
        stack=[StackFrame(function=f.function, file=f.file, line=f.line) for f in row["stack"]],
        loop_id=None if _num(row.get("loop_id")) is None else int(row["loop_id"]),
        callsite_source=row["callsite_source"],
        short_hint=row["short_hint"],
        hint=row["hint"],
        advice=row.get("advice"),
    )


def _read_together(found: StageOutputs) -> list[ReadTogether]:
    what_if = found.what_if
    savings = what_if.group_saving_ns if what_if else ()
    ranges = what_if.group_range_ns if what_if else ()
    together = []
    for k, group in enumerate(found.read_groups):
        low, high = _ms_range(ranges[k] if k < len(ranges) else None)
        together.append(
            ReadTogether(
                **{f.name: getattr(group, f.name) for f in fields(Reads)},
                predicted_saving_ms_per_step=ns_to_ms(savings[k] if k < len(savings) else None),
                predicted_saving_ms_per_step_low=low,
                predicted_saving_ms_per_step_high=high,
            )
        )
    return together


def _fixed_together(found: StageOutputs) -> list[FixedTogether]:
    """Each fix of several call sites, with what the what-if says it saves (its groups after the reads')."""
    what_if, first, sites = found.what_if, len(found.read_groups), found.callsites
    at = {int(site): (str(file), int(line)) for site, file, line in zip(sites["site_id"], sites["file"], sites["line"])}
    savings = what_if.group_saving_ns[first:] if what_if else ()
    ranges = what_if.group_range_ns[first:] if what_if else ()
    together = []
    for k, scope in enumerate(found.fix_scopes):
        low, high = _ms_range(ranges[k] if k < len(ranges) else None)
        together.append(
            FixedTogether(
                kind=scope.kind,
                sites=[where(*at[site]) for site in sorted(scope.site_ids, key=at.__getitem__)],
                fix=scope.fix,
                predicted_saving_ms_per_step=ns_to_ms(savings[k] if k < len(savings) else None),
                predicted_saving_ms_per_step_low=low,
                predicted_saving_ms_per_step_high=high,
            )
        )
    return together


def _ms_range(range_ns: tuple[float, float] | None) -> tuple[float | None, float | None]:
    """A likely range in ms; (None, None) where it is unknown."""
    if range_ns is None or not all(math.isfinite(end) for end in range_ns):
        return None, None
    return ns_to_ms(float(range_ns[0])), ns_to_ms(float(range_ns[1]))


def _what_if(predicted: WhatIf | None) -> WhatIfFacts | None:
    if predicted is None:
        return None
    low, high = _ms_range(predicted.all_syncs_range_ns)
    return WhatIfFacts(
        replayed_step_ms=ns_to_ms(predicted.replayed_step_ns),
        unprofiled_step_ms=ns_to_ms(predicted.unprofiled_step_ns),
        host_scale=round(predicted.host_scale, 4),
        calibrated=predicted.calibrated,
        calibration_held=predicted.calibration_held,
        calibrated_step_ms=None if predicted.calibrated_step_ns is None else ns_to_ms(predicted.calibrated_step_ns),
        predicted_step_ms_without_syncs=ns_to_ms(predicted.without_syncs_step_ns),
        launch_latency_us=round(predicted.latency_ns / 1e3, 3),
        replayed_steps=list(predicted.replayed_steps),
        sites_left_out=predicted.sites_left_out,
        note=predicted.note,
        saving_ms_all_syncs_low=low,
        saving_ms_all_syncs_high=high,
    )


def _per_step(found: StageOutputs) -> PerStep | None:
    stats = found.step_stats
    if stats.empty:
        return None
    return PerStep(
        number=(np.arange(len(stats)) + found.steps.warmup + 1).tolist(),
        host_ns=_ints(stats["duration_ns"]),
        gpu_ns=[None if math.isnan(v) else int(v) for v in stats["gpu_duration_ns"].astype(float).tolist()],
        gpu_idle_ns=_ints(stats["gpu_idle_ns"]),
        exposed_idle_ns=_ints(stats["exposed_idle_ns"]),
    )


def _timeline(excerpt: TimelineExcerpt) -> Timeline:
    labels = excerpt.thread_labels
    ops, calls, syncs, lead = excerpt.ops, excerpt.calls, excerpt.syncs, excerpt.lead
    kernel_or_op = ops["name"].astype(object).where(ops["name"].notna(), ops["op"].astype(str))
    median = excerpt.median_step_ns
    return Timeline(
        start_ns=excerpt.start_ns,
        end_ns=excerpt.end_ns,
        description=excerpt.description,
        median_step_ns=None if median is None else list(median),
        ops=TimelineOps(
            start_ns=_ints(ops["start"]),
            end_ns=_ints(ops["end"]),
            lane=[f"GPU {d} · stream {s}" for d, s in zip(ops["device_id"].tolist(), ops["stream_id"].tolist())],
            op=ops["op"].astype(str).tolist(),
            name=[str(name) for name in kernel_or_op.tolist()],
            device=_ints(ops["device_id"]),
        ),
        calls=TimelineCalls(
            start_ns=_ints(calls["start"]),
            end_ns=_ints(calls["end"]),
            thread=[labels[t] for t in calls["global_tid"].tolist()],
            api=calls["api"].astype(str).tolist(),
        ),
        syncs=TimelineSyncs(
            start_ns=_ints(syncs["start"]),
            end_ns=_ints(syncs["end"]),
            thread=[labels[t] for t in syncs["global_tid"].tolist()],
            kind=syncs["kind"].astype(str).tolist(),
            exposed_start_ns=_ints(syncs["exposed_start_ns"]),
            rebuild_ns=_ints(syncs["rebuild_ns"]),
            exposed_idle_ns=_ints(syncs["exposed_idle_ns"]),
            where=[where(f, n) for f, n in zip(syncs["file"].tolist(), syncs["line"].tolist())],
            function=syncs["function"].astype(str).tolist(),
        ),
        lead=TimelineLead(
            t_ns=_ints(lead["t"]),
            lead_ns=_ints(lead["lead_ns"]),
            thread=[labels[t] for t in lead["global_tid"].tolist()],
        ),
        exposed=excerpt.exposed,
        utilisation=excerpt.utilisation,
        step_utilisation=excerpt.step_utilisation,
    )
