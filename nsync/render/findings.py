"""A result's findings on the user's lines, as code review tools take them (SARIF, GitHub's workflow
annotations): each priced call site of an analysis, each call site a diff's candidate added or grew; its file and
line, a level, the rule (the sync's pattern), one sentence, its figures, and its fix."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from nsync.render.options import RenderOptions
from nsync.render.text import fixed
from nsync.report import Analysis, Diff
from nsync.report.analysis import LIKELY
from nsync.report.fixes import Advice
from nsync.report.sites import CallSite

Level = Literal["warning", "note"]
RULE = "cuda-sync"  # every finding's rule starts so; the pattern follows (cuda-sync/value-read)


@dataclass(frozen=True)
class Finding:
    file: str
    line: int
    level: Level  # warning: worth fixing (an analysis), or a regression's site (a diff); note: the rest
    rule: str
    title: str
    message: str
    properties: dict[str, float | str | None] = field(default_factory=dict)
    advice: Advice | None = None


def findings(result: Analysis | Diff, options: RenderOptions = RenderOptions()) -> list[Finding]:
    """The findings of ``result``, most costly first (an analysis's first ``options.top``, 50 by default)."""
    if isinstance(result, Diff):
        return _diff_findings(result)
    step_ms = result.what_if.unprofiled_step_ms if result.what_if else None
    priced = [s for s in result.callsites if s.line > 0 and s.predicted_saving_ms_per_step is not None]
    return [_site_finding(site, step_ms, result.threshold_pct) for site in priced[: options.top_or(50)]]


def rule_of(pattern: str | None) -> str:
    """``cuda-sync/value-read`` for the pattern "value read"; ``cuda-sync`` where the sync has none."""
    slug = re.sub(r"[^a-z0-9]+", "-", (pattern or "").lower()).strip("-")
    return f"{RULE}/{slug}" if slug else RULE


def _site_finding(site: CallSite, step_ms: float | None, threshold_pct: float) -> Finding:
    saving = site.predicted_saving_ms_per_step or 0.0
    share = 100 * saving / step_ms if step_ms else None
    low, high = site.saving_range_ms
    likely = f"; {LIKELY} {fixed(low)}-{fixed(high)} ms" if low is not None and high is not None else ""
    of_step = f" ({fixed(share, 1)} % of the step{likely})" if share is not None else ""
    issued = f", issued inside a library at {site.issued_at}" if site.issued_at else ""
    fix = site.advice.short if site.advice is not None else site.short_hint
    message = (
        f"{site.where} makes the GPU wait{issued}: fixing its sync would save {fixed(saving)} ms per step{of_step}. "
        f"Fix: {fix}."
    )
    return Finding(
        file=site.file,
        line=site.line,
        level="warning" if share is not None and share >= threshold_pct else "note",
        rule=rule_of(site.advice.pattern if site.advice is not None else None),
        title=f"CUDA sync: {fix}",
        message=message,
        properties={
            "savingMsPerStep": saving,
            "savingLowMs": low,
            "savingHighMs": high,
            "shareOfStepPct": share,
            "syncsPerStep": site.syncs_per_step,
            "function": site.function,
        },
        advice=site.advice if site.advice is not None and site.advice.rewrite is not None else None,
    )


def _diff_findings(result: Diff) -> list[Finding]:
    found = []
    for site in result.callsites:
        if site.status not in ("added", "grown") or not site.line:
            continue
        delta = site.delta_ms_per_step or 0.0
        message = (
            f"{site.where} is {'new' if site.status == 'added' else 'costlier'} in the candidate: the GPU waits "
            f"{fixed(delta)} ms more per step ({fixed(site.baseline_exposed_idle_ms_per_step)} -> "
            f"{fixed(site.candidate_exposed_idle_ms_per_step)} ms of exposed idle); the diff's verdict: "
            f"{result.verdict}."
        )
        found.append(
            Finding(
                file=site.file,
                line=site.line,
                level="warning" if result.verdict == "regression" else "note",
                rule=rule_of(site.status + " sync"),
                title=f"CUDA sync {site.status} ({'+' if delta >= 0 else ''}{fixed(delta)} ms per step)",
                message=message,
                properties={"deltaMsPerStep": delta, "status": site.status, "function": site.function},
            )
        )
    return found
