"""The verdict: whether anything in the main loop is worth fixing, in one line.

It is taken on the fix that saves most (a call site; reads one copy would do; a library setting or one statement
that removes several syncs: nsync.stages.advice.scopes; a loop of reads done at once), as a share of the
predicted unprofiled step, from the chance that it saves at least the threshold (AnalysisConfig.
worth_fixing_share): the spread of measured savings around predicted ones (nsync.stages.replay.likely). Worth
fixing when that is likely, nothing worth fixing when it is unlikely, "measure it" in between, with how.
Where no one fix pays alone but the syncs of the program's own code together do, the verdict says so."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from nsync.config import AnalysisConfig
from nsync.knowledge import NOTHING_CHANCE, WORTH_FIXING_CHANCE
from nsync.load import CallsiteSource
from nsync.report.analysis import VerdictFacts, ns_to_ms, threshold_pct
from nsync.report.sites import native_name
from nsync.stages.advice import ReadGroup
from nsync.stages.advice.scopes import FixScope
from nsync.stages.callsites import issued_by_own_code, library_package
from nsync.stages.replay import COVERAGE, WhatIf, chance_above

# the verdict's cut-offs on the chance that the fix saves the threshold: nsync.knowledge.fitted
MEASURE_HOW = (
    "measure it (put the fix behind `if nsync.fixed():`, as --suggest-switch writes nsync's rewrites, then run "
    "nsync measure on the program)"
)


@dataclass(frozen=True)
class _Fix:
    """A candidate fix: what it saves per step (ns), its likely range, what the verdict calls it and its scope."""

    saving_ns: float
    range_ns: tuple[float, float]
    site: str
    scope: str


@dataclass(frozen=True)
class _Judged:
    """A fix judged against the threshold; ``text`` says it."""

    fix: _Fix
    step_ns: float
    threshold_share: float
    chance: float
    only_own: bool = False  # together: of the syncs the program's own code issues (a library issues others)
    beyond_reach: str = ""  # what the costliest sync no setting removes costs (a library's), said beside it

    @property
    def share(self) -> float:
        return self.fix.saving_ns / self.step_ns if self.step_ns > 0 else 0.0

    @property
    def worth_fixing(self) -> bool:
        return self.chance >= WORTH_FIXING_CHANCE

    @property
    def measure(self) -> bool:
        return NOTHING_CHANCE < self.chance < WORTH_FIXING_CHANCE

    @property
    def text(self) -> str:
        low, high = (end / 1e6 for end in self.fix.range_ns)
        share = f"{100 * self.share:.1f} %"
        likely = f"{100 * COVERAGE:.0f} % likely {low:.2f}-{high:.2f} ms"
        figure = f"{self.fix.saving_ns / 1e6:.2f} ms per step ({share}; {likely})"
        near = f". That is near the {100 * self.threshold_share:g} % worth fixing: {MEASURE_HOW}"
        beside = f"; {self.beyond_reach}" if self.beyond_reach else ""
        if self.fix.scope == "together":
            would = "may save" if self.measure else "would save"
            return (
                f"fixing all the syncs {'in your code' if self.only_own else 'of the step'} together {would} "
                f"{figure}, not one of them alone, as each waits for the same GPU work{near if self.measure else ''}"
                f"{beside}"
            )
        if self.worth_fixing:
            return f"fixing {self.fix.site} would save {figure}{beside}"
        if self.measure:
            return f"fixing {self.fix.site} may save {figure}{near}{beside}"
        which = "the syncs a fix can remove" if self.beyond_reach else "syncs"
        return (
            f"{which} cost at most {self.fix.saving_ns / 1e6:.2f} ms per step ({share}; {100 * COVERAGE:.0f} % "
            f"likely under {high:.2f} ms): nothing here is worth fixing for speed{beside}"
        )

    def facts(self, config: AnalysisConfig) -> VerdictFacts:
        return VerdictFacts(
            text=self.text,
            worth_fixing=self.worth_fixing,
            largest_saving_ms_per_step=ns_to_ms(self.fix.saving_ns),
            largest_saving_ms_per_step_low=ns_to_ms(self.fix.range_ns[0]),
            largest_saving_ms_per_step_high=ns_to_ms(self.fix.range_ns[1]),
            measure=self.measure,
            share_pct=round(100 * self.share, 4),  # (text outputs print it to one decimal, as the verdict)
            site=self.fix.site,
            all_syncs_together=self.fix.scope == "together",
            threshold_pct=threshold_pct(config),
            chance_pct=round(100 * self.chance, 1),
            fix_scope=self.fix.scope,
        )


def judge(
    callsites: pd.DataFrame,
    predicted: WhatIf | None,
    config: AnalysisConfig,
    groups: list[ReadGroup] | None = None,
    scopes: list[FixScope] | None = None,
) -> VerdictFacts | None:
    """The verdict on the ranked ``callsites`` (with their savings), None without a prediction (no steps, or the
    replay was skipped). A site with no Python frame is named by its API and native function, and the verdict
    says where to read how to capture its Python line: a shared library's name is nothing to act on. Reads
    that one copy would do (``groups``), fixes that remove several sites (``scopes``; the what-if prices them
    after the groups) and loops of reads are named where that saves more than any one site."""
    if predicted is None or not np.isfinite(predicted.unprofiled_step_ns):
        return None
    step_ns, basis = predicted.unprofiled_step_ns, predicted.basis
    threshold_ns = config.worth_fixing_share * step_ns

    def judged(fix: _Fix, **more: object) -> _Judged:
        chance = chance_above(fix.saving_ns, threshold_ns, basis)
        return _Judged(fix, step_ns, config.worth_fixing_share, chance, **more)  # type: ignore[arg-type]

    no_setting = _no_setting(callsites)
    out_of_reach, beyond_reach = _beyond_reach(callsites, no_setting)
    fixes = _fixes(callsites, predicted, groups or [], scopes or [], no_setting)
    best = max(fixes, key=lambda fix: fix.saving_ns, default=_Fix(0.0, (0.0, 0.0), "", "call site"))
    beyond_reach = beyond_reach if out_of_reach > best.saving_ns else ""
    verdict = judged(best, beyond_reach=beyond_reach)
    own = issued_by_own_code(callsites).to_numpy()
    saving = callsites["predicted_saving_ns_per_step"].to_numpy(float) if len(callsites) else np.zeros(0)
    if not verdict.worth_fixing and (np.nan_to_num(saving[own & ~no_setting]) > 0).sum() >= 2:
        # no one fix pays alone: they wait for the same work (fixing one leaves the other to wait for it); only
        # the syncs of the program's own code: those a library issues are no fix of the user's to make
        together = judged(_Fix(predicted.own_saving_ns, predicted.own_range_ns, "", "together"), only_own=not own.all())
        if together.worth_fixing or (together.measure and not verdict.measure):
            return together.facts(config)
    return verdict.facts(config)


def _fixes(
    callsites: pd.DataFrame,
    predicted: WhatIf,
    groups: list[ReadGroup],
    scopes: list[FixScope],
    no_setting: np.ndarray,
) -> list[_Fix]:
    """Every fix the user can make, priced: each call site (but those no setting removes), each group of reads,
    each setting or statement of several sites, each loop of reads whose sites the user can fix."""
    fixes = []
    for row, excluded in zip(callsites.to_dict("records"), no_setting):
        site = int(row["site_id"])
        if not excluded and site in predicted.saving_ns and np.isfinite(predicted.saving_ns[site]):
            fixes.append(_Fix(predicted.saving_ns[site], predicted.saving_range_ns[site], _site_named(row),
                              "call site"))  # fmt: skip
    priced = list(zip(predicted.group_saving_ns, predicted.group_range_ns))
    for group, (saving, span) in zip(groups, priced):
        where = f"{Path(group.file).name}:{','.join(map(str, group.lines))} (their reads together)"
        fixes.append(_Fix(saving, span, where, "reads"))
    for scope, (saving, span) in zip(scopes, priced[len(groups) :]):
        lines = _lines_of(callsites, tuple(scope.site_ids))
        what = f"one statement, {scope.fix}" if scope.kind == "statement" else f"one setting: {scope.fix}"
        fixes.append(_Fix(saving, span, f"{lines} ({what})", scope.kind))
    fixable = set(callsites.loc[~no_setting, "site_id"].astype(int))
    for loop in predicted.loops:
        if fixable.issuperset(loop.sites):
            their = "its" if len(loop.sites) == 1 else "their"
            where = f"{_lines_of(callsites, loop.sites)} ({their} loop, for all items at once)"
            fixes.append(_Fix(loop.saving_ns, loop.range_ns, where, "loop"))
    return fixes


def _site_named(row: dict[str, Any]) -> str:
    """The call site as the verdict names it: "file.py:12", "run.py:9 (issued at trainer.py:1847)", or, without
    a Python frame, its API and native function and how to capture its line."""
    site = f"{Path(str(row['file'])).name}:{int(row['line'])}"
    if (row["sync_file"], row["sync_line"]) != (row["file"], row["line"]):  # a library issues it
        site += f" (issued at {Path(str(row['sync_file'])).name}:{int(row['sync_line'])})"
    if row["callsite_source"] != CallsiteSource.PYTHON_BACKTRACE:
        apis = "/".join(str(api) for api in row["apis"]) or "CUDA"
        function = native_name(str(row["function"]))
        where = f" in {function} ({Path(str(row['file'])).name})" if row["function"] != apis else ""
        site = f"the {apis} syncs{where}, whose Python line this trace does not name (a note says how to capture it)"
    return site


def _lines_of(callsites: pd.DataFrame, sites: tuple[int, ...]) -> str:
    """The call sites' lines, as ``file.py:34,35`` (each file named once)."""
    rows = callsites.loc[callsites["site_id"].isin(sites)].sort_values(["file", "line"])
    by_file: dict[str, list[str]] = {}
    for file, line in zip(rows["file"], rows["line"]):
        by_file.setdefault(Path(str(file)).name, []).append(str(int(line)))
    return ", ".join(f"{file}:{','.join(dict.fromkeys(lines))}" for file, lines in by_file.items())


def _no_setting(callsites: pd.DataFrame) -> np.ndarray:
    """The sites a known library issues and no setting of it removes (a data-dependent shape in a detection
    model, generate()'s finished check): no fix of the user's, so no verdict names them."""
    if "advice" not in callsites:
        return np.zeros(len(callsites), bool)
    return np.array([a is not None and a.basis == "library" and not a.setup for a in callsites["advice"]], bool)


def _beyond_reach(callsites: pd.DataFrame, candidates: np.ndarray) -> tuple[float, str]:
    """The saving of the costliest of the ``candidates`` (sites no setting removes, priced), and how the verdict
    says it: "the syncs inside torchvision (boxes.py:48) cost 3.11 ms per step, which no setting removes";
    (0, '') where there is none."""
    saving = callsites["predicted_saving_ns_per_step"].to_numpy(float) if len(callsites) else np.zeros(0)
    candidates = candidates & np.isfinite(saving)
    if not candidates.any():
        return 0.0, ""
    k = int(np.nanargmax(np.where(candidates, saving, -np.inf)))
    row = callsites.iloc[k]
    package = library_package(str(row["sync_file"])) or "a library"
    cost = max(float(saving[k]), 0.0)
    where = f"{Path(str(row['sync_file'])).name}:{int(row['sync_line'])}"
    return cost, f"the syncs inside {package} ({where}) cost {cost / 1e6:.2f} ms per step, which no setting removes"
