"""Each call site's advice: a known library's switch, else its line read and rewritten, else nothing (the sync
kind's hint stands)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import pandas as pd

from nsync.stages.advice.code import _Code, _strip_comment, read_code
from nsync.stages.advice.edit import _checked, _Edit
from nsync.stages.advice.library import library_advice
from nsync.stages.advice.model import Advice
from nsync.stages.advice.patterns import FORMATTED, MOVED, PRINT, UNKNOWN, entry, recognise
from nsync.stages.advice.recognise import _from_function, tensor_assigned_through_a_mask
from nsync.stages.advice.rewrites import _REWRITERS
from nsync.stages.advice.values import compared_on_the_gpu
from nsync.stages.callsites import copies_to_pageable_host, library_package


def advise_code(code: _Code, file: str, printed: bool = False) -> Advice:
    """The advice for a readable line: its pattern, and the rewrite where the code allows one."""
    own = _strip_comment(code.lines[code.line - 1])
    pattern = recognise(own)
    if pattern.name == UNKNOWN or pattern is FORMATTED:  # the line with the rest of its statement (an f-string's
        pattern = recognise(code.header(from_line=True))  # ``torch.tensor(`` with ``device=`` on the lines below)
    if pattern.name == UNKNOWN:  # what the line's text cannot tell, its function can
        pattern = _from_function(code) or pattern
    if pattern.name == UNKNOWN:  # the statement's lines above it last: their syncs are most often their own
        pattern = recognise(code.header())
    if pattern is MOVED and compared_on_the_gpu(code):  # ``v if m.to(d) < v else m``: the comparison syncs
        pattern = entry("control flow on a GPU value")
    if pattern.name == "host-to-device copy of a Python value" and tensor_assigned_through_a_mask(code):
        pattern = entry("dynamic shape (a mask or nonzero)")  # the mask's sync stays once the value is pinned
    if printed and pattern.name != PRINT:
        pattern = entry(PRINT)
    edit = _Edit()
    rewriter = _REWRITERS.get(pattern.name)
    if rewriter is not None:
        edit = rewriter(code)
    if edit.rewrite is not None:
        edit = _checked(edit)
    statement = code.statement
    first, last = (
        (statement.lineno, statement.end_lineno or statement.lineno) if edit.whole else code.lines_of(statement)
    )
    return Advice(
        pattern=pattern.name,
        dependency=edit.dependency or pattern.dependency,
        short=edit.short or pattern.short,
        why=" ".join((edit.why or f"`{own.strip()}` syncs").split()) + ".",  # a statement's lines, as one
        rewrite=edit.rewrite,
        setup=edit.setup,
        caveat=edit.caveat or pattern.fix,
        basis="code",
        file=file,
        first_line=first if edit.rewrite is not None else 0,
        last_line=last if edit.rewrite is not None else 0,
        setup_line=edit.setup_line if edit.setup else 0,
    )


def advise(
    file: str,
    line: int,
    sync_file: str,
    sync_line: int,
    sync_function: str,
    package: str,
    printed: bool,
    search: Iterable[Path] = (),
) -> Advice | None:
    """The advice for one call site (None: no readable line and no known library: the kind's hint stands).

    A sync issued inside a known library (``package``) gets that library's switch; otherwise the user's line
    (``file``:``line``) is read, or, when the sync frame is another readable file, that line."""
    folders = tuple(search)
    if package:
        known = library_advice(package, sync_file, sync_function)
        if known is not None:
            return known
    code = read_code(file, line, folders)
    if code is not None:
        advice = advise_code(code, file, printed)
        if advice.pattern != UNKNOWN or not package:
            return advice
    if package:
        inside = read_code(sync_file, sync_line, folders)
        if inside is not None:
            advice = advise_code(inside, sync_file, printed)
            return replace(
                advice,
                why=f"{advice.why[:-1]} (inside {package}, not in your code).",
                rewrite=None,
                setup="",
                first_line=0,
                last_line=0,
                setup_line=0,
                caveat=f"a change of {package}'s own code: look for a setting of {package} that avoids it, or a "
                f"newer version. {advice.caveat}",
            )
    return None


def advise_callsites(callsites: pd.DataFrame, search: Iterable[Path]) -> pd.DataFrame:
    """Each call site's advice (None where neither its line is readable nor its library known: its sync kind's
    hint stands). One read and parse per file, whatever the number of sites."""
    folders = tuple(search)
    columns = ["file", "line", "sync_file", "sync_line", "sync_function", "stack"]
    advice = [
        advise(
            str(file),
            int(line),
            str(sync_file),
            int(sync_line),
            str(sync_function),
            library_package(str(sync_file)),
            any(frame.file.endswith("_tensor_str.py") for frame in stack),
            folders,
        )
        for file, line, sync_file, sync_line, sync_function, stack in zip(*(callsites[c] for c in columns))
    ]
    inside = copies_to_pageable_host(callsites)
    advice = [
        (_inside_the_call(found) if copied else _the_kinds(found, short, hint))
        if found is not None and found.pattern == UNKNOWN
        else found
        for found, short, hint, copied in zip(advice, callsites["short_hint"], callsites["hint"], inside)
    ]
    return callsites.assign(advice=pd.Series(advice, index=callsites.index, dtype=object))


INSIDE_THE_CALL = "a copy inside the call"


def _inside_the_call(advice: Advice) -> Advice:
    """A readable line no pattern fits whose sync is a copy to pageable host memory: the line writes no copy, so a
    call on it makes one inside (torch's ``ctc_loss`` copies CUDA lengths so, fixtures/fresh7); pinning, the
    kind's advice, does not reach a copy the call makes."""
    return replace(
        advice,
        basis="kind",
        short=INSIDE_THE_CALL,
        why=f"no copy is written on this line ({advice.why[:-1]}): a call on it copies a GPU tensor to pageable "
        "host memory inside it, as torch's ctc_loss does with CUDA lengths.",
        caveat="pinning does not reach a copy the call makes: pass the call that tensor on the CPU where it takes "
        "one (lengths and sizes often can be), or call it less often.",
    )


def _the_kinds(advice: Advice, short: str, hint: str) -> Advice:
    """A readable line no pattern fits: said so, with the advice of the sync's kind instead."""
    return replace(
        advice,
        basis="kind",
        short=short or advice.short,
        why=f"no pattern nsync knows fits this line ({advice.why[:-1]}): the advice of the sync's kind follows.",
        caveat=hint or advice.caveat,
    )
