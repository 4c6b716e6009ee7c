"""The what-if: each call site, each group of syncs one fix removes, each loop of reads and all syncs released in
turn, every replay at each host scale the run may have had, each saving's point (the scales' weighted mean) and
its likely range (likely.py) computed here, once.

A replayed step time is the mean over the replayed steps but the first (the span of their GPU work over their
count): a released wait lets the host issue its work earlier, never later, so no saving is negative; a median
could be, where steps alternate (two optimizers an iteration) and the released run shifts which half it falls
in."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from nsync.knowledge import LOOP_GONE_SHARE
from nsync.report.tables import LOOP_COLUMNS, SAVING_COLUMNS
from nsync.stages.replay.budget import Budget, ReplaySkipped, budget_of
from nsync.stages.replay.fit import HostScaleFit, fit_host_scale, other_scales, scale_weights
from nsync.stages.replay.likely import likely_range
from nsync.stages.replay.model import ReplayModel, loop_sites, prepare
from nsync.stages.replay.settings import ReplaySettings
from nsync.stages.replay.simulate import replay, step_times_ns
from nsync.stages.steps import Steps

REPLAY_AGREES = 2.0  # the replay as captured within this factor of the measured steps, or no what-if

Range = tuple[float, float]


class LoopSaving(NamedTuple):
    """A loop of reads done for all its items at once: its call sites, the saving per step (loop_saving) and its
    likely range, and the loop's reads per replayed step."""

    sites: tuple[int, ...]
    saving_ns: float
    range_ns: Range
    reads_per_step: float


@dataclass(frozen=True)
class WhatIf:
    """Predicted step times: the trace replayed as captured, then with the host's time scaled back to an
    unprofiled run (``host_scale``) as it is, without each call site's syncs, and without any. Each saving is
    its mean over the host ``scales``; each ``*_range_ns`` its 80 % likely range (likely_range, on ``basis``)."""

    replayed_step_ns: float  # as captured: checks the model against the trace itself
    unprofiled_step_ns: float  # as it is, host time scaled
    without_syncs_step_ns: float  # the step as it is less the saving of every sync
    saving_ns: dict[int, float]  # site_id -> predicted saving per step
    latency_ns: float
    host_scale: float  # fitted when calibrated
    replayed_steps: tuple[int, int]  # [first, stop) among the analysed steps
    sites_left_out: int = 0  # call sites not replayed (too many sync-replays)
    calibrated_steps_ns: np.ndarray | None = None  # the program's own unprofiled steps (calibration run), if known
    calibration_note: str = ""  # how the calibration was applied
    profiler: str = "nsys"  # what made the trace
    group_saving_ns: tuple[float, ...] = ()  # per group of call sites released together (what_if's ``groups``)
    saving_range_ns: dict[int, Range] = field(default_factory=dict)
    group_range_ns: tuple[Range, ...] = ()
    all_syncs_range_ns: Range = (0.0, 0.0)
    own_saving_ns: float = 0.0  # every sync issued in the program's own code released together (``own_sites``)
    slower_ns: float = 0.0  # the most a replay made the step longer by releasing a wait (shown as no saving)
    own_range_ns: Range = (0.0, 0.0)
    scales: tuple[float, ...] = ()  # the host scales replayed: host_scale first, then the others it may be
    # calibrated: the step as it is with a host ``host_speed_spread`` faster and slower than the calibration run's
    host_speed_steps_ns: tuple[float, float] | None = None
    calibration_runs: int = 1  # the calibration's runs (their steps pooled)
    loops: tuple[LoopSaving, ...] = ()  # each loop of reads done for all its items at once
    calibration_held: bool = False  # calibrated, by a run the replay can explain (else it was set aside)

    @property
    def all_syncs_saving_ns(self) -> float:
        return self.unprofiled_step_ns - self.without_syncs_step_ns

    @property
    def calibrated(self) -> bool:
        return self.calibrated_steps_ns is not None

    @property
    def basis(self) -> str:
        """What the likely ranges rest on: "calibrated" (a calibration that held) or "uncalibrated"."""
        return "calibrated" if self.calibration_held else "uncalibrated"

    @property
    def between_runs_pct(self) -> float:
        """How far the step may stray in another unprofiled run on the same machine, % (half the span of
        ``host_speed_steps_ns``, over the square root of the calibration's runs); 0 uncalibrated."""
        if self.host_speed_steps_ns is None or not self.unprofiled_step_ns > 0:
            return 0.0
        faster, slower = self.host_speed_steps_ns
        return 100 * (slower - faster) / 2 / self.unprofiled_step_ns / self.calibration_runs**0.5

    @property
    def calibrated_step_ns(self) -> float | None:
        """The program's mean unprofiled step (but the first), which the host scale was fitted to."""
        return None if self.calibrated_steps_ns is None else _mean_after_first(self.calibrated_steps_ns)

    @property
    def note(self) -> str:
        if self.calibrated and not self.calibration_held:
            return (
                f"calibration set aside for the savings: {self.calibration_note}; the step as it is at host scale "
                f"{self.host_scale:.3g}, the savings at {self.scales[0]:g} as uncalibrated; savings are estimates"
            )
        if self.calibrated:
            return (
                f"calibrated: host time scaled by {self.host_scale:.3g}, fitted to this program's unprofiled run "
                f"({self.calibration_note}); savings are estimates"
            )
        if self.profiler != "nsys":
            return (
                f"uncalibrated: host time scaled by {self.host_scale:g}, nsys's slow-down; {self.profiler} slows a "
                "host more (nsync profile --backend torch calibrates each run); savings are estimates"
            )
        return (
            f"uncalibrated: host time scaled by {self.host_scale:g}, nsys's slow-down measured on an H200 "
            "(nsync profile calibrates each run); savings are estimates"
        )


def loop_saving(kept_ns: np.ndarray, vectorised_ns: np.ndarray, weights: np.ndarray) -> float:
    """A loop's saving, from its replays at each host scale (the fitted first) with its reads
    released (``kept_ns``: the loop stays) and with the loop vectorised (``vectorised_ns``: its host time gone at
    the host scale). The fix takes away at least the reads' waits and at most the whole loop; but nsys slows a
    loop of CUDA calls more than the rest of the host that the host scale is fitted to, so the whole loop at the
    host scale overstates it (+34 to +98 % on the vectorised fixes measured: fixtures/h200/README.md). The
    point lies LOOP_GONE_SHARE of the way from the first to the second, its mean over the host scales
    (``weights``: scale_weights)."""
    return float(weights @ (kept_ns + LOOP_GONE_SHARE * (vectorised_ns - kept_ns)))


def _median(values: np.ndarray) -> float:
    values = values[np.isfinite(values)]
    return float(np.median(values)) if len(values) else float("nan")


def _mean_after_first(values: np.ndarray) -> float:
    """The mean of the steps after the first: the first replayed step starts cold (no step before it is
    replayed), so a fix that shortens only what follows a step's start would seem to miss it."""
    values = values[1:][np.isfinite(values[1:])]
    return float(np.mean(values)) if len(values) else float("nan")


class _Replays:
    """The replays of one model, each made once (the fits and the savings share the trace as it is, a loop of one
    site its kept replay with the site's), as the mean replayed step (_mean_after_first)."""

    def __init__(self, model: ReplayModel) -> None:
        self.model = model
        self.none = np.zeros(len(model.sync_start), bool)
        self.done: dict[tuple[bytes, float, bool], float] = {}

    def step_ns(self, released: np.ndarray, scale: float, vectorised: bool = False) -> float:
        key = (np.packbits(released).tobytes(), scale, vectorised)
        if key not in self.done:
            ends = replay(self.model, released, scale, vectorised)
            self.done[key] = _mean_after_first(step_times_ns(self.model, ends))
        return self.done[key]

    def as_is_ns(self, scale: float) -> float:
        return self.step_ns(self.none, scale)

    def as_captured_ns(self, measured_ns: float) -> float:
        """The trace replayed as captured, checked against its measured steps (ReplaySkipped: they disagree)."""
        as_captured = _median(step_times_ns(self.model, replay(self.model, self.none, captured=True)))
        if not np.isfinite(as_captured):
            raise ReplaySkipped("what-if replay skipped: the analysed steps hold no GPU work to replay")
        if not measured_ns / REPLAY_AGREES < as_captured < measured_ns * REPLAY_AGREES:
            # the replay of the trace as it is keeps within 6 % of its steps on every real export here
            raise ReplaySkipped(
                f"what-if replay skipped: the trace replayed as captured takes {as_captured / 1e6:.3f} ms a step "
                f"where its steps measure {measured_ns / 1e6:.3f} ms: its GPU rows and its steps disagree (a "
                "damaged export?)"
            )
        return as_captured


def _host_scales(replays: _Replays, settings: ReplaySettings) -> tuple[HostScaleFit, tuple[float, ...]]:
    """The host scale (fitted to the calibration's mean step, where there is one) and the scales the savings
    are replayed at, the first the one they are centred on. A calibration run the replay cannot explain (slower
    than any host the profiler leaves, or its GPU slower) is set aside for the savings: they are replayed at the
    uncalibrated scales (on the tuning part of the ground truth its capped fit missed by more on six cases of
    eight: docs/accuracy.md), while the step as it is stays the capped fit's, the nearest the replay comes to
    the step that run measured."""
    steps_ns = settings.calibrated_steps_ns
    target_ns = None if steps_ns is None else _mean_after_first(steps_ns)  # (like the replayed steps)
    fit = HostScaleFit(settings.host_scale, "", held=False)  # uncalibrated
    if target_ns is not None:
        fit = fit_host_scale(replays.as_is_ns, target_ns, settings.host_scale, settings.waits_for_data)
    centre, target_ns = (fit.scale, target_ns) if fit.held else (settings.host_scale, None)
    centred = fit._replace(scale=centre)
    others = other_scales(replays.as_is_ns, centred, target_ns, settings.spread, settings.scale_range)
    return fit, (centre, *others)


@dataclass(frozen=True)
class _Case:
    """One replay of the what-if: what it releases, and whether a loop among them is vectorised."""

    released: np.ndarray
    vectorised: bool = False


def _cases(
    model: ReplayModel,
    sites: list[int],
    groups: list[list[int]],
    own_sites: list[int] | None,
    loops: dict[tuple[int, ...], float],
) -> dict[Any, _Case]:
    """The what-if's replays by name: ("all",), ("site", id), ("group", k), ("own",), ("loop", sites, kept or
    vectorised)."""
    none = np.zeros(len(model.sync_start), bool)
    cases: dict[Any, _Case] = {("all",): _Case(~none)}
    cases |= {("site", site): _Case(model.sync_site == site) for site in sites}
    cases |= {("group", k): _Case(np.isin(model.sync_site, group)) for k, group in enumerate(groups)}
    cases[("own",)] = _Case(~none if own_sites is None else np.isin(model.sync_site, own_sites))
    for loop in loops:
        released = np.isin(model.sync_site, loop)
        cases[("loop", loop, "kept")] = _Case(released)
        cases[("loop", loop, "vectorised")] = _Case(released, vectorised=True)
    return cases


def what_if(
    ops: pd.DataFrame,
    syncs: pd.DataFrame,
    steps: Steps,
    callsites: pd.DataFrame,
    settings: ReplaySettings,
    groups: list[list[int]] | None = None,
    own_sites: list[int] | None = None,
) -> WhatIf:
    """Replay each call site of ``callsites`` (its syncs released), each of ``groups`` (lists of site ids
    released together), the syncs of ``own_sites`` (the program's own code; all sites if None), each loop of
    reads of the program's own code, and all syncs at once; ReplaySkipped says why not. ``syncs``: every
    detected sync, with ``site_id``. Every replay is made at each host scale the run may have had
    (``settings``): a saving's point is their weighted mean (scale_weights), its range likely_range's."""
    groups = groups or []
    if steps.count < 2:
        raise ReplaySkipped("what-if replay needs steps")
    sync_start = syncs["start"].to_numpy(np.int64)
    budget = budget_of(steps, sync_start, callsites, len(groups), settings)
    replayed = steps.analysed.iloc[budget.first : budget.stop]
    model = prepare(ops, syncs, Steps(table=replayed, source=steps.source, warmup=0))
    replays = _Replays(model)
    as_captured = replays.as_captured_ns(_median((replayed["end"] - replayed["start"]).to_numpy(np.int64)))
    fit, scales = _host_scales(replays, settings)
    # the budget again with the host scales the fit left (the span was chosen for the most it could leave)
    sites, loops = _chosen(model, callsites, own_sites, budget.sites_fit(len(scales), len(groups)))
    basis = "calibrated" if fit.held else "uncalibrated"
    saved = _Savings(replays, _cases(model, sites, groups, own_sites, loops), scales, basis)
    group_cases = [saved.of(("group", k)) for k in range(len(groups))]
    return WhatIf(
        replayed_step_ns=as_captured,
        unprofiled_step_ns=(as_is := replays.as_is_ns(fit.scale)),
        without_syncs_step_ns=as_is - saved.of(("all",))[0],
        saving_ns={site: saved.of(("site", site))[0] for site in sites},
        saving_range_ns={site: saved.of(("site", site))[1] for site in sites},
        latency_ns=model.latency_ns,
        host_scale=fit.scale,
        replayed_steps=(budget.first, budget.stop),
        sites_left_out=len(callsites) - len(sites),
        calibrated_steps_ns=settings.calibrated_steps_ns,
        calibration_note=fit.note,
        profiler=settings.profiler,
        group_saving_ns=tuple(saving for saving, _ in group_cases),
        group_range_ns=tuple(span for _, span in group_cases),
        all_syncs_range_ns=saved.of(("all",))[1],
        own_saving_ns=saved.of(("own",))[0],
        own_range_ns=saved.of(("own",))[1],
        scales=scales,
        host_speed_steps_ns=_host_speed_steps(replays, fit.scale, budget, settings),
        calibration_runs=settings.calibration_runs,
        loops=tuple(saved.loop(loop, reads) for loop, reads in loops.items()),
        calibration_held=fit.held,
        slower_ns=max(saved.slower.values(), default=0.0),
    )


def _chosen(
    model: ReplayModel, callsites: pd.DataFrame, own_sites: list[int] | None, sites_fit: int
) -> tuple[list[int], dict[tuple[int, ...], float]]:
    """The call sites to replay, the costliest in exposed idle first, and the loops of reads of the program's own
    code (one inside a library is no loop of the user's to do at once), as many as the budget's ``sites_fit``
    replays hold: the sites first."""
    loops = {
        sites: reads for sites, reads in loop_sites(model).items() if own_sites is None or set(sites) <= set(own_sites)
    }
    loops = dict(list(loops.items())[: max(sites_fit - 1, 0) // 2])  # the budget's last replays
    sites_fit = max(sites_fit - 2 * len(loops), 1)
    sites = [int(s) for s in callsites.sort_values("exposed_idle_ns", ascending=False).head(sites_fit)["site_id"]]
    return sites, loops


class _Savings:
    """What each case of the what-if saves at each host scale (rows) against the step as it is: its point (the
    scales' weighted mean, scale_weights) and its likely range (likely_range on ``basis``)."""

    def __init__(self, replays: _Replays, cases: dict[Any, _Case], scales: tuple[float, ...], basis: str) -> None:
        as_is = np.array([[replays.as_is_ns(scale)] for scale in scales])
        stepped = np.array(
            [[replays.step_ns(c.released, scale, c.vectorised) for c in cases.values()] for scale in scales]
        )
        self.saved = as_is - stepped  # per scale (rows), per case (columns)
        self.column = {name: k for k, name in enumerate(cases)}
        self.weights = scale_weights(len(scales))
        point = self.weights @ self.saved  # each saving's mean over the host scales
        # the mean step cannot grow when a wait is released; where the replay says it does (a trace whose calls
        # and kernels disagree), the saving is none, and the case is named
        self.slower = {name: float(-point[k]) for name, k in self.column.items() if point[k] < 0}
        self.point = np.maximum(point, 0.0)
        self.basis = basis
        least, largest = likely_range(self.point, basis)
        self.ranges = list(zip(least.tolist(), largest.tolist()))

    def of(self, name: Any) -> tuple[float, Range]:
        """The saving of the case ``name`` and its likely range."""
        return float(self.point[self.column[name]]), self.ranges[self.column[name]]

    def loop(self, sites: tuple[int, ...], reads: float) -> LoopSaving:
        """A loop done at once, from its two replays: its saving and its likely range."""
        kept = self.saved[:, self.column[("loop", sites, "kept")]]
        vectorised = self.saved[:, self.column[("loop", sites, "vectorised")]]
        saving = loop_saving(kept, vectorised, self.weights)
        low, high = likely_range(saving, self.basis)
        return LoopSaving(sites, saving, (float(low), float(high)), reads)


def _host_speed_steps(
    replays: _Replays, scale: float, budget: Budget, settings: ReplaySettings
) -> tuple[float, float] | None:
    """Calibrated: the step as it is with the host ``host_speed_spread`` faster and slower."""
    if not budget.speeds:
        return None
    spread = settings.host_speed_spread
    return replays.as_is_ns(scale / (1 + spread)), replays.as_is_ns(scale * (1 + spread))


def priced_callsites(callsites: pd.DataFrame, predicted: WhatIf) -> pd.DataFrame:
    """Each call site's predicted saving per step and its likely range, ranked by it (then by exposed idle); and
    for a site in a loop of reads, the loop's (NaN: in none)."""
    site_ids = callsites["site_id"]
    saving = site_ids.map(predicted.saving_ns).astype(float).to_numpy()
    ranges = site_ids.map(predicted.saving_range_ns)
    low = ranges.map(lambda ends: ends[0], na_action="ignore").astype(float).to_numpy()
    high = ranges.map(lambda ends: ends[1], na_action="ignore").astype(float).to_numpy()
    ranked = callsites.assign(**dict(zip(SAVING_COLUMNS, (saving, low, high))))
    loop_of = {site: k for k, loop in enumerate(predicted.loops) for site in loop.sites}
    ids = [loop_of.get(int(site)) for site in ranked["site_id"]]
    found = [None if k is None else predicted.loops[k] for k in ids]
    loop_columns = (
        np.array([np.nan if k is None else k for k in ids], float),
        np.array([np.nan if loop is None else loop.saving_ns for loop in found]),
        np.array([np.nan if loop is None else loop.range_ns[0] for loop in found]),
        np.array([np.nan if loop is None else loop.range_ns[1] for loop in found]),
    )
    ranked = ranked.assign(**dict(zip(LOOP_COLUMNS, loop_columns)))
    return ranked.sort_values(
        ["predicted_saving_ns_per_step", "exposed_idle_ns", "count"], ascending=False, na_position="last"
    ).reset_index(drop=True)
