"""``nsync.analyze``: the pipeline, load -> detect -> steps -> attribute -> call sites -> advice -> replay ->
verdict -> report, each step a call of a stage; the result is built once, by the last."""

from __future__ import annotations

import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from itertools import compress
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from nsync.code import search_folders
from nsync.config import AnalysisConfig
from nsync.load import Trace, load_trace
from nsync.load.calibration import Calibration, beside, read_calibration
from nsync.notices import Notice
from nsync.report import Analysis
from nsync.settings import setting
from nsync.stages.advice import ReadGroup, advise_callsites, advise_loops, in_source, read_groups
from nsync.stages.advice.scopes import FixScope, fix_scopes
from nsync.stages.attribute import attribute_syncs, device_busy, lead_curves
from nsync.stages.callsites import assign_stacks, issued_by_own_code, label_callsites, rank_callsites
from nsync.stages.detect import detect_syncs, is_relevant_api
from nsync.stages.excerpt import timeline_excerpt
from nsync.stages.phases import PHASE_COLUMNS, PHASE_SITE_COLUMNS, phase_intervals, phase_table
from nsync.stages.replay import ReplaySettings, ReplaySkipped, WhatIf, priced_callsites, what_if
from nsync.stages.report import StageOutputs, analysis_result
from nsync.stages.steps import Steps, bound_by_data, data_waits_ns, empty_steps_table, find_steps
from nsync.stages.totals import (
    STEP_STATS_COLUMNS,
    analysed_intervals,
    analysed_window,
    cuda_span,
    data_loader_notices,
    gpu_step_times_of,
    gpus_used,
    kernel_time,
    program_of,
    step_stats,
    totals_of,
)
from nsync.stages.verdict import judge
from nsync.waiting import result

# one row per analysed step
NO_CUDA = "no CUDA activity in this trace: nothing to attribute"
NO_CUDA_NSYS = f"{NO_CUDA} (was the program run on a GPU, with -t cuda?)"  # (the torch.profiler reader says its own)
NO_GPU_WORK = "CUDA API calls but no GPU work (kernels, copies, memsets) in this trace: nothing to attribute"
Say = Callable[[str], None]
CalibrationChoice = Calibration | Path | Literal["beside"] | None


def analyze(
    source: str | Path | Trace,
    config: AnalysisConfig | None = None,
    progress: Say | None = None,
    calibration: CalibrationChoice = "beside",
    source_dirs: list[Path] | None = None,
) -> Analysis:
    """Find every CUDA sync in a trace, price it, rank the Python call sites by what fixing them saves, and
    write each one's fix from its code.

    ``source``: an nsys SQLite export (``.sqlite``, ``.sqlite.xz``), an ``.nsys-rep`` (exported with the
    installed nsys), or a loaded :class:`Trace`. ``config``: steps, warm-up, window and memory settings.
    ``progress``: called with each stage's name. ``calibration``: the program's unprofiled step times, which
    the what-if is fitted to: ``"beside"`` (the default) reads the ``NAME.calibration.json`` that ``nsync
    profile`` left beside the trace, if there is one; a path reads that file; None leaves the prediction
    uncalibrated. ``source_dirs``: where else to look for the traced program's files (by name) when the paths
    the trace names are not readable here; the trace's folder and the working directory are searched first.
    Returns the :class:`nsync.Analysis`. Raises UsageError (a bad setting, a missing file), TraceError (not an
    nsys export, or damaged beyond use), NsysError (an ``.nsys-rep`` without a working nsys).

        >>> analysis = nsync.analyze("run.sqlite", nsync.AnalysisConfig(step_range="train_step"))
        >>> [(site.where, site.predicted_saving_ms_per_step) for site in analysis.callsites[:3]]
    """
    return analysis_result(run_stages(source, config, progress, calibration, source_dirs))


def calibration_of(source: str | Path | Trace, choice: CalibrationChoice) -> Calibration | None:
    """The calibration ``choice`` names for ``source`` (see analyze): a bad file is an error, never ignored."""
    if choice is None or isinstance(choice, Calibration):
        return choice
    if choice == "beside":
        if isinstance(source, Trace):
            return None
        path = beside(Path(source))
        return read_calibration(path) if path.is_file() else None
    return read_calibration(Path(choice))


def run_stages(
    source: str | Path | Trace,
    config: AnalysisConfig | None = None,
    progress: Say | None = None,
    calibration: CalibrationChoice = "beside",
    source_dirs: list[Path] | None = None,
) -> StageOutputs:
    """Every stage of the analysis in order, and what each found (analyze makes the result of it)."""
    config = config or AnalysisConfig()
    say = progress or (lambda _stage: None)
    calibrated_by = calibration_of(source, calibration)
    trace = _trace(source, config, say, source_dirs)
    if not trace.has_cuda or trace.gpu_ops.empty:
        return _empty(trace, config, _empty_reason(trace, config))
    found = _found(trace, config, say)
    say("writing the fixes")
    search = search_folders(trace.path, source_dirs)
    callsites = advise_callsites(rank_callsites(found.in_window, found.stacks, found.steps.count), search)
    groups = read_groups(callsites, search) if found.steps.count else []
    scopes = fix_scopes(callsites, search) if found.steps.count else []
    say("replaying what-if")
    warnings = [*trace.warnings, *_process_notices(trace.gpu_ops)]
    settings = _replay_settings(
        config, calibrated_by, found.steps, warnings, bound_by_data(found.steps, trace.nvtx_ranges), trace.profiler
    )
    released = [group.released for group in groups] + [scope.site_ids for scope in scopes]
    predicted, callsites = _replayed(trace.gpu_ops, found, callsites, settings, released, search, warnings)
    say("summarising")
    return _summarised(trace, config, found, _Priced(callsites, groups, scopes, predicted, warnings))


@dataclass(frozen=True)
class _Found:
    """What the stages up to the call sites found: the steps, every sync attributed and named, and the GPU side."""

    steps: Steps
    syncs: pd.DataFrame  # every sync
    inside: pd.Series  # which of them the per-step figures hold
    in_window: pd.DataFrame  # those
    stacks: list[Any]
    busy: dict[tuple[int, int], Any]  # each GPU's busy intervals
    window: tuple[int, int]
    curves: dict[int, Any]  # each syncing thread's lead
    kernel_time_ns: dict[str, int]
    gpu_step_ns: np.ndarray


@dataclass(frozen=True)
class _Priced:
    """The call sites with their fixes and savings, the reads one copy would do, the fixes of several sites (the
    what-if prices them after the reads), the what-if, the warnings."""

    callsites: pd.DataFrame
    groups: list[ReadGroup]
    scopes: list[FixScope]
    what_if: WhatIf | None
    warnings: list[Notice]


def _found(trace: Trace, config: AnalysisConfig, say: Say) -> _Found:
    """Detect, steps, attribute and call sites."""
    ops = trace.gpu_ops
    say("detecting syncs")
    # The figures that need only the GPU side are computed on a second thread meanwhile: numpy lets go of
    # the GIL on big arrays, and these stages allocate little beside sync detection.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="nsync-gpu-side") as beside_:
        steps_job = beside_.submit(find_steps, trace, ops, config)
        kernel_time_job = beside_.submit(kernel_time, ops)
        gpu_step_job = beside_.submit(lambda: gpu_step_times_of(steps_job.result(), ops))
        syncs = detect_syncs(trace, ops)
        steps, kernel_time_ns, gpu_step_ns = result(steps_job), result(kernel_time_job), result(gpu_step_job)
    say("measuring GPU busy time")
    busy = device_busy(trace, ops)
    say("following each thread's lead")
    window = analysed_window(steps, ops)
    curves = lead_curves(ops, syncs["global_tid"].to_numpy(), config)
    say("attributing GPU idle")
    syncs = attribute_syncs(ops, syncs, steps, busy, config, window[1], curves)
    say("naming call sites")
    syncs, stacks = assign_stacks(trace, syncs)
    syncs = label_callsites(syncs, stacks)
    # per-step figures cover only what happens inside the analysed steps
    inside = syncs["step"] >= 0 if steps.count else syncs["start"].between(window[0], window[1], inclusive="left")
    in_window = syncs.loc[inside].reset_index(drop=True)
    return _Found(steps, syncs, inside, in_window, stacks, busy, window, curves, kernel_time_ns, gpu_step_ns)


def _summarised(trace: Trace, config: AnalysisConfig, found: _Found, priced: _Priced) -> StageOutputs:
    """The phases, the per-step and total figures, the timeline excerpt and the verdict, with what came before."""
    ops, steps, window, warnings = trace.gpu_ops, found.steps, found.window, priced.warnings
    intervals = phase_intervals(steps, cuda_span(trace, ops))
    phases, phase_sites = phase_table(intervals, found.busy, found.syncs, steps.count)
    starts, ends = analysed_intervals(steps, window)
    idle_by_gpu = {key: union.idle_between(starts, ends) for key, union in found.busy.items()}  # each GPU, interval
    gpu_names, gpu_uuids = gpus_used(trace, ops)
    totals = totals_of(found.in_window, idle_by_gpu, int((ends - starts).sum()), gpu_names)
    totals["syncs_outside_window"] = outside = int((~found.inside).sum())
    if outside and not steps.count:  # with steps, the phases count and list them
        warnings.append(_outside_notice(outside, len(found.syncs)))
    stats = step_stats(steps, found.in_window, idle_by_gpu, found.gpu_step_ns, data_waits_ns(steps, trace.nvtx_ranges))
    warnings.extend(data_loader_notices(stats))
    return StageOutputs(
        trace_path=str(trace.path),
        nsys_version=trace.nsys_version,
        profiler=trace.profiler,
        schema_version=trace.schema_version,
        gpus=list(gpu_names.values()),
        gpu_uuids=gpu_uuids,
        config=config,
        steps=steps,
        step_stats=stats,
        window_ns=window,
        syncs=found.in_window,
        callsites=priced.callsites,
        totals=totals,
        warnings=warnings,
        what_if=priced.what_if,
        timeline=timeline_excerpt(trace, ops, found.syncs, steps, window, found.curves),
        thread_names=dict(zip(trace.threads["global_tid"].tolist(), trace.threads["name"].astype(str).tolist())),
        program=program_of(trace),
        kernel_time_ns=found.kernel_time_ns,
        phases=phases,
        phase_sites=phase_sites,
        verdict=judge(priced.callsites, priced.what_if, config, priced.groups, priced.scopes),
        read_groups=priced.groups,
        fix_scopes=priced.scopes,
    )


def _process_notices(ops: pd.DataFrame) -> list[Notice]:
    processes = len(pd.unique(ops["global_pid"]))
    if processes <= 1:
        return []
    return [
        Notice(
            "processes-pooled",
            f"{processes} processes ran GPU work in this trace: their figures are pooled here (the ranks of a "
            "data-parallel run: nsync ranks lines them up on their collectives)",
        )
    ]


def _outside_notice(outside: int, syncs: int) -> Notice:
    many = outside != 1
    return Notice(
        "syncs-outside-window",
        f"{outside} more sync{'s' if many else ''} ({100 * outside / syncs:.0f}% of {syncs}) "
        f"{'lie' if many else 'lies'} outside the analysed window: {'they are' if many else 'it is'} not in "
        "these figures",
    )


def _replay_settings(
    config: AnalysisConfig,
    calibration: Calibration | None,
    steps: Steps,
    warnings: list[Notice],
    waits_for_data: bool,
    profiler: str,
) -> ReplaySettings:
    """How the what-if replays: calibrated where the calibration timed these steps (else a warning says so)."""
    settings = ReplaySettings(
        host_scale=config.host_scale,
        scale_range=config.host_scale_range,
        spread=config.calibration_spread,
        host_speed_spread=config.host_speed_spread,
        waits_for_data=waits_for_data,
        profiler=profiler,
    )
    if calibration is None or not steps.count:
        return settings
    calibrated_steps_ns = calibration.steps_ns(steps.source, steps.warmup, steps.optimizer_steps)
    if calibrated_steps_ns is None:
        timed = ", ".join(calibration.intervals_ns) or "nothing"
        warnings.append(
            Notice(
                "uncalibrated",
                f"calibration {calibration.path}: no unprofiled timings for steps of {steps.source} (the calibration "
                f"run timed {timed}): predictions are uncalibrated",
            )
        )
    return replace(
        settings,
        spread=max(config.calibration_spread, calibration.spread(steps.source, steps.optimizer_steps)),
        calibrated_steps_ns=calibrated_steps_ns,
        calibration_runs=calibration.runs,
    )


def _replayed(
    ops: pd.DataFrame,
    found: _Found,
    callsites: pd.DataFrame,
    settings: ReplaySettings,
    released: list[list[int]],
    search: list[Path],
    warnings: list[Notice],
) -> tuple[WhatIf | None, pd.DataFrame]:
    """The what-if (None where it was skipped, a warning says why), and the call sites priced and ranked by it,
    with the fix of each loop of reads the source does not deny; ``released``: the sites each group of the
    what-if releases together."""
    own_sites = [int(site) for site in callsites.loc[issued_by_own_code(callsites), "site_id"]]
    try:
        predicted = what_if(ops, found.syncs, found.steps, callsites, settings, released, own_sites)
    except ReplaySkipped as skipped:
        warnings.append(Notice("replay-skipped", str(skipped)))
        return None, callsites
    sites_of_loops = [loop.sites for loop in predicted.loops]
    predicted = replace(predicted, loops=tuple(compress(predicted.loops, in_source(callsites, sites_of_loops, search))))
    callsites = priced_callsites(callsites, predicted)
    in_loops = {site: loop.reads_per_step for loop in predicted.loops for site in loop.sites}
    callsites = advise_loops(callsites, in_loops, search)
    if predicted.slower_ns > 0.01 * predicted.unprofiled_step_ns:
        warnings.append(
            Notice(
                "replay-slower",
                f"what-if: releasing a wait made the replayed step {predicted.slower_ns / 1e6:.2f} ms longer, which "
                "no true trace does (its calls and kernels disagree: see above); that saving is shown as none",
            )
        )
    if predicted.sites_left_out:
        warnings.append(
            Notice(
                "sites-not-replayed",
                f"what-if: {predicted.sites_left_out} of {len(callsites)} call sites not replayed (too many syncs "
                "to replay them all): their saving is unknown",
            )
        )
    return predicted, callsites


def _trace(source: str | Path | Trace, config: AnalysisConfig, say: Say, source_dirs: list[Path] | None) -> Trace:
    """The loaded trace, exporting an .nsys-rep to a temporary SQLite first."""
    if isinstance(source, Trace):
        return source
    load = functools.partial(
        load_trace,
        progress=say,
        keep_api=is_relevant_api,
        window_s=config.window_s,
        max_memory_bytes=config.max_memory_bytes,
        source_dirs=source_dirs,
    )
    if Path(source).suffix in (".nsys-rep", ".qdrep"):
        from nsync.load.nsys.export import exported

        with exported(Path(source), say) as sqlite:
            return replace(load(sqlite), path=Path(source))
    return load(source)


def _empty_reason(trace: Trace, config: AnalysisConfig) -> str:
    """Why there is nothing to attribute: the trace, or only the chosen part of it, has no GPU work."""
    if config.window_s is not None and trace.span_ns is not None:
        start, end = config.window_s
        length_s = (trace.span_ns[1] - trace.span_ns[0]) / 1e9
        chosen = f"{start:.3f}-{'end' if end is None else f'{end:.3f}'} s"
        return (
            f"the chosen window ({chosen}) holds no GPU work: the capture spans 0.000-{length_s:.3f} s "
            f"(choose another {setting('AnalysisConfig.window_s')}, in seconds from the capture's start)"
        )
    if trace.has_cuda:
        return NO_GPU_WORK
    return NO_CUDA_NSYS if trace.profiler == "nsys" else NO_CUDA


def _empty(trace: Trace, config: AnalysisConfig, reason: str) -> StageOutputs:
    steps = Steps(table=empty_steps_table(), source="none", warmup=0)
    return StageOutputs(
        trace_path=str(trace.path),
        nsys_version=trace.nsys_version,
        profiler=trace.profiler,
        schema_version=trace.schema_version,
        gpus=[str(name) for name in trace.gpus["name"]],
        config=config,
        steps=steps,
        step_stats=pd.DataFrame({column: pd.Series(dtype=np.int64) for column in STEP_STATS_COLUMNS}),
        window_ns=(0, 0),
        syncs=pd.DataFrame(),
        callsites=advise_callsites(rank_callsites(pd.DataFrame(), [], 0), []),
        totals=totals_of(pd.DataFrame(), {}, 0),
        warnings=[*trace.warnings, Notice("no-cuda", reason)],
        status="no-cuda" if not trace.has_cuda else "no-gpu-work",
        phases=pd.DataFrame(columns=list(PHASE_COLUMNS)),
        phase_sites=pd.DataFrame(columns=list(PHASE_SITE_COLUMNS)),
    )
