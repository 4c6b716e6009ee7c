"""The verdict: whether anything in the main loop is worth fixing, in one line.

It is taken on the largest saving a fix can make (a call site, reads one copy would do, a loop of reads done at
once), as a share of the predicted unprofiled step, by where its likely range (the what-if's, never below zero)
lies against the threshold (AnalysisConfig.worth_fixing_share): worth fixing when even the range's low end
passes it, nothing worth fixing when even its high end does not, and "measure" when the range straddles it.
Where no one site pays alone but the syncs of the program's own code together do, the verdict says so."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from nsync.config import AnalysisConfig
from nsync.load import CallsiteSource
from nsync.report.analysis import VerdictFacts, ns_to_ms, threshold_pct
from nsync.stages.advice import ReadGroup
from nsync.stages.callsites import issued_by_own_code, library_package
from nsync.stages.replay import WhatIf

Range = tuple[float, float]


@dataclass(frozen=True)
class _Judged:
    """A saving judged against the threshold, in ns; ``text`` says it."""

    saving_ns: float
    step_ns: float
    low_ns: float
    high_ns: float
    site: str  # the call site that saves most: "file.py:12", "run.py:9 (issued at trainer.py:1847)"
    threshold_share: float
    together: bool = False  # no site alone is worth fixing, but all of them together are (or may be)
    only_own: bool = False  # together: of the syncs the program's own code issues (a library issues others)
    beyond_reach: str = ""  # what the costliest sync no setting removes costs (a library's), said beside it

    @property
    def share(self) -> float:
        return self.saving_ns / self.step_ns if self.step_ns > 0 else 0.0

    @property
    def worth_fixing(self) -> bool:
        return self.low_ns >= self.threshold_share * self.step_ns

    @property
    def measure(self) -> bool:
        return self.low_ns < self.threshold_share * self.step_ns <= self.high_ns

    @property
    def text(self) -> str:
        share = f"{100 * self.share:.1f} %"
        likely = f"likely {self.low_ns / 1e6:.2f}-{self.high_ns / 1e6:.2f} ms"
        figure = f"{self.saving_ns / 1e6:.2f} ms per step ({share}; {likely})"
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
        under = f"; likely under {self.high_ns / 1e6:.2f} ms" if self.high_ns > self.saving_ns else ""
        which = "the syncs a fix can remove" if self.beyond_reach else "syncs"
        return (
            f"{which} cost at most {self.saving_ns / 1e6:.2f} ms per step ({share}{under}): nothing here "
            f"is worth fixing for speed{beside}"
        )

    def facts(self, config: AnalysisConfig) -> VerdictFacts:
        return VerdictFacts(
            text=self.text,
            worth_fixing=self.worth_fixing,
            largest_saving_ms_per_step=ns_to_ms(self.saving_ns),
            largest_saving_ms_per_step_low=ns_to_ms(self.low_ns),
            largest_saving_ms_per_step_high=ns_to_ms(self.high_ns),
            measure=self.measure,
            share_pct=round(100 * self.share, 4),  # (text outputs print it to one decimal, as the verdict)
            site=self.site,
            all_syncs_together=self.together,
            threshold_pct=threshold_pct(config),
        )


def judge(
    callsites: pd.DataFrame,
    predicted: WhatIf | None,
    config: AnalysisConfig,
    frame_note: str = "",
    groups: list[ReadGroup] | None = None,
) -> VerdictFacts | None:
    """The verdict on the ranked ``callsites`` (with their savings), None without a prediction (no steps, or the
    replay was skipped). A site with no Python frame is named by its API and native function, and the verdict
    says how to capture its Python line (``frame_note``): a shared library's name is nothing to act on. Reads
    that one copy would do (``groups``) and loops of reads are named where that saves more than any one site."""
    if predicted is None or not np.isfinite(predicted.unprofiled_step_ns):
        return None
    step_ns = predicted.unprofiled_step_ns
    saving = callsites["predicted_saving_ns_per_step"].to_numpy(float) if len(callsites) else np.zeros(0)
    known = np.isfinite(saving)
    no_setting = _no_setting(callsites)
    out_of_reach, beyond_reach = _beyond_reach(callsites, saving, known & no_setting)
    known &= ~no_setting
    if not known.any():
        return _judged(0.0, (0.0, 0.0), step_ns, "", config, beyond_reach=beyond_reach).facts(config)
    best = int(np.nanargmax(np.where(known, saving, -np.inf)))
    largest = max(float(saving[best]), 0.0)
    beyond_reach = beyond_reach if out_of_reach > largest else ""
    row = callsites.iloc[best]
    span, site = predicted.saving_range_ns[int(row["site_id"])], _site_named(row, frame_note)
    for group, group_saving, group_span in zip(groups or [], predicted.group_saving_ns, predicted.group_range_ns):
        if group_saving > largest:
            largest, span = group_saving, group_span
            site = f"{Path(group.file).name}:{','.join(map(str, group.lines))} (their reads together)"
    fixable = set(callsites.loc[~no_setting, "site_id"].astype(int))
    for loop in predicted.loops:
        if loop.saving_ns > largest and fixable.issuperset(loop.sites):
            largest, span = loop.saving_ns, loop.range_ns
            their = "its" if len(loop.sites) == 1 else "their"
            site = f"{_lines_of(callsites, loop.sites)} ({their} loop, for all items at once)"
    threshold = config.worth_fixing_share * step_ns
    together = predicted.own_saving_ns
    own = issued_by_own_code(callsites).to_numpy()
    if largest < threshold <= together and (saving[known & own] > 0).sum() >= 2:
        # no one site pays alone: they wait for the same work (fixing one leaves the other to wait for it); only
        # the syncs of the program's own code: those a library issues are no fix of the user's to make
        judged = _judged(together, predicted.own_range_ns, step_ns, "", config, together=True, only_own=not own.all())
        return judged.facts(config)
    return _judged(largest, span, step_ns, site, config, beyond_reach=beyond_reach).facts(config)


def _site_named(row: pd.Series, frame_note: str) -> str:
    """The call site as the verdict names it: "file.py:12", "run.py:9 (issued at trainer.py:1847)", or, without
    a Python frame, its API and native function and how to capture its line."""
    site = f"{Path(str(row['file'])).name}:{int(row['line'])}"
    if (row["sync_file"], row["sync_line"]) != (row["file"], row["line"]):  # a library issues it
        site += f" (issued at {Path(str(row['sync_file'])).name}:{int(row['sync_line'])})"
    if row["callsite_source"] != CallsiteSource.PYTHON_BACKTRACE:
        apis = "/".join(str(api) for api in row["apis"]) or "CUDA"
        where = f" in {row['function']} ({Path(str(row['file'])).name})" if row["function"] != apis else ""
        note = frame_note.rstrip(".") or "capture with Python backtraces (nsync profile) to name it"
        site = f"the {apis} syncs{where}, whose Python line this trace does not name ({note})"
    return site


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


def _judged(
    saving_ns: float,
    range_ns: Range,
    step_ns: float,
    site: str,
    config: AnalysisConfig,
    together: bool = False,
    only_own: bool = False,
    beyond_reach: str = "",
) -> _Judged:
    """``saving_ns`` judged by its likely range (the what-if's), never below zero."""
    low, high = (max(float(end), 0.0) for end in range_ns)
    return _Judged(
        saving_ns,
        step_ns,
        low,
        high,
        site,
        config.worth_fixing_share,
        together=together,
        only_own=only_own,
        beyond_reach=beyond_reach,
    )
