"""Text helpers of the renderers: one number formatter (:func:`fixed`), and trace text made inert for a
terminal or a Markdown file: no control character ever reaches either.

A file, function, thread, GPU or kernel name in a trace is untrusted: ``ESC[2J`` would clear the user's
screen, ``ESC]0;title BEL`` set the window's title, a carriage return overwrite a line, a bidirectional
override reorder what is read. Each such character is written as its escape (``\\x1b``, ``\\u202e``)
instead, so that it is seen, not obeyed. (The JSON and the HTML escape what they carry themselves.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nsync.report.analysis import CallSite
    from nsync.report.diff import Diff
    from nsync.report.ranks import Ranks

import dataclasses
import textwrap
from typing import Any, TypeVar

from nsync.report.analysis import LIKELY
from nsync.report.fixes import Advice, LineEdit
from nsync.words import counted

# C0 controls, DEL and C1 controls; and the bidirectional embeddings, overrides and isolates
_CONTROLS = [*range(0x00, 0x20), *range(0x7F, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_INERT = {code: f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" for code in _CONTROLS}
# code nsync wrote from the program's own source (a rewrite, its set-up, a line edit) keeps its line breaks
_INERT_CODE = {code: escape for code, escape in _INERT.items() if code != ord("\n")}
_CODE_FIELDS = {Advice: {"rewrite", "setup"}, LineEdit: {"text"}}

T = TypeVar("T")
SETTING = {"library": "the setting", "code": "set once", "kind": "set once"}  # a fix's set-up, without a place
ONCE_ROWS = 5  # the call sites outside the main loop listed


def fixed(value: float | None, digits: int = 3, sign: bool = False) -> str:
    """A figure as text for the human-facing renderers: fixed decimals (``sign``: with + or -), '-' where there
    is none. The one number formatter, so that a figure reads the same in every output."""
    if value is None:
        return "-"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def likely(low: float | None, high: float | None, digits: int = 3) -> str:
    """A predicted saving's 80 % likely range ('0.220-0.748'), '' where there is none: every output shows it
    beside the saving, so that no figure reads surer than the what-if is (nsync.stages.replay.likely)."""
    if low is None or high is None or low == high:  # (a saving of 0 has no range)
        return ""
    return f"{low:.{digits}f}-{high:.{digits}f}"


def loop_saving(site: CallSite, digits: int = 3) -> str:
    """What doing the loop of reads a call site is in for all its items at once saves ('' where it is in none):
    'its loop at once: 9.111 ms/step (80 % likely 6.320-12.700)'."""
    saving = site.loop_saving_ms_per_step
    if saving is None:
        return ""
    span = likely(*site.loop_saving_range_ms, digits=digits)
    return f"its loop at once: {fixed(saving, digits)} ms/step" + (f" ({LIKELY} {span})" if span else "")


def printable(text: str) -> str:
    """``text`` with every control character written as its escape."""
    return text.translate(_INERT)


def printable_all(value: T) -> T:
    """``value`` (a report: dataclasses, lists, tuples, dicts) with every string in it made printable."""
    return _walk(value)


def _walk(value: Any) -> Any:
    if isinstance(value, str):
        return value.translate(_INERT)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        code = _CODE_FIELDS.get(type(value), set())
        changes = {
            f.name: _code(getattr(value, f.name)) if f.name in code else _walk(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if f.init
        }
        return dataclasses.replace(value, **changes)
    if isinstance(value, list):
        return [_walk(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_walk(item) for item in value)
    if isinstance(value, dict):
        return {_walk(k): _walk(v) for k, v in value.items()}
    return value


def _code(text: str | None) -> str | None:
    return None if text is None else text.translate(_INERT_CODE)


def edits_said(edits: list[LineEdit]) -> tuple[str, str]:
    """Line edits in words ("delete lines 23, 26; line 29 becomes:") and the code they write (dedented)."""
    deleted = [str(edit.first_line) for edit in edits if not edit.text]
    written = [edit for edit in edits if edit.text]
    words = []
    if deleted:
        words.append(f"delete line{'s' if len(deleted) > 1 else ''} {', '.join(deleted)}")
    words += [f"line {edit.first_line} becomes" for edit in written]
    code = "\n".join(textwrap.dedent(edit.text) for edit in written)
    return "; ".join(words) + (":" if written else ""), code


def diff_headline(report: Diff) -> str:
    """The diff's verdict in one line, with the step times it rests on (every renderer leads with it)."""
    step = report.step_ms
    text = f"verdict: {report.verdict}"
    if step.baseline is not None:
        text += (
            f"; step {fixed(step.baseline)} → {fixed(step.candidate)} ms "
            f"({fixed(step.delta_pct, 1, sign=True)} %, noise {fixed(step.noise_pct, 1)} %, "
            f"{step.basis} step time under the profiler)"
        )
    unprofiled = step.unprofiled
    if unprofiled is not None:
        noise = unprofiled.noise_pct
        where = NOISE_FROM.get(unprofiled.noise_from, "")
        basis = f", noise {fixed(noise, 1)} %{where}; the verdict's basis" if noise is not None else ""
        text += (
            f"; predicted without the profiler {fixed(unprofiled.baseline)} → "
            f"{fixed(unprofiled.candidate)} ms ({fixed(unprofiled.delta_pct, 1, sign=True)} %, "
            f"{'calibrated' if unprofiled.calibrated else 'uncalibrated'}{basis})"
        )
    if step.verdict_basis != "profiled" and step.profiled_verdict != report.verdict:
        text += f"; under the profiler alone: {step.profiled_verdict}"
    if step.two_machines:
        text += f"; {TWO_MACHINES}"
    if step.verdict_basis == "profiled" and report.verdict == "no-change":
        text += f"; {PROFILER_MAY_HIDE}"
    return text


# what sets a calibrated diff's noise (nsync.comparison.UnprofiledStepTimes.noise_from), in the headline
NOISE_FROM = {
    "calibration runs": " in the calibration runs",
    "runs on one machine": (
        " between two runs on one machine (nsync profile --calibration-runs 3 narrows it; nsync measure times the "
        "two programs' runs alternately)"
    ),
    "two machines": " between two machines",
    "floor": " (the least counted)",
}


# fixtures/h200/README.md, "Two machines": same-code runs on two H200 machines differed by up to 33 % (41 % profiled)
TWO_MACHINES = (
    "the runs ran on two machines (two GPUs), whose steps differ more than one machine's runs do: the noise is "
    "that between machines, and only a larger change counts; compare runs made on one machine"
)


# docs/diff-and-ci.md says how much (fixtures/h200/hidden: a .item() of +7.8 % unprofiled read +1.9 % under it)
PROFILER_MAY_HIDE = (
    "the profiler can hide a change of this size (it slows the host, and a regression on the host shrinks under "
    "it): calibrate both runs (nsync profile), or time both programs without it (nsync measure), to tell"
)


def lined_up(ranks: Ranks) -> str:
    """How many collectives lined the ranks up, and how long the last rank holds the others (none where none did)."""
    if not ranks.collectives:
        return "no collective lined up"
    return (
        f"{counted(ranks.collectives, 'collective')} lined up; the last rank holds the others "
        f"{fixed(ranks.held_ms_per_step)} ms per step"
    )
