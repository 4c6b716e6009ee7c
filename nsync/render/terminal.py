"""The terminal summary: headline facts and the call-site ranking as a rich table."""

from __future__ import annotations

import io
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console, Group, JustifyMethod
from rich.table import Table
from rich.text import Text

from nsync.render.source import source_line
from nsync.render.text import diff_headline, edits_said, fixed, likely, loop_saving, printable_all
from nsync.report import as_any_report
from nsync.report.analysis import CallSite, OnceSite, Phase, ReadTogether, Report, where
from nsync.report.diff import DiffReport
from nsync.report.ranks import RanksReport

Column = tuple[str, str, JustifyMethod]  # a table column: its header, its key in the rows, its justification
ISSUED_AT: Column = ("issued at", "issued", "left")  # the library line that issues a site's sync
SOURCE_LINE: Column = ("line", "code", "left")
SETTING = {"library": "the setting", "code": "set once", "kind": "set once"}  # a set-up without a place
CONTINUED = "↪ "  # begins the rest of a line of code too long for the width, four columns further in


def packed(label: str, items: list[str], width: int) -> str:
    """``label`` and ``items`` joined by " · ", a line broken between two items, never inside one (unless it is
    longer than the width by itself)."""
    lines = [label + items[0]]
    for item in items[1:]:
        if len(lines[-1]) + 3 + len(item) > width:
            lines[-1] += " ·"
            lines.append(item)
        else:
            lines[-1] += " · " + item
    return "\n".join(lines)


def code_lines(text: str, indent: str, width: int) -> list[str]:
    """Lines of code at ``indent``, as written; one longer than the width breaks at its last space that fits
    (anywhere, if none) and goes on below, four columns further in behind :data:`CONTINUED`: no part of it
    passes for a line of its own, and nothing is left out."""
    out = []
    for line in textwrap.dedent(text).splitlines():
        head, rest = indent, line
        while len(head) + len(rest) > width and len(head) < width:  # (each turn takes a character at least)
            room = width - len(head)
            cut = rest.rfind(" ", 1, room + 1)
            cut = cut if cut > room // 2 else room  # no space far enough in: break inside the word
            out.append(head + rest[:cut].rstrip())
            head, rest = indent + "    " + CONTINUED, rest[cut:].lstrip()
        out.append(head + rest)
    return out


if TYPE_CHECKING:
    from nsync.analysis import Analysis
    from nsync.comparison import Diff


def summary(
    source: Report | Analysis | DiffReport | Diff | RanksReport,
    top: int = 10,
    width: int = 120,
    search: list[Path] | None = None,
    warnings: bool = True,
    verbose: bool = False,
) -> Group:
    """A renderable for a console ``width`` columns wide: every trace string goes in as Text, so rich markup
    in names stays inert, and every control character is written as its escape. The call sites as a table
    where every column fits, else one block each; each with its source line where the file is readable
    (``search``: the folders to look in). ``warnings``: end with the report's warnings (the command line
    prints them on stderr instead). ``verbose``: each call site's whole stack too. A diff's report or a ranks'
    report is summarised as such (their warnings are in them)."""
    given = as_any_report(source)
    if isinstance(given, RanksReport):
        return _ranks_summary(given, top, width)
    if isinstance(given, DiffReport):
        return _diff_summary(given, top, width)
    report = printable_all(replace(given, timeline=None))
    trace, steps, totals = report.trace, report.steps, report.totals
    head = Text()
    head.append("trace: ", style="bold")  # (not "nsync PATH", which reads as a command to type)
    head.append(f"{trace.path}\n")
    facts = [f"nsys {trace.nsys_version or '?'}", ", ".join(trace.gpus) or "no GPU"]
    if report.status != "ok":
        pass  # nothing was analysed: the note below says why
    elif steps.count:
        facts.append(
            f"{steps.count} steps ({steps.each + '; ' if steps.each else ''}{steps.source}, "
            f"{steps.warmup_skipped} warm-up skipped), "
            f"median {fixed(steps.median_ms)} ms (on the GPU {fixed(steps.gpu_median_ms)} ms)"
        )
    else:
        facts.append("no steps found: figures cover the whole trace")
    head.append(" | ".join(facts) + "\n")
    if report.status != "ok":
        return Group(head, *(Text(f"note: {w}", style="yellow") for w in report.warnings if warnings))
    span, gpus = totals.span_ms or 0.0, totals.gpu_count
    of = f"{gpus} GPUs x {fixed(span, 1)} ms" if gpus > 1 else f"{fixed(span, 1)} ms"
    idle_share = f" ({fixed(totals.gpu_idle_pct, 1)}% of {of})" if totals.gpu_idle_pct is not None else ""
    sites = report.callsites
    head.append(
        f"GPU idle {fixed(totals.gpu_idle_ms, 2)} ms{idle_share}; exposed idle after syncs "
        f"{fixed(totals.exposed_idle_ms, 2)} ms; host wait {fixed(totals.host_wait_ms, 2)} ms; "
        f"{totals.sync_count} syncs at {len(sites)} call site{'' if len(sites) == 1 else 's'}\n"
    )
    if report.verdict:
        head.append(f"verdict: {report.verdict.text}\n", style="bold")
    phases = [_phase_text(phase) for phase in report.phases]
    if len(phases) > 1:
        head.append(packed("phases: ", phases, width) + "\n")
    parts: list[Text | Table | Group] = [head]
    if sites:
        shown = sites[:top]
        code = [source_line(site.file, site.line, search or []) for site in shown]
        table = _table(report, shown, code, per_step=bool(steps.count), width=width)
        blocks_of = _blocks(shown, code, bool(steps.count), verbose, width)
        parts.extend([table] if table is not None and not verbose else blocks_of)
        blocks = table is None or verbose
        parts.extend(line for group in report.read_together for line in _read_together(group, width))
        what_if = report.what_if
        if what_if and what_if.replayed_step_ms is not None:
            parts.append(
                Text(
                    f"what if: step {fixed(what_if.replayed_step_ms)} ms replayed as captured, "
                    f"{fixed(what_if.unprofiled_step_ms)} ms without the profiler, "
                    f"{fixed(what_if.predicted_step_ms_without_syncs)} ms without any sync ({what_if.note})"
                )
            )
        if not blocks:  # (a block says its own fix)
            parts.extend(_fix(sites[0], f"fix #1 {sites[0].where}", width))
        if len(sites) > top:
            parts.append(Text(f"... {len(sites) - top} more call sites (--top, --json)", style="dim"))
    outside = report.outside_main_loop[:ONCE_ROWS]
    if outside and steps.count:
        parts.append(Text("syncs outside the main loop, once each: the host's wait in them is the most they cost"))
        issued = [ISSUED_AT] if report.library_frames(outside) else []
        parts.append(fitted_table([*ONCE_COLUMNS, *issued], [_once_cells(site) for site in outside], width))
    if warnings:
        parts.extend(Text(f"warning: {warning}", style="yellow") for warning in report.warnings)
    return Group(*parts)


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
            first.append(f" (likely {span})" if span else "")
        exposed = site.exposed_idle_ms_per_step if per_step else site.exposed_idle_ms
        wait = site.host_wait_ms_per_step if per_step else site.host_wait_ms
        per = f" · {fixed(site.syncs_per_step, 2)} syncs/step" if per_step else ""
        details = [
            f"issued at {site.issued_at}" if site.issued_at else "",
            f"exposed idle {fixed(exposed)} {unit} · host wait {fixed(wait)} {unit}{per} · lead before "
            f"{fixed(site.lead_before_ms_mean)} ms · {site.count} syncs",
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
        + (f" (likely {span})" if span else "")
    )
    said, code = edits_said(group.edits)
    wrap = textwrap.TextWrapper(width, initial_indent="  ", subsequent_indent="  ", break_long_words=False)
    lines = [head, Text(wrap.fill(f"{group.why}.")), Text(f"  {said}")]
    lines += [Text(line, style="green") for line in code_lines(code, "    ", width)]
    return [*lines, Text(wrap.fill(group.caveat))]


def _phase_text(phase: Phase) -> str:
    steps = f" in {phase.intervals} steps" if phase.phase == "main loop" else ""
    return (
        f"{phase.phase} {fixed(phase.duration_ms, 1)} ms{steps} (GPU idle "
        f"{fixed(phase.gpu_idle_pct, 0)}%, {phase.sync_count} sync{'' if phase.sync_count == 1 else 's'})"
    )


ONCE_ROWS = 5
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


def _table(report: Report, sites: list[CallSite], code: list[str], per_step: bool, width: int) -> Table | None:
    """The call sites as a table with every column, or None where the width cannot hold it."""
    columns = _columns(per_step, report.library_frames(sites), any(code))
    rows = [_cells(rank, site, per_step, line) for rank, (site, line) in enumerate(zip(sites, code), 1)]
    return None if _width(columns, rows) > width else fitted_table(columns, rows, width)


def _width(columns: list[Column], rows: list[dict[str, str]]) -> int:
    """A rich table's width with edges: each column's widest line of a cell, its padding (2) and rule (1), and the
    last rule."""
    widths = [
        max(len(line) for text in [header, *(r[key] for r in rows)] for line in text.split("\n"))
        for header, key, _ in columns
    ]
    return sum(widths) + 3 * len(widths) + 1


def fitted_table(columns: list[Column], rows: list[dict[str, str]], width: int) -> Table:
    """As many of ``columns`` (header, key, justify; most important first) as fit in ``width``, with a caption
    naming those left out. No cell and no header word is ever broken, so that ``grep w_print.py:19`` finds
    its line in any log."""
    left_out: list[str] = []
    while len(columns) > 2 and _width(columns, rows) > width:
        left_out.insert(0, columns[-1][0].replace("\n", " "))
        columns = columns[:-1]
    table = Table(show_lines=False, header_style="bold", expand=False)
    if left_out:
        table.caption = f"not shown at {width} columns: {', '.join(left_out)} (--json has every figure)"
    for header, _key, justify in columns:
        table.add_column(header, justify=justify, no_wrap=True)
    for row in rows:
        table.add_row(*(Text(row[key]) for _header, key, _ in columns))
    return table


def render_terminal(source: Report | Analysis, top: int = 10, width: int | None = None) -> str:
    console = Console(record=True, width=width or 140, file=io.StringIO(), color_system=None)
    console.print(summary(source, top, console.width))
    return console.export_text()


VERDICT_STYLE = {"regression": "bold red", "improvement": "bold green", "no-change": "bold", "inconclusive": "yellow"}


def _diff_summary(source: DiffReport, top: int, width: int) -> Group:
    report = printable_all(replace(source, timelines=(None, None)))
    parts: list[Text | Table] = [
        Text(f"nsync diff {report.baseline.path} → {report.candidate.path}"),
        Text(diff_headline(report), style=VERDICT_STYLE.get(report.verdict, "")),
    ]
    parts += [Text(f"inconclusive because {reason}", style="yellow") for reason in report.reasons]
    columns: list[Column] = [
        ("call site", "where", "left"),
        *([ISSUED_AT] if report.library_frames(top) else []),
        ("delta\nms/step", "delta", "right"),
        ("status", "status", "left"),
        ("baseline\nms/step", "baseline", "right"),
        ("candidate\nms/step", "candidate", "right"),
        ("function", "function", "left"),
    ]
    rows = [
        {
            "where": site.where,
            "issued": site.issued_at or "",
            "function": str(site.function),
            "status": site.status,
            "baseline": fixed(site.baseline_exposed_idle_ms_per_step),
            "candidate": fixed(site.candidate_exposed_idle_ms_per_step),
            "delta": fixed(site.delta_ms_per_step, sign=True),
        }
        for site in report.callsites[:top]
    ]
    if report.callsites:
        parts.append(fitted_table(columns, rows, width))
    return Group(*parts)


RANK_COLUMNS: list[Column] = [
    ("rank", "rank", "right"),
    ("last at\ncollectives", "last", "right"),
    ("late\nms/step", "late", "right"),
    ("step\nms", "step", "right"),
    ("GPU idle\nms/step", "idle", "right"),
    ("steps", "steps", "right"),
    ("collectives", "collectives", "right"),
    ("export", "path", "left"),
]
STRAGGLER_COLUMNS: list[Column] = [
    ("rank", "rank", "right"),
    ("call site", "where", "left"),
    ("delay to all ranks\nms/step", "delay", "right"),
    ("collectives\ndelayed", "count", "right"),
    ("issued at", "issued", "left"),
    ("function", "function", "left"),
]


def _ranks_summary(report: RanksReport, top: int, width: int) -> Group:
    report = printable_all(report)
    head = Text()
    head.append("nsync ranks ", style="bold")
    head.append(f"{len(report.ranks)} ranks, {report.collectives} collectives lined up; the last rank holds the "
                f"others {fixed(report.held_ms_per_step)} ms per step\n")  # fmt: skip
    head.append(f"verdict: {report.verdict}\n", style="bold")
    rows = [
        {
            "rank": str(rank.rank),
            "last": str(rank.last_at),
            "late": fixed(rank.lateness_ms_per_step),
            "step": fixed(rank.median_step_ms),
            "idle": fixed(rank.gpu_idle_ms_per_step),
            "steps": str(rank.steps),
            "collectives": str(rank.collectives),
            "path": rank.path,
        }
        for rank in report.ranks
    ]
    parts: list[Text | Table] = [head, fitted_table(RANK_COLUMNS, rows, width)]
    if report.stragglers:
        parts.append(Text("syncs that make a rank late, by the delay they add to every rank's collectives:"))
        sites = [
            {
                "rank": str(site.rank),
                "where": site.where,
                "delay": fixed(site.delay_ms_per_step),
                "count": str(site.collectives_delayed),
                "issued": site.issued_at,
                "function": site.function,
            }
            for site in report.stragglers[:top]
        ]
        parts.append(fitted_table(STRAGGLER_COLUMNS, sites, width))
    parts.extend(Text(f"warning: {warning}", style="yellow") for warning in report.warnings)
    return Group(*parts)
