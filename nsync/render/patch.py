"""A report's rewrites as a unified diff (``--suggest-patch``): for the user to read, change and apply with
``git apply`` or ``patch -p1``. nsync never edits a file itself.

The rewrites are the call sites' advice (nsync.stages.advice), applied to the files as they are here: each
statement's lines replaced, each one-time set-up inserted before its line. Two rewrites that touch the same
lines keep the better-ranked one; the other is said in the header.

Switched (``--suggest-switch``): each rewrite is put behind ``if nsync.fixed():`` with the statements as they
are under ``else:`` (the fewest whole statements of one block that hold its lines), and ``import nsync`` at the
top, so that ``nsync measure SCRIPT`` times both versions in one process (nsync/capturing/ab.py).
"""

from __future__ import annotations

import difflib
import functools
import os
import textwrap
from pathlib import Path

from nsync.code import find_source, first_statement_line, search_folders, source_lines, statement_span, string_rows
from nsync.marks import FIXED_ENV
from nsync.render.options import RenderOptions, refuse
from nsync.render.text import printable
from nsync.report import Analysis, Result

NOT_AN_ANALYSIS = "only an analysis has them, of one trace (nsync analyze)"


@functools.singledispatch
def render_patch(result: Result, options: RenderOptions = RenderOptions()) -> str:
    """The unified diff of every call site's rewrite, with a header that says what each change is for."""
    refuse(result, "rewrites to suggest", NOT_AN_ANALYSIS)


@render_patch.register
def _analysis_patch(result: Analysis, options: RenderOptions = RenderOptions()) -> str:
    return _patch(result, options, switched=False)


@functools.singledispatch
def render_switch(result: Result, options: RenderOptions = RenderOptions()) -> str:
    """The same rewrites, each behind ``if nsync.fixed():``, the code as it is kept under ``else:``."""
    refuse(result, "rewrites to suggest", NOT_AN_ANALYSIS)


@render_switch.register
def _analysis_switch(result: Analysis, options: RenderOptions = RenderOptions()) -> str:
    return _patch(result, options, switched=True)


def _patch(report: Analysis, options: RenderOptions, switched: bool) -> str:
    search = search_folders(report.trace.path, list(options.source_dirs))
    by_file: dict[Path, list[Change]] = {}
    for rank, site in enumerate(report.callsites, 1):
        advice = site.advice
        if advice is None or (advice.rewrite is None and not advice.setup_line):
            continue
        found = find_source(advice.file, search)
        if found is None:
            continue
        wanted = []
        if advice.rewrite is not None:
            wanted.append((advice.first_line, advice.last_line, advice.rewrite.splitlines()))
        if advice.setup and advice.setup_line:
            wanted.append((advice.setup_line, advice.setup_line - 1, advice.setup.splitlines()))
        by_file.setdefault(found, []).append((f"#{rank} {site.where} ({advice.pattern})", advice.why, wanted))
    for group in report.read_together:
        found = find_source(group.file, search)
        if found is not None:
            wanted = [(edit.first_line, edit.last_line, edit.text.splitlines()) for edit in group.edits]
            by_file.setdefault(found, []).append((f"read together {group.where}", group.why, wanted))
    header = [
        "nsync's suggested rewrites: read them before applying (git apply FILE, or patch -p1 < FILE).",
        f"From {Path(report.trace.path).name}; the call sites' ranks are those of the report.",
    ]
    if switched:
        header.append(SWITCHED_HEADER)
    diffs: list[str] = []
    for path, changes in by_file.items():
        lines = source_lines(str(path)) or []
        changed, said = _apply(lines, changes, switched)
        header += said
        name = _display(path, search)
        diffs += difflib.unified_diff(
            [line + "\n" for line in lines], [line + "\n" for line in changed], f"a/{name}", f"b/{name}"
        )
    if not diffs:
        header.append("No call site has a rewrite nsync could write from the code here (the report says why).")
    return "".join(f"# {printable(line)}\n" for line in header) + "".join(diffs)


# a change: what names it in the header, why, and its edits (first, last, new lines); last = first - 1 inserts
Edit = tuple[int, int, list[str]]
Change = tuple[str, str, list[Edit]]


def _apply(lines: list[str], changes: list[Change], switched: bool = False) -> tuple[list[str], list[str]]:
    """The file's lines with the changes applied, and one line of the header per change (or why not);
    ``switched``: each change's replacements behind ``if nsync.fixed():`` (:func:`_switched`), and
    ``import nsync`` at the top of the file."""
    text = "\n".join(lines) + "\n"
    in_strings = string_rows(text) if switched else set()
    edits: list[Edit] = []
    seen: list[Edit] = []  # the changes' own edits applied (switched, within the edits that wrap them)
    said = []
    for label, why, wanted in changes:
        wanted = [edit for edit in wanted if edit not in seen]  # two sites of one line: one rewrite
        if any(max(first, last) > len(lines) for first, last, _ in wanted):
            said.append(f"{label}: not applied, the file here is shorter than the traced one")
            continue
        mine = _switched(lines, text, in_strings, wanted) if switched else wanted
        if isinstance(mine, str):
            said.append(f"{label}: not applied, {mine}")
            continue
        if any(_conflict(edit, other) for edit in mine for other in edits):
            said.append(f"{label}: not applied, it changes lines another rewrite does")
            continue
        edits += mine
        seen += wanted
        said.append(f"{label}: {textwrap.shorten(why, 100)}")
    if switched and any(edit[1] >= edit[0] for edit in edits) and "import nsync" not in lines:
        at = first_statement_line(text)
        edits.append((at, at - 1, ["import nsync"]))
    return _edited(lines, edits), said


def _edited(lines: list[str], edits: list[Edit]) -> list[str]:
    """``lines`` with ``edits`` (which touch no lines in common) applied."""
    changed = list(lines)
    # from the end of the file, so that each edit's line numbers still hold; at one line, the replacement first,
    # then the set-ups before it, the better-ranked one last so that it ends up first
    order = sorted(range(len(edits)), key=lambda k: (edits[k][0], edits[k][1] >= edits[k][0], k), reverse=True)
    for k in order:
        first, last, new = edits[k]
        changed[first - 1 : max(last, first - 1)] = new
    return changed


SWITCHED_HEADER = (
    "Each rewrite is behind `if nsync.fixed():`, the code as it is under `else:`: `nsync measure SCRIPT` times "
    f"both in one process; {FIXED_ENV}=1 runs the fix."
)
SWITCH = "if nsync.fixed():  # nsync's rewrite; the code as it is under else (nsync measure times both)"


def _switched(lines: list[str], text: str, in_strings: set[int], wanted: list[Edit]) -> list[Edit] | str:
    """One change's edits with its replacements put behind ``if nsync.fixed():``, the statements that hold them
    as they are under ``else:`` (its set-ups there too where they fall inside them; elsewhere they stay as
    set-ups); or why it cannot be."""
    replaced = [edit for edit in wanted if edit[1] >= edit[0]]
    mine = [edit for edit in wanted if edit[1] < edit[0]]
    if not replaced:
        return mine
    span = statement_span(text, min(e[0] for e in replaced), max(e[1] for e in replaced))
    if span is None:
        return "its lines are not whole statements here"
    first, last, column = span
    if any(row in in_strings for row in range(first, last + 1)):
        return "a string spans lines of its statements (indenting would change it)"
    inside = [edit for edit in mine if first < edit[0] <= last]
    shifted = [(a - first + 1, b - first + 1, new) for a, b, new in replaced + inside]
    region = lines[first - 1 : last]
    return [edit for edit in mine if edit not in inside] + [
        (first, last, _either(_edited(region, shifted), region, region[0][:column]))
    ]


def _either(fixed: list[str], as_is: list[str], indent: str) -> list[str]:
    """``if nsync.fixed():`` the fixed lines, ``else:`` the lines as they are, at ``indent`` (the first line's
    own: a file indented with tabs gets a tab more, any other four spaces)."""
    unit = "\t" if "\t" in indent else "    "

    def body(block: list[str]) -> list[str]:
        indented = [unit + line if line.strip() else line for line in block]
        return indented if any(line.strip() for line in block) else [indent + unit + "pass"]

    return [indent + SWITCH, *body(fixed), indent + "else:", *body(as_is)]


def _conflict(edit: Edit, other: Edit) -> bool:
    """Whether two edits touch the same lines: two replacements that overlap, or an insertion inside a
    replaced range (insertions before one line do not conflict)."""
    inserts, other_inserts = edit[1] < edit[0], other[1] < other[0]
    if inserts and other_inserts:
        return False
    if inserts:
        return other[0] < edit[0] <= other[1]
    if other_inserts:
        return edit[0] < other[0] <= edit[1]
    return edit[0] <= other[1] and other[0] <= edit[1]


def _display(path: Path, search: list[Path]) -> str:
    """The path in the diff: relative to the working directory where it is inside it, else to the folder it
    was found in (apply the patch there), else absolute less its root."""
    resolved = path.resolve()
    for folder in [Path.cwd().resolve(), *(f.resolve() for f in search)]:
        if resolved.is_relative_to(folder):
            return resolved.relative_to(folder).as_posix()
    return resolved.as_posix().lstrip(os.sep)
