"""``nsync measure``'s result in words (the terminal's and the Markdown's): the two commands' steps and the
change with its interval."""

from __future__ import annotations

import textwrap
from pathlib import Path

from nsync.render.text import fixed, printable
from nsync.report.measurement import MeasuredCommand, Measurement

STEP_SOURCES = {"marks": "optimizer steps"}
MEASUREMENT_WIDTH = 80  # the text's lines at most, however wide the terminal


def measurement_text(m: Measurement, width: int = MEASUREMENT_WIDTH) -> str:
    """The result in lines of at most ``width`` columns (a CI log's, a terminal's)."""
    paragraphs = [how_measured(m), ""]
    for c in (m.baseline, m.candidate):
        paragraphs += [f"{c.label}  {_command(m, c)}", f"   {fixed(c.median_step_ms)} ms per step ({_spread(c)})"]
    if m.change.run_pct and len(m.change.run_pct) > 1:
        paragraphs.append(
            "   B against A, run by run: " + ", ".join(fixed(p, 1, sign=True) for p in m.change.run_pct) + " %"
        )
    paragraphs += ["", verdict_line(m)]
    paragraphs += [f"note: {printable(note)}" for note in m.notes or ()]
    lines = [
        wrapped
        for paragraph in paragraphs
        for wrapped in textwrap.wrap(paragraph, width, subsequent_indent="   ", break_on_hyphens=False) or [""]
    ]
    return "\n".join(lines) + "\n"


def how_measured(m: Measurement) -> str:
    runs = len(m.baseline.run_median_step_ms), len(m.candidate.run_median_step_ms)
    if m.block_steps:
        pairs = len(m.baseline.block_median_step_ms or ())
        return (
            f"{runs[0]} run{'s' if runs[0] != 1 else ''} without the profiler, each alternating the program's two "
            f"versions in blocks of {m.block_steps} optimizer steps (A B B A...; {pairs} pairs in all); a block's "
            "step is its median, its first step left out"
            + ("; a run's change is its pairs' mean" if runs[0] > 1 else "")
        )
    source = STEP_SOURCES.get(m.step_source, f"NVTX ranges '{printable(m.step_source.removeprefix('nvtx:'))}'")
    each = f"{runs[0]} runs each" if runs[0] == runs[1] else f"{runs[0]} and {runs[1]} runs"
    return f"{each}, alternated, without the profiler; a run's step is its median over its {source}"


def version_of(c: MeasuredCommand) -> str:
    return f"(nsync.fixed() {'true' if c.label == 'B' else 'false'})"


def _command(m: Measurement, c: MeasuredCommand) -> str:
    return printable(describe(c.command)) + (f" {version_of(c)}" if m.block_steps else "")


def samples_of(c: MeasuredCommand) -> tuple[list[float], float]:
    """The medians the change was told from (its blocks', else its runs') and their spread."""
    if c.block_median_step_ms:
        return c.block_median_step_ms, c.block_spread_pct or 0.0
    return c.run_median_step_ms, c.run_spread_pct


def _spread(c: MeasuredCommand) -> str:
    medians, spread = samples_of(c)
    samples = "blocks" if c.block_median_step_ms else "runs"
    return f"{samples} {fixed(min(medians))}-{fixed(max(medians))}, spread {fixed(spread, 1)} %"


def verdict_line(m: Measurement) -> str:
    c = m.change
    figure = (
        f"{fixed(c.ms_per_step, sign=True)} ms per step ({fixed(c.pct, 1, sign=True)} %; "
        f"{100 * m.confidence:g} % interval {fixed(c.low_pct, 1, sign=True)} to {fixed(c.high_pct, 1, sign=True)} %)"
    )
    if m.verdict == "faster":
        return f"B is faster than A: {figure}"
    if m.verdict == "slower":
        return f"B is slower than A: {figure}"
    if m.verdict == "same":
        return f"B runs as fast as A, within {m.threshold_pct:g} % either way: {figure}"
    if m.block_steps and len(m.baseline.run_median_step_ms) == 1:
        more = (
            f"; about {c.steps_to_tell} steps would tell (--steps {c.steps_to_tell})"
            if c.steps_to_tell
            else "; blocks this noisy would take over 500 pairs to tell"
        )
        return f"B against A: {figure}: not told from the blocks' noise{more}"
    if m.block_steps:
        more = (
            f"; about {c.runs_to_tell} runs would tell (--runs {c.runs_to_tell})"
            if c.runs_to_tell
            else "; runs this far apart would take over 100 to tell"
        )
        return f"B against A: {figure}: not told from the runs' noise{more}"
    more = (
        f"; about {c.runs_to_tell} runs of each would tell (--runs {c.runs_to_tell})"
        if c.runs_to_tell
        else "; runs this noisy would take over 100 of each to tell"
    )
    return f"B against A: {figure}: not told from the runs' noise{more}"


def describe(command: list[str]) -> str:
    """A command as the user typed it: the interpreter nsync put before a script left out."""
    first = Path(command[0]).name if command else ""
    return " ".join(command[1:] if first.startswith("python") and len(command) > 1 else command)
