"""Several reads, one fix: value reads on several lines of one step whose values the host uses, read with one
copy where the last is read."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from nsync.stages.advice.code import _Code, _is_read, _names_in, _parses, read_code
from nsync.stages.advice.model import LineEdit, ReadGroup


def read_groups(callsites: pd.DataFrame, search: Iterable[Path]) -> list[ReadGroup]:
    """The groups of value reads that one copy would do (see ReadGroup). A read joins only where nsync wrote no
    rewrite for it (the host uses the value: keeping it on the GPU is not the fix), its statement is
    ``name = tensor.item()`` (``float(t)``, ``int(t)``), and it runs as often as the others of its group; the
    reads' values must not be used between the first read and the last."""
    folders = tuple(search)
    candidates: dict[tuple[str, str], list[tuple[int, _Code, int]]] = {}
    for site_id, file, line, advice, executions in zip(
        callsites["site_id"], callsites["file"], callsites["line"], callsites["advice"], callsites["count"]
    ):
        if advice is None or advice.basis != "code" or advice.pattern != "value read" or advice.rewrite is not None:
            continue
        code = read_code(str(file), int(line), folders)
        if code is None or _single_read(code) is None or code.function is None:
            continue
        candidates.setdefault((str(file), code.function.name), []).append((int(site_id), code, int(executions)))
    groups = []
    for (file, function), found in candidates.items():
        found.sort(key=lambda item: item[1].statement.lineno)
        counts = [executions for _, _, executions in found]
        if len(found) < 2 or max(counts) > 1.1 * min(counts):
            continue
        group = _coalesced(found, file, function)
        if group is not None:
            groups.append(group)
    return groups


def _single_read(code: _Code) -> tuple[str, ast.expr] | None:
    """(name, tensor) of a statement ``name = tensor.item()`` (or ``float``/``int``), else None."""
    statement = code.statement
    if (
        isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name)
        and (inner := _is_read(statement.value)) is not None
        and not (isinstance(statement.value, ast.Call) and getattr(statement.value.func, "attr", "") == "tolist")
    ):
        return statement.targets[0].id, inner
    return None


def _coalesced(found: list[tuple[int, _Code, int]], file: str, function: str) -> ReadGroup | None:
    codes = [code for _, code, _ in found]
    reads = [_single_read(code) for code in codes]
    names = [read[0] for read in reads if read is not None]
    tensors = [code.text(read[1]) for code, read in zip(codes, reads) if read is not None]
    parents = {id(code.chain[-2]) for code in codes}
    first, last = codes[0].statement.lineno, codes[-1].statement.end_lineno or codes[-1].statement.lineno
    between = [
        node
        for node in ast.walk(codes[0].chain[-2])
        if isinstance(node, ast.Name) and first <= node.lineno <= last and node.id in names
        and isinstance(node.ctx, ast.Load)
    ]  # fmt: skip
    stores = [n for n in ast.walk(codes[0].chain[-2]) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
    rebound = [  # a tensor read early and changed before the last read: the combined read would see the change
        node
        for code, read in zip(codes, reads)
        if read is not None
        for node in stores
        if code.statement.lineno < node.lineno <= last and node.id in _names_in(read[1])
    ]
    if len(parents) != 1 or len(set(names)) != len(names) or between or rebound:
        return None  # not one block, or a value used (or a tensor changed) before the last read
    indent = codes[-1].indent
    combined = f"{indent}{', '.join(names)} = torch.stack([{', '.join(tensors)}]).tolist()"
    edits = [LineEdit(*code.lines_of(code.statement), "") for code in codes[:-1]]
    edits.append(LineEdit(*codes[-1].lines_of(codes[-1].statement), combined))
    if not _parses(combined):
        return None
    lines = [code.statement.lineno for code in codes]
    return ReadGroup(
        site_ids=[site for site, _, _ in found],
        released=[site for site, _, _ in found[:-1]],
        file=file,
        function=function,
        lines=lines,
        why=f"lines {', '.join(map(str, lines))} read {len(lines)} values of one step, one sync each, and the host "
        "uses them: one copy of all of them, where the last is read, needs one sync",
        edits=edits,
        caveat="torch.stack needs one shape and dtype: 0-dimensional tensors of one dtype (cast with .float() "
        "where not); one sync remains, for the one copy, at the last read's line",
    )
