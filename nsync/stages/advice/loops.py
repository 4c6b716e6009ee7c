"""A read inside a loop over items (the replay found the loop: the same read many times a step, a few small GPU
ops apart): its fix does the loop's work for all items at once, which saves more than the reads alone."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import pandas as pd

from nsync.stages.advice.code import _Code, read_code
from nsync.stages.advice.model import Advice
from nsync.stages.callsites import copies_to_pageable_host

SHORT = "do the whole loop at once"
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
AT_ONCE = (
    "do the loop's work for all items at once on the GPU, one op over a tensor of them (per class: compare with "
    "torch.arange(n)[:, None], count with scatter_add_ or index_add_; per graph or sequence: a reduction along a "
    "dimension, or scatter; per parameter: torch._foreach_norm), and read the results once, after the step loop "
    "or every N steps: the loop's launches and Python go too, not only its waits"
)


def loop_header(code: _Code) -> tuple[int, str] | None:
    """(line, header text) of the innermost loop holding the syncing line: a comprehension in its statement, or
    a ``for``/``while`` around it inside its function (at a script's top level, inside the step loop); None when
    there is none."""
    inner = [
        node
        for node in ast.walk(code.statement)
        if isinstance(node, _COMPREHENSIONS) and node.lineno <= code.line <= (node.end_lineno or node.lineno)
    ]
    if inner:
        generators = max(inner, key=lambda node: node.lineno).generators
        found = generators[0]
        return found.target.lineno, f"for {code.text(found.target)} in {code.text(found.iter)}"
    loops = code.loops()
    if len(loops) < (2 if code.function is None else 1):  # a script's one loop is its step loop
        return None
    loop = loops[-1]
    return loop.lineno, code.lines[loop.lineno - 1].strip()


def in_source(callsites: pd.DataFrame, loops: Iterable[tuple[int, ...]], search: Iterable[Path]) -> list[bool]:
    """For each loop the replay found (its call sites), whether it can be a loop of the user's: no site's line is
    readable with no loop around it (a library reading 8 times from C++ inside one call of the line repeats its
    Python stack as a loop does). Unreadable lines cannot say: their loops stay, but for loops with copies to
    pageable memory (``.tolist()``), which only a readable loop keeps: torch's ``ctc_loss`` makes such a loop in
    C++ inside one call (fixtures/fresh7, audio_ctc_decode line 34)."""
    folders = tuple(search)
    where = dict(
        zip(callsites["site_id"].astype(int), zip(callsites["file"].astype(str), callsites["line"].astype(int)))
    )
    pageable = dict(zip(callsites["site_id"].astype(int), copies_to_pageable_host(callsites)))
    kept = []
    for sites in loops:
        codes = [read_code(where[site][0], where[site][1], folders) for site in sites if site in where]
        unreadable_kept = not any(pageable.get(site, False) for site in sites)
        kept.append(all(unreadable_kept if code is None else loop_header(code) is not None for code in codes))
    return kept


def advise_loops(callsites: pd.DataFrame, reads_per_step: dict[int, float], search: Iterable[Path]) -> pd.DataFrame:
    """The advice of each call site in a loop of reads (``reads_per_step``: site id -> the loop's reads a step)
    says so and adds the loop's fix to its own."""
    if not reads_per_step or "advice" not in callsites:
        return callsites
    folders = tuple(search)
    advice = []
    for site, file, line, found in zip(callsites["site_id"], callsites["file"], callsites["line"], callsites["advice"]):
        reads = reads_per_step.get(int(site))
        advice.append(found if reads is None else _in_loop(found, read_code(str(file), int(line), folders), reads))
    return callsites.assign(advice=pd.Series(advice, index=callsites.index, dtype=object))


def _in_loop(found: Advice | None, code: _Code | None, reads: float) -> Advice:
    header = loop_header(code) if code is not None else None
    where = f"the loop `{header[1]}` (line {header[0]})" if header else "a Python loop"
    said = f"it runs in {where}, whose reads sync {reads:.0f} times a step"
    if found is None:  # no readable line: the loop's fix alone
        return Advice("value read", "false", SHORT, f"{said[0].upper()}{said[1:]}.", None, "", f"{AT_ONCE}.", "kind")
    caveat = f"{said[0].upper()}{said[1:]}: {AT_ONCE}. Keeping the loop: {found.caveat}"
    return replace(found, short=SHORT, caveat=caveat)
