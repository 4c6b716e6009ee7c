"""The pipeline: load -> detect -> steps -> attribute -> call sites, as one public function."""

from __future__ import annotations

import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from itertools import compress
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from nsync.calibration import Calibration
from nsync.config import AnalysisConfig
from nsync.keys import dense_codes
from nsync.load import CallsiteSource, Trace, load_trace
from nsync.settings import setting
from nsync.source import search_folders
from nsync.stages.advice import ReadGroup, advise_callsites, advise_loops, in_source, read_groups
from nsync.stages.attribute import attribute_syncs, device_busy, lead_curves
from nsync.stages.callsites import (
    assign_stacks,
    issued_by_own_code,
    label_callsites,
    library_package,
    rank_callsites,
)
from nsync.stages.detect import detect_syncs, is_relevant_api
from nsync.stages.excerpt import TimelineExcerpt, timeline_excerpt
from nsync.stages.phases import PHASE_COLUMNS, PHASE_SITE_COLUMNS, phase_intervals, phase_table
from nsync.stages.replay import LOOP_COLUMNS, SAVING_COLUMNS, ReplaySkipped, WhatIf, saving_range, what_if
from nsync.stages.steps import Steps, empty_steps_table, find_steps, gpu_step_times, launched_in_steps
from nsync.waiting import result

SCHEMA = "nsync.analysis/1"
# one row per analysed step
STEP_STATS_COLUMNS = ("start", "end", "duration_ns", "gpu_duration_ns", "gpu_idle_ns", "exposed_idle_ns", "sync_count")
NO_CUDA = "no CUDA activity in this trace: nothing to attribute (was the program run on a GPU, with -t cuda?)"
NO_GPU_WORK = "CUDA API calls but no GPU work (kernels, copies, memsets) in this trace: nothing to attribute"


@dataclass(frozen=True)
class Analysis:
    """What the pipeline found; nsync.report.analysis makes the report the renderers print of it."""

    trace_path: str
    nsys_version: str | None
    schema_version: str | None
    gpus: list[str]
    config: AnalysisConfig
    steps: Steps
    step_stats: pd.DataFrame
    window_ns: tuple[int, int]
    # the syncs inside the analysed steps (the whole window without steps), in detect.SYNC_ORDER: the per-step
    # figures' syncs. The what-if, the timeline excerpt and the phases see all of them.
    syncs: pd.DataFrame
    callsites: pd.DataFrame
    totals: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    status: str = "ok"  # ok | no-cuda | no-gpu-work
    timeline: TimelineExcerpt | None = None
    thread_names: dict[int, str] = field(default_factory=dict)
    what_if: WhatIf | None = None
    program: str = ""  # the captured command line, as nsys recorded it (empty when unknown)
    kernel_time_ns: dict[str, int] = field(default_factory=dict)  # GPU time per kernel name
    phases: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(PHASE_COLUMNS)))
    phase_sites: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(PHASE_SITE_COLUMNS)))
    verdict: Verdict | None = None
    read_groups: list[ReadGroup] = field(default_factory=list)  # reads one copy would do (what_if prices them)
    gpu_uuids: list[str] = field(default_factory=list)  # the physical GPUs the work ran on, where the export says


@dataclass(frozen=True)
class Verdict:
    """The answer in one line: whether any sync of the main loop is worth fixing, by the largest predicted
    saving as a share of the predicted (unprofiled) step, and its likely range (AnalysisConfig.saving_ratio):
    worth fixing when even the range's low end passes the threshold, nothing worth fixing when even its high
    end does not, and "measure" when the range straddles the threshold."""

    largest_saving_ns: float
    step_ns: float
    worth_fixing: bool  # the low end of the saving's range passes the threshold
    site: str  # the call site that saves most: "file.py:12", "run.py:9 (issued at trainer.py:1847)"
    together: bool = False  # no site alone is worth fixing, but all of them together are (or may be)
    only_own: bool = False  # together: of the syncs the program's own code issues (a library issues others)
    beyond_reach: str = ""  # what the costliest sync no setting removes costs (a library's), said beside it
    low_ns: float = 0.0  # the saving's likely range
    high_ns: float = 0.0
    measure: bool = False  # the range straddles the threshold: a measurement must tell
    threshold_share: float = 0.05

    @property
    def share(self) -> float:
        return self.largest_saving_ns / self.step_ns if self.step_ns > 0 else 0.0

    @property
    def text(self) -> str:
        share = f"{100 * self.share:.1f} %"
        likely = f"likely {self.low_ns / 1e6:.2f}-{self.high_ns / 1e6:.2f} ms"
        figure = f"{self.largest_saving_ns / 1e6:.2f} ms per step ({share}; {likely})"
        measure = (
            f", near the {100 * self.threshold_share:g} % worth fixing: measure it (put the fix behind "
            "`if nsync.fixed():`, as --suggest-switch does nsync's rewrites, and nsync measure the program)"
        )
        beside = f"; {self.beyond_reach}" if self.beyond_reach else ""
        if self.together:
            would = "may save" if self.measure else "would save"
            return (
                f"fixing all the syncs {'in your code' if self.only_own else 'of the step'} together {would} "
                f"{figure}; no one of them alone: each waits for "
                f"the same GPU work{measure if self.measure else ''}{beside}"
            )
        if self.worth_fixing:
            return f"fixing {self.site} would save {figure}{beside}"
        if self.measure:
            return f"fixing {self.site} may save {figure}{measure}{beside}"
        under = f"; likely under {self.high_ns / 1e6:.2f} ms" if self.high_ns > self.largest_saving_ns else ""
        which = "the syncs a fix can remove" if self.beyond_reach else "syncs"
        return (
            f"{which} cost at most {self.largest_saving_ns / 1e6:.2f} ms per step ({share}{under}): nothing here "
            f"is worth fixing for speed{beside}"
        )


def analyze(
    source: str | Path | Trace,
    config: AnalysisConfig | None = None,
    progress: Callable[[str], None] | None = None,
    calibration: Calibration | None = None,
    source_dirs: list[Path] | None = None,
) -> Analysis:
    """Find every CUDA sync in a trace, price it, rank the Python call sites by what fixing them saves, and
    write each one's fix from its code.

    ``source``: an nsys SQLite export (``.sqlite``, ``.sqlite.xz``), an ``.nsys-rep`` (exported with the
    installed nsys), or a loaded :class:`Trace`. ``config``: steps, warm-up, window and memory settings.
    ``progress``: called with each stage's name. ``calibration``: the program's unprofiled step times
    (nsync.calibration, written by ``nsync profile``), which the what-if is fitted to. ``source_dirs``: where
    else to look for the traced program's files (by name) when the paths the trace names are not readable here;
    the trace's folder and the working directory are searched first.
    Returns the :class:`Analysis` (its ``callsites`` table ranked; ``nsync.build_report`` for every figure).
    Raises UsageError (a bad setting, a missing file), TraceError (not an nsys export, or damaged beyond use),
    NsysError (an ``.nsys-rep`` without a working nsys).

        >>> analysis = nsync.analyze("run.sqlite", nsync.AnalysisConfig(step_range="train_step"))
        >>> analysis.callsites[["file", "line", "predicted_saving_ns_per_step"]].head(3)
    """
    config = config or AnalysisConfig()

    def say(stage: str) -> None:
        if progress is not None:
            progress(stage)

    trace = _trace(source, config, say)
    ops = trace.gpu_ops
    if not trace.has_cuda or ops.empty:
        return _empty(trace, config, _empty_reason(trace, config))
    say("detecting syncs")
    # The figures that need only the GPU side are computed on a second thread meanwhile: numpy lets go of
    # the GIL on big arrays, and these stages allocate little beside sync detection.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="nsync-gpu-side") as beside:
        steps_job = beside.submit(find_steps, trace, ops, config)
        kernel_time_job = beside.submit(_kernel_time, ops)
        gpu_step_job = beside.submit(lambda: _gpu_step_times(steps_job.result(), ops))
        syncs = detect_syncs(trace, ops)
        steps, kernel_time_ns = result(steps_job), result(kernel_time_job)
        gpu_step_ns = result(gpu_step_job)
    say("measuring GPU busy time")
    busy = device_busy(trace, ops)
    say("following each thread's lead")
    window = _window(steps, ops)
    curves = lead_curves(ops, syncs["global_tid"].to_numpy(), config)
    say("attributing GPU idle")
    syncs = attribute_syncs(ops, syncs, steps, busy, config, window[1], curves)
    say("naming call sites")
    syncs, stacks = assign_stacks(trace, syncs)
    syncs = label_callsites(syncs, stacks)
    # per-step figures cover only what happens inside the analysed steps
    inside = syncs["step"] >= 0 if steps.count else syncs["start"].between(window[0], window[1], inclusive="left")
    in_window = syncs.loc[inside].reset_index(drop=True)
    callsites = rank_callsites(in_window, stacks, steps.count)
    say("writing the fixes")
    search = search_folders(trace.path, source_dirs)
    callsites = advise_callsites(callsites, search)
    groups = read_groups(callsites, search) if steps.count else []
    say("replaying what-if")
    warnings = list(trace.warnings)
    processes = len(pd.unique(ops["global_pid"]))
    if processes > 1:
        warnings.append(
            f"{processes} processes ran GPU work in this trace: their figures are pooled here (the ranks of a "
            "data-parallel run: nsync ranks lines them up on their collectives)"
        )
    calibrated_steps_ns = None
    if calibration is not None and steps.count:
        calibrated_steps_ns = calibration.steps_ns(steps.source, steps.warmup)
        if calibrated_steps_ns is None:
            warnings.append(
                f"calibration {calibration.path}: no unprofiled timings for steps of {steps.source} "
                "(the calibration run timed " + (", ".join(calibration.intervals_ns) or "nothing") + "): "
                "predictions are uncalibrated"
            )
    predicted: WhatIf | None = None
    try:
        predicted = what_if(
            ops,
            syncs,
            steps,
            callsites,
            config.host_scale,
            calibrated_steps_ns,
            [g.released for g in groups],
            spread=config.calibration_spread
            if calibration is None
            else max(config.calibration_spread, calibration.spread(steps.source)),
            scale_range=config.host_scale_range,
            own_sites=_own_sites(callsites),
            host_speed_spread=config.host_speed_spread,
            calibration_runs=1 if calibration is None else calibration.runs,
        )
    except ReplaySkipped as skipped:
        warnings.append(str(skipped))
    if predicted is not None:
        loops = predicted.loops  # only those the source does not deny
        predicted = replace(
            predicted, loops=tuple(compress(loops, in_source(callsites, [x.sites for x in loops], search)))
        )
        callsites = _with_savings(callsites, predicted, config)
        in_loops = {site: loop.reads_per_step for loop in predicted.loops for site in loop.sites}
        callsites = advise_loops(callsites, in_loops, search)
        if predicted.sites_left_out:
            warnings.append(
                f"what-if: {predicted.sites_left_out} of {len(callsites)} call sites not replayed (too many syncs "
                "to replay them all): their saving is unknown"
            )
    say("summarising")
    intervals = phase_intervals(steps, _cuda_span(trace, ops))
    phases, phase_sites = phase_table(intervals, busy, syncs, steps.count)
    starts, ends = _analysed_intervals(steps, window)
    idle_by_gpu = {key: union.idle_between(starts, ends) for key, union in busy.items()}  # each GPU, each interval
    step_stats = _step_stats(steps, in_window, idle_by_gpu, gpu_step_ns)
    gpu_names, gpu_uuids = _gpus_used(trace, ops)
    totals = _totals(in_window, idle_by_gpu, int((ends - starts).sum()), gpu_names)
    totals["syncs_outside_window"] = outside = int((~inside).sum())
    if outside and not steps.count:  # with steps, the phases count and list them
        many = outside != 1
        warnings.append(
            f"{outside} more sync{'s' if many else ''} ({100 * outside / len(syncs):.0f}% of {len(syncs)}) "
            f"{'lie' if many else 'lies'} outside the analysed window: {'they are' if many else 'it is'} not in "
            "these figures"
        )
    return Analysis(
        trace_path=str(trace.path),
        nsys_version=trace.nsys_version,
        schema_version=trace.schema_version,
        gpus=list(gpu_names.values()),
        gpu_uuids=gpu_uuids,
        config=config,
        steps=steps,
        step_stats=step_stats,
        window_ns=window,
        syncs=in_window,
        callsites=callsites,
        totals=totals,
        warnings=warnings,
        what_if=predicted,
        timeline=timeline_excerpt(trace, ops, syncs, steps, window, curves),
        thread_names=dict(zip(trace.threads["global_tid"].tolist(), trace.threads["name"].astype(str).tolist())),
        program=program_of(trace),
        kernel_time_ns=kernel_time_ns,
        phases=phases,
        phase_sites=phase_sites,
        verdict=_verdict(callsites, predicted, config, _frame_note(trace.warnings), groups),
        read_groups=groups,
    )


def _frame_note(warnings: list[str]) -> str:
    """The loader's word on why the trace names no Python line, and how to capture it (nsync.load)."""
    return next((w for w in warnings if "Python" in w and ("capture" in w or "export" in w)), "")


def _verdict(
    callsites: pd.DataFrame,
    predicted: WhatIf | None,
    config: AnalysisConfig,
    frame_note: str = "",
    groups: list[ReadGroup] | None = None,
) -> Verdict | None:
    """None without a prediction (no steps, or the replay was skipped). A site with no Python frame is named
    by its API and native function, and the verdict says how to capture its Python line (``frame_note``):
    a shared library's name is nothing to act on. Reads that one copy would do (``groups``) are named
    together where that saves more than any one site."""
    if predicted is None or not np.isfinite(predicted.unprofiled_step_ns):
        return None
    saving = callsites["predicted_saving_ns_per_step"].to_numpy(float) if len(callsites) else np.zeros(0)
    known = np.isfinite(saving)
    no_setting = _no_setting(callsites)
    out_of_reach, beyond_reach = _beyond_reach(callsites, saving, known & no_setting)
    known &= ~no_setting
    if not known.any():
        return _judged(0.0, (0.0, 0.0), predicted.unprofiled_step_ns, "", config, beyond_reach=beyond_reach)
    best = int(np.nanargmax(np.where(known, saving, -np.inf)))
    largest = max(float(saving[best]), 0.0)
    beyond_reach = beyond_reach if out_of_reach > largest else ""
    row = callsites.iloc[best]
    site = f"{Path(str(row['file'])).name}:{int(row['line'])}"
    if (row["sync_file"], row["sync_line"]) != (row["file"], row["line"]):  # a library issues it
        site += f" (issued at {Path(str(row['sync_file'])).name}:{int(row['sync_line'])})"
    if row["callsite_source"] != CallsiteSource.PYTHON_BACKTRACE:
        apis = "/".join(str(api) for api in row["apis"]) or "CUDA"
        where = f" in {row['function']} ({Path(str(row['file'])).name})" if row["function"] != apis else ""
        note = frame_note.rstrip(".") or "capture with Python backtraces (nsync profile) to name it"
        site = f"the {apis} syncs{where}, whose Python line this trace does not name ({note})"
    span = predicted.saving_span_ns.get(int(row["site_id"]), (largest, largest))
    for group, group_saving, group_span in zip(groups or [], predicted.group_saving_ns, predicted.group_saving_span_ns):
        if group_saving > largest:
            largest, span = group_saving, group_span
            site = f"{Path(group.file).name}:{','.join(map(str, group.lines))} (their reads together)"
    fixable = set(callsites.loc[~no_setting, "site_id"].astype(int))
    for loop in predicted.loops:
        if loop.saving_ns > largest and fixable.issuperset(loop.sites):
            largest, span = loop.saving_ns, loop.span_ns
            their = "its" if len(loop.sites) == 1 else "their"
            site = f"{_lines_of(callsites, loop.sites)} ({their} loop, for all items at once)"
    threshold = config.worth_fixing_share * predicted.unprofiled_step_ns
    together = predicted.own_saving_ns
    own = issued_by_own_code(callsites).to_numpy()
    if largest < threshold <= together and (saving[known & own] > 0).sum() >= 2:
        # no one site pays alone: they wait for the same work (fixing one leaves the other to wait for it); only
        # the syncs of the program's own code: those a library issues are no fix of the user's to make
        return _judged(
            together,
            predicted.own_span_ns,
            predicted.unprofiled_step_ns,
            "",
            config,
            together=True,
            only_own=not own.all(),
        )
    return _judged(largest, span, predicted.unprofiled_step_ns, site, config, beyond_reach=beyond_reach)


def _lines_of(callsites: pd.DataFrame, sites: tuple[int, ...]) -> str:
    """The call sites' lines, as ``file.py:34,35`` (each file named once)."""
    rows = callsites.loc[callsites["site_id"].isin(sites)].sort_values(["file", "line"])
    by_file: dict[str, list[str]] = {}
    for file, line in zip(rows["file"], rows["line"]):
        by_file.setdefault(Path(str(file)).name, []).append(str(int(line)))
    return ", ".join(f"{file}:{','.join(lines)}" for file, lines in by_file.items())


def _no_setting(callsites: pd.DataFrame) -> np.ndarray:
    """The sites a known library issues and no setting of it removes (a data-dependent shape in a detection
    model, generate()'s finished check): no fix of the user's, so no verdict names them."""
    if "advice" not in callsites:
        return np.zeros(len(callsites), bool)
    return np.array([a is not None and a.basis == "library" and not a.setup for a in callsites["advice"]], bool)


def _beyond_reach(callsites: pd.DataFrame, saving: np.ndarray, candidates: np.ndarray) -> tuple[float, str]:
    """The saving of the costliest of the ``candidates`` (sites no setting removes, priced), and how the verdict
    says it: "the syncs inside torchvision (boxes.py:48) cost 3.11 ms per step, which no setting removes";
    (0, '') where there is none."""
    if not candidates.any():
        return 0.0, ""
    k = int(np.nanargmax(np.where(candidates, saving, -np.inf)))
    row = callsites.iloc[k]
    package = library_package(str(row["sync_file"])) or "a library"
    cost = max(float(saving[k]), 0.0)
    where = f"{Path(str(row['sync_file'])).name}:{int(row['sync_line'])}"
    return cost, f"the syncs inside {package} ({where}) cost {cost / 1e6:.2f} ms per step, which no setting removes"


def _own_sites(callsites: pd.DataFrame) -> list[int]:
    """The call sites whose syncs the program's own code issues, not a library it calls."""
    return [int(site) for site in callsites.loc[issued_by_own_code(callsites), "site_id"]]


def _judged(
    saving_ns: float,
    span_ns: tuple[float, float],
    step_ns: float,
    site: str,
    config: AnalysisConfig,
    together: bool = False,
    only_own: bool = False,
    beyond_reach: str = "",
) -> Verdict:
    """The verdict on ``saving_ns`` by where its likely range (from ``span_ns``, the least and the largest
    it is at the host scales replayed) lies against the threshold."""
    low, high = (float(end) for end in saving_range(max(span_ns[0], 0.0), max(span_ns[1], 0.0), config.saving_ratio))
    threshold = config.worth_fixing_share * step_ns
    return Verdict(
        saving_ns,
        step_ns,
        worth_fixing=low >= threshold,
        site=site,
        together=together,
        only_own=only_own,
        beyond_reach=beyond_reach,
        low_ns=low,
        high_ns=high,
        measure=low < threshold <= high,
        threshold_share=config.worth_fixing_share,
    )


def _cuda_span(trace: Trace, ops: pd.DataFrame) -> tuple[int, int]:
    """From the program's first CUDA call (or GPU op) to the end of its last: the phases' span."""
    first = [int(ops["launch_start"].min()), int(ops["start"].min())]
    last = [int(ops["end"].max())]
    if len(trace.api):
        first.append(int(trace.api["start"].min()))
        last.append(int(trace.api["end"].max()))
    return min(first), max(last)


def _trace(source: str | Path | Trace, config: AnalysisConfig, say: Callable[[str], None]) -> Trace:
    """The loaded trace, exporting an .nsys-rep to a temporary SQLite first."""
    if isinstance(source, Trace):
        return source
    load = functools.partial(
        load_trace,
        progress=say,
        keep_api=is_relevant_api,
        window_s=config.window_s,
        max_memory_bytes=config.max_memory_bytes,
    )
    if Path(source).suffix in (".nsys-rep", ".qdrep"):
        from nsync.nsys import exported

        with exported(Path(source), say) as sqlite:
            return replace(load(sqlite), path=Path(source))
    return load(source)


def _with_savings(callsites: pd.DataFrame, predicted: WhatIf, config: AnalysisConfig) -> pd.DataFrame:
    """Each call site's predicted saving per step and its likely range, ranked by it (then by exposed idle)."""
    saving = callsites["site_id"].map(predicted.saving_ns).astype(float).to_numpy()
    span = callsites["site_id"].map(predicted.saving_span_ns)
    least = span.map(lambda ends: ends[0], na_action="ignore").astype(float).to_numpy()
    largest = span.map(lambda ends: ends[1], na_action="ignore").astype(float).to_numpy()
    low, high = saving_range(least, largest, config.saving_ratio)
    ranked = callsites.assign(**dict(zip(SAVING_COLUMNS, (saving, low, high))))
    # the saving of the loop of reads a site is in, done for all its items at once (NaN: in none)
    loop_of = {site: k for k, loop in enumerate(predicted.loops) for site in loop.sites}
    ids = [loop_of.get(int(site)) for site in ranked["site_id"]]
    loop_id = np.array([np.nan if k is None else k for k in ids], float)  # NaN: in none, as the figures
    found = [None if k is None else predicted.loops[k] for k in ids]
    loop_saving = np.array([np.nan if loop is None else loop.saving_ns for loop in found])
    ends = np.array([(np.nan, np.nan) if loop is None else loop.span_ns for loop in found]).reshape(-1, 2)
    loop_low, loop_high = saving_range(np.maximum(ends[:, 0], 0.0), np.maximum(ends[:, 1], 0.0), config.saving_ratio)
    ranked = ranked.assign(**dict(zip(LOOP_COLUMNS, (loop_id, loop_saving, loop_low, loop_high))))
    return ranked.sort_values(
        ["predicted_saving_ns_per_step", "exposed_idle_ns", "count"], ascending=False, na_position="last"
    ).reset_index(drop=True)


KERNEL_TIME_CHUNK = 1 << 20  # rows summed at a time: a few MB of temporaries however big the trace


def _kernel_time(gpu_ops: pd.DataFrame) -> dict[str, int]:
    names = gpu_ops["name"].cat
    codes = names.codes.to_numpy()  # -1: no name (copies, memsets)
    start, end = gpu_ops["start"].to_numpy(), gpu_ops["end"].to_numpy()
    totals = np.zeros(len(names.categories) + 1, np.int64)
    for first in range(0, len(codes), KERNEL_TIME_CHUNK):
        part = slice(first, first + KERNEL_TIME_CHUNK)
        # float sums are exact below 2**53 ns (104 days) of GPU time per name and chunk
        totals += np.bincount(codes[part] + 1, weights=end[part] - start[part], minlength=len(totals)).astype(np.int64)
    return {str(name): int(total) for name, total in zip(names.categories, totals[1:]) if total > 0}


def program_of(trace: Trace) -> str:
    """``python3 train.py`` from the capture metadata (file names only, so runs in other folders compare)."""
    words = [trace.capture.get("PROCESS_0:COMMAND", "")]
    words += [trace.capture[k] for k in sorted(trace.capture) if k.startswith("PROCESS_0:ARGUMENT_")][:1]
    return " ".join(Path(w).name for w in words if w)


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
    return NO_CUDA if not trace.has_cuda else NO_GPU_WORK


def _empty(trace: Trace, config: AnalysisConfig, reason: str) -> Analysis:
    steps = Steps(table=empty_steps_table(), source="none", warmup=0)
    return Analysis(
        trace_path=str(trace.path),
        nsys_version=trace.nsys_version,
        schema_version=trace.schema_version,
        gpus=[str(name) for name in trace.gpus["name"]],
        config=config,
        steps=steps,
        step_stats=pd.DataFrame({column: pd.Series(dtype=np.int64) for column in STEP_STATS_COLUMNS}),
        window_ns=(0, 0),
        syncs=pd.DataFrame(),
        callsites=advise_callsites(rank_callsites(pd.DataFrame(), [], 0), []),
        totals=_totals(pd.DataFrame(), {}, 0),
        warnings=[*trace.warnings, reason],
        status="no-cuda" if not trace.has_cuda else "no-gpu-work",
    )


def _window(steps: Steps, ops: pd.DataFrame) -> tuple[int, int]:
    """The analysed steps, or the whole GPU span when there are none."""
    analysed = steps.analysed
    if not analysed.empty:
        return int(analysed["start"].min()), int(analysed["end"].max())
    return int(min(ops["start"].min(), ops["launch_start"].min())), int(ops["end"].max())


def _analysed_intervals(steps: Steps, window: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Starts and ends of what the figures cover: the analysed steps, or the window when there are none."""
    analysed = steps.analysed
    if len(analysed):
        return analysed["start"].to_numpy(np.int64), analysed["end"].to_numpy(np.int64)
    return np.array([window[0]], np.int64), np.array([window[1]], np.int64)


def _totals(
    syncs: pd.DataFrame,
    idle_by_gpu: dict[tuple[int, int], np.ndarray],
    span_ns: int,
    gpu_names: dict[int, str] | None = None,
) -> dict[str, Any]:
    """Sums over the analysed intervals (``idle_by_gpu``: each GPU's idle in each). Each GPU is idle or busy
    over the whole span, so idle + busy = span x GPUs, and each GPU's idle is given on its own."""
    idle_per_gpu = {key: int(idle.sum()) for key, idle in idle_by_gpu.items()}
    gpu_idle = sum(idle_per_gpu.values())
    return {
        "span_ns": span_ns,
        "gpu_count": len(idle_by_gpu),
        "gpu_idle_ns": gpu_idle,
        "gpu_busy_ns": len(idle_by_gpu) * span_ns - gpu_idle,
        "per_gpu": [
            {"device_id": device, "name": (gpu_names or {}).get(device, f"GPU {device}"), "idle_ns": idle}
            for (_pid, device), idle in idle_per_gpu.items()
        ],
        "exposed_idle_ns": int(syncs["exposed_idle_ns"].sum()) if len(syncs) else 0,
        "host_wait_ns": int(syncs["wait_ns"].sum()) if len(syncs) else 0,
        "sync_count": len(syncs),
    }


def _gpu_step_times(steps: Steps, ops: pd.DataFrame) -> np.ndarray:
    """Each analysed step's time on the GPU."""
    launched = launched_in_steps(steps, ops["launch_start"].to_numpy(np.int64))
    start, end = ops["start"].to_numpy(np.int64), ops["end"].to_numpy(np.int64)
    return gpu_step_times(steps, launched, start, end)[steps.warmup :]


def _step_stats(
    steps: Steps, syncs: pd.DataFrame, idle_by_gpu: dict[tuple[int, int], np.ndarray], gpu_step_ns: np.ndarray
) -> pd.DataFrame:
    """One row per analysed step; ``idle_by_gpu`` holds each GPU's idle in each of them (when there are any)."""
    table = steps.analysed.reset_index(drop=True)
    starts, ends = table["start"].to_numpy(np.int64), table["end"].to_numpy(np.int64)
    gpu_idle = np.zeros(len(table), np.int64)
    for idle in idle_by_gpu.values() if len(table) else ():
        gpu_idle += idle
    in_step = syncs.loc[syncs["step"] >= 0]
    exposed = np.bincount(in_step["step"], weights=in_step["exposed_idle_ns"], minlength=len(table))
    count = np.bincount(in_step["step"], minlength=len(table))
    return pd.DataFrame(
        {
            "start": starts,
            "end": ends,
            "duration_ns": ends - starts,
            "gpu_duration_ns": gpu_step_ns,
            "gpu_idle_ns": gpu_idle,
            "exposed_idle_ns": exposed[: len(table)].astype(np.int64),
            "sync_count": count[: len(table)],
        }
    )


def _gpus_used(trace: Trace, ops: pd.DataFrame) -> tuple[dict[int, str], list[str]]:
    """The name of each device the GPU ops ran on, and their physical identities where the export records them."""
    used = dense_codes(ops["device_id"].to_numpy())[1].tolist()
    names = dict(zip(trace.gpus["device_id"], trace.gpus["name"]))
    uuids = trace.gpus.loc[trace.gpus["device_id"].isin(used), "uuid"]
    return {int(d): str(names.get(d, f"GPU {d}")) for d in used}, sorted({str(u) for u in uuids if u})
