"""The terminal summary of an analysis: headline facts, the verdict, and the call-site ranking as a table where
every column fits, else a block a site, each with its fix."""

from __future__ import annotations

import textwrap
from dataclasses import replace

from rich.console import Group
from rich.table import Table
from rich.text import Text

from nsync.code import search_folders
from nsync.render.options import RenderOptions
from nsync.render.source import source_line
from nsync.render.terminal.layout import ISSUED_AT, SOURCE_LINE, Column, code_lines, fitted_table, packed, table_width
from nsync.render.text import ONCE_ROWS, SETTING, edits_said, fixed, likely, loop_saving, printable_all
from nsync.report import Analysis
from nsync.report.analysis import LIKELY, Phase
from nsync.report.sites import CallSite, FixedTogether, OnceSite, ReadTogether, where
from nsync.words import counted


def analysis_summary(result: Analysis, options: RenderOptions) -> Group:
    """An analysis for a console ``options.width`` columns wide: every trace string goes in as Text, so rich
    markup in names stays inert, and every control character is written as its escape. The call sites as a
    table where every column fits, else one block each; each with its source line where the file is readable.
    """
    report = printable_all(replace(result, timeline=None, tables=None))
    head = _head(report, options.width)
    if report.status != "ok":  # nothing was analysed: the notes say why
        return Group(head, *(Text(f"note: {w}", style="yellow") for w in report.warnings if options.warnings))
    parts: list[Text | Table | Group] = [head]
    if report.callsites:
        parts.extend(_sites(report, options))
    outside = report.outside_main_loop[:ONCE_ROWS]
    if outside and report.steps.count:
        parts.append(Text("syncs outside the main loop, once each: the host's wait in them is the most they cost"))
        issued = [ISSUED_AT] if report.library_frames(outside) else []
        parts.append(fitted_table([*ONCE_COLUMNS, *issued], [_once_cells(site) for site in outside], options.width))
    if options.warnings:
        parts.extend(Text(f"warning: {warning}", style="yellow") for warning in report.warnings)
    return Group(*parts)


def _head(report: Analysis, width: int) -> Text:
    """The trace, its steps, its GPU idle and syncs, the verdict and the phases."""
    trace, steps, totals = report.trace, report.steps, report.totals
    head = Text()
    head.append("trace: ", style="bold")  # (not "nsync PATH", which reads as a command to type)
    head.append(f"{trace.path}\n")
    facts = [trace.made_by, ", ".join(trace.gpus) or "no GPU"]
    if report.status != "ok":
        pass  # nothing was analysed: the note below says why
    elif steps.count:
        facts.append(
            f"{counted(steps.count, 'step')} ({steps.each + '; ' if steps.each else ''}{steps.source}, "
            f"{steps.warmup_skipped} warm-up skipped), "
            f"median {fixed(steps.median_ms)} ms (on the GPU {fixed(steps.gpu_median_ms)} ms)"
            + (f", mean {fixed(steps.mean_ms)} ms" if steps.mean_apart else "")
        )
    else:
        facts.append("no steps found: figures cover the whole trace")
    head.append(" | ".join(facts) + "\n")
    if report.status != "ok":
        return head
    span, gpus = totals.span_ms or 0.0, totals.gpu_count
    of = f"{gpus} GPUs x {fixed(span, 1)} ms" if gpus > 1 else f"{fixed(span, 1)} ms"
    idle_share = f" ({fixed(totals.gpu_idle_pct, 1)}% of {of})" if totals.gpu_idle_pct is not None else ""
    sites = report.callsites
    head.append(
        f"GPU idle {fixed(totals.gpu_idle_ms, 2)} ms{idle_share}; exposed idle after syncs "
        f"{fixed(totals.exposed_idle_ms, 2)} ms; host wait {fixed(totals.host_wait_ms, 2)} ms; "
        f"{counted(totals.sync_count, 'sync')} at {counted(len(sites), 'call site')}\n"
    )
    if report.verdict:
        head.append(f"verdict: {report.verdict.text}\n", style="bold")
    phases = [_phase_text(phase) for phase in report.phases]
    if len(phases) > 1:
        head.append(packed("phases: ", phases, width) + "\n")
    return head


def _sites(report: Analysis, options: RenderOptions) -> list[Text | Table | Group]:
    """The first ``top`` call sites as a table (or a block each), the reads to do together, the what-if, and the
    first site's fix."""
    top, width, per_step = options.top_or(10), options.width, bool(report.steps.count)
    sites = report.callsites
    search = search_folders(report.trace.path, list(options.source_dirs))
    shown = sites[:top]
    code = [source_line(site.file, site.line, search) for site in shown]
    table = _table(report, shown, code, per_step=per_step, width=width)
    blocks = table is None or options.verbose
    parts: list[Text | Table | Group] = [table] if table is not None and not blocks else []
    parts.extend(_blocks(shown, code, per_step, options.verbose, width) if blocks else [])
    parts.extend(line for group in report.read_together for line in _read_together(group, width))
    parts.extend(_fixed_together(group, width) for group in report.fixed_together)
    what_if = report.what_if
    if what_if and what_if.replayed_step_ms is not None:
        parts.append(
            Text(
                f"what if: step {fixed(what_if.replayed_step_ms)} ms replayed as captured, "
                f"{fixed(what_if.unprofiled_step_ms)} ms without the profiler, "
                f"{fixed(what_if.predicted_step_ms_without_syncs)} ms with every sync's wait released ({what_if.note})"
            )
        )
    if not blocks:  # (a block says its own fix)
        parts.extend(_fix(sites[0], f"fix #1 {sites[0].where}", width))
    if len(sites) > top:
        parts.append(Text(f"... {len(sites) - top} more call sites (--top, --json)", style="dim"))
    return parts


def _blocks(sites: list[CallSite], code: list[str], per_step: bool, verbose: bool, width: int) -> list[Text]:
    """One block per call site, for widths that cannot hold the table (and CI logs): its place, function and
    saving on the first line (``grep w_print.py:19`` finds it), then, indented, its source line, the library
    line that issues it, its figures and its fix. Nothing is left out at any width: the lines wrap."""
    unit = "ms/step" if per_step else "ms"
    blocks = []
    for rank, (site, line) in enumerate(zip(sites, code), 1):
        first = Text()
        first.append(f"#{rank} {site.where}", style="bold")
        first.append(f"  {site.function}")
        saving = site.predicted_saving_ms_per_step
        if saving is not None:
            first.append(f"  saving {fixed(saving)} ms/step")
            span = likely(*site.saving_range_ms)
            first.append(f" ({LIKELY} {span})" if span else "")
        exposed = site.exposed_idle_ms_per_step if per_step else site.exposed_idle_ms
        wait = site.host_wait_ms_per_step if per_step else site.host_wait_ms
        per = f" · {fixed(site.syncs_per_step, 2)} syncs/step" if per_step else ""
        details = [
            f"issued at {site.issued_at}" if site.issued_at else "",
            f"exposed idle {fixed(exposed)} {unit} · host wait {fixed(wait)} {unit}{per} · lead before "
            f"{fixed(site.lead_before_ms_mean)} ms · {counted(site.count, 'sync')}",
            loop_saving(site),
            "" if site.advice else f"fix: {site.hint or site.short_hint}" if site.hint or site.short_hint else "",
            *([f"  {frame.function} ({where(frame.file, frame.line)})" for frame in site.stack] if verbose else []),
        ]
        indented = (
            textwrap.fill(text, width, initial_indent="    ", subsequent_indent="    ", break_long_words=False,
                          break_on_hyphens=False)
            for text in details
            if text
        )  # fmt: skip
        first.append("\n" + "\n".join([*code_lines(line, "    ", width), *indented]) + "\n")
        blocks.append(first)
        if site.advice:
            blocks.extend([*_fix(site, "    fix", width, indent="    "), Text("")])
    return blocks


def _fix(site: CallSite, label: str, width: int, indent: str = "") -> list[Text]:
    """A call site's fix: its pattern and why in words, then the rewrite and its set-up as code (a line longer
    than the width goes on below it: code_lines), then what it will not do. The sync
    kind's hint where there is no advice."""
    advice = site.advice
    if advice is None:
        return [Text(f"{label}{site.function}: {site.hint}", style="dim")] if site.hint else []

    def words(text: str, first: str = "", more: str = "") -> Text:
        return Text(
            textwrap.fill(text, width, initial_indent=first, subsequent_indent=more or first, break_long_words=False,
                          break_on_hyphens=False)
        )  # fmt: skip

    def code(text: str) -> list[Text]:
        return [Text(line, style="green") for line in code_lines(text, indent + "    ", width)]

    elsewhere = advice.first_line and (advice.file, advice.first_line) != (site.file, site.line)
    at = f" (the rewrite is at {where(advice.file, advice.first_line)})" if elsewhere else ""
    dependency = {"false": ", a false dependency", "true": ", a true dependency"}.get(advice.dependency, "")
    lines = [words(f"{label} ({advice.pattern}{dependency}){at}: {advice.why}", more=indent + "  ")]
    if advice.rewrite is not None:
        lines.append(Text(f"{indent}  {advice.change}{':' if advice.rewrite else ''}"))
        lines.extend(code(advice.rewrite))
    if advice.setup:
        placed = f"once, before line {advice.setup_line}:" if advice.setup_line else f"{SETTING[advice.basis]}:"
        lines.append(Text(f"{indent}  {placed}"))
        lines.extend(code(advice.setup))
    if advice.caveat:
        lines.append(words(advice.caveat, indent + "  ", indent + "  "))
    return lines


def _read_together(group: ReadTogether, width: int) -> list[Text]:
    """Reads of several lines that one copy would do: where, the saving of fixing them together, the edits."""
    saving = group.predicted_saving_ms_per_step
    head = Text()
    head.append(f"read together: {group.where}", style="bold")
    span = likely(*group.saving_range_ms)
    head.append(
        f"  {group.function}"
        + (f"  saving {fixed(saving)} ms/step" if saving is not None else "")
        + (f" ({LIKELY} {span})" if span else "")
    )
    said, code = edits_said(group.edits)
    wrap = textwrap.TextWrapper(width, initial_indent="  ", subsequent_indent="  ", break_long_words=False)
    lines = [head, Text(wrap.fill(f"{group.why}.")), Text(f"  {said}")]
    lines += [Text(line, style="green") for line in code_lines(code, "    ", width)]
    return [*lines, Text(wrap.fill(group.caveat))]


def _fixed_together(group: FixedTogether, width: int) -> Text:
    """Syncs of several call sites one fix removes: the fix, its sites, and what it saves."""
    saving = group.predicted_saving_ms_per_step
    span = likely(*group.saving_range_ms)
    what = f"one setting, {group.fix}," if group.kind == "setting" else f"one statement ({group.fix}):"
    text = (
        f"fix together: {what} {group.where}"
        + (f"; saving {fixed(saving)} ms/step" if saving is not None else "")
        + (f" ({LIKELY} {span})" if span else "")
    )
    wrap = textwrap.TextWrapper(width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)
    return Text(wrap.fill(text), style="bold")


def _phase_text(phase: Phase) -> str:
    steps = f" in {counted(phase.intervals, 'step')}" if phase.phase == "main loop" else ""
    return (
        f"{phase.phase} {fixed(phase.duration_ms, 1)} ms{steps} (GPU idle "
        f"{fixed(phase.gpu_idle_pct, 0)}%, {phase.sync_count} sync{'' if phase.sync_count == 1 else 's'})"
    )


ONCE_COLUMNS: list[Column] = [
    ("phase", "phase", "left"),
    ("call site", "where", "left"),
    ("host wait\nms", "wait", "right"),
    ("syncs", "count", "right"),
]


def _once_cells(site: OnceSite) -> dict[str, str]:
    return {
        "phase": site.phase,
        "where": site.where,
        "wait": fixed(site.host_wait_ms),
        "count": str(site.count),
        "issued": site.issued_at,
    }


# (header, key of the row's text, justify), most important first. Headers break only where written ("\n");
# file:line and function names never break.
def _columns(per_step: bool, library_frames: bool, code: bool) -> list[Column]:
    unit = "ms/step" if per_step else "ms total"
    return [
        ("#", "rank", "right"),
        ("call site", "where", "left"),
        *([ISSUED_AT] if library_frames else []),
        ("what-if saving\nms/step", "saving", "right"),
        (f"exposed idle\n{unit}", "exposed", "right"),
        ("function", "function", "left"),
        ("syncs\n/step", "per_step", "right"),
        ("hint", "hint", "left"),
        (f"host wait\n{unit}", "wait", "right"),
        ("lead before\nms", "lead", "right"),
        ("count", "count", "right"),
        *([SOURCE_LINE] if code else []),
    ]


def _cells(rank: int, site: CallSite, per_step: bool, code: str) -> dict[str, str]:
    return {
        "rank": str(rank),
        "where": site.where,
        "issued": site.issued_at,
        "saving": "\n".join(
            filter(
                None,
                [
                    fixed(site.predicted_saving_ms_per_step),
                    likely(*site.saving_range_ms, digits=2),
                    f"loop {fixed(site.loop_saving_ms_per_step)}" if site.loop_saving_ms_per_step is not None else "",
                    likely(*site.loop_saving_range_ms, digits=2),
                ],
            )
        ),
        "exposed": fixed(site.exposed_idle_ms_per_step if per_step else site.exposed_idle_ms),
        "function": site.function,
        "per_step": fixed(site.syncs_per_step, 2),
        "hint": site.advice.short if site.advice else site.short_hint,
        "wait": fixed(site.host_wait_ms_per_step if per_step else site.host_wait_ms),
        "lead": fixed(site.lead_before_ms_mean),
        "count": str(site.count),
        "code": code,
    }


def _table(report: Analysis, sites: list[CallSite], code: list[str], per_step: bool, width: int) -> Table | None:
    """The call sites as a table with every column, or None where the width cannot hold it."""
    columns = _columns(per_step, report.library_frames(sites), any(code))
    rows = [_cells(rank, site, per_step, line) for rank, (site, line) in enumerate(zip(sites, code), 1)]
    return None if table_width(columns, rows) > width else fitted_table(columns, rows, width)
