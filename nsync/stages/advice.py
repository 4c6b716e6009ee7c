"""Stage 5b: the fix of each call site, written from the user's own code.

The call site's line is read (nsync.source) and parsed (ast). Its pattern is recognised by ``classify`` (the
taxonomy of the articles nsync grew from: value reads, prints, control flow on GPU values, dynamic shapes,
host-to-device traps, Python builtins on tensors, explicit synchronizes), and where the code allows it the
rewrite is written in the user's own names, with the one-time set-up it needs and where that goes. A sync
issued inside a known library gets that library's own switch. Where no pattern fits, or the file is not
readable here, the advice falls back to the sync's kind. Nothing here runs the code: what a rewrite cannot
know from the text (a value's type, whether a list is used later) it says in its caveat.
"""

from __future__ import annotations

import ast
import functools
import re
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd

from nsync.source import source_lines
from nsync.stages.callsites import library_package

UNKNOWN = "a sync PyTorch reported"

# (pattern, whether the host truly needs the value, regular expression on the line, the fix), first match wins.
# Tuned on fixtures/syncs/tuning.json (56 lines of six libraries) and the lab scenarios; scored on
# fixtures/syncs/held-out-2.json, which it was not tuned on (tests/test_sync_free.py). A line whose text fits
# none is read in its function (_from_function).
# a call's parentheses with no top-level comma (commas inside brackets and nested calls allowed)
_ONE_ARGUMENT = r"\((?:[^(),\[\]]|\[[^\]]*\]|\((?:[^()]|\([^()]*\))*\))*\)"
PATTERNS: list[tuple[str, str, re.Pattern[str], str]] = [
    (
        "explicit synchronize",
        "false",
        re.compile(r"\bsynchronize\s*\("),
        "delete it, or wait on an event recorded after the work you need (event.synchronize()) only where the "
        "host must know that work is done",
    ),
    (
        "print of a CUDA tensor",
        "false",
        re.compile(r"\bprint\s*\(|\blog\w*\s*\(|f[\"']"),
        "log it every N steps, or keep the values on the GPU and print them once after the loop",
    ),
    (
        "control flow on a GPU value",
        "true",
        re.compile(r"^\s*(if|elif|while|assert)\b|\.(any|all)\s*\(\s*\)"),
        "compute both outcomes and select on the GPU (torch.where), or move the check out of the step",
    ),
    (
        "host-to-device copy of a Python value",
        "false",
        re.compile(r"torch\.(tensor|as_tensor)\s*\((.*device|[^()]*\)\.to\s*\()|\]\s*=\s*-?[\d.]+\s*$"),
        "build the tensor once, before the loop (or from pinned memory with non_blocking=True)",
    ),
    (
        "index from a Python tuple or list",
        "false",
        re.compile(r"\[[^\]]*[(\[]\s*-?\d+\s*,"),
        "make the index a CUDA tensor once, before the loop (torch.tensor(..., device=x.device)), and index with it",
    ),
    (
        "copy from pageable memory",
        "false",
        re.compile(r"\.(to|cuda)\s*\(.*non_blocking"),
        "pin the host tensor once (.pin_memory(), or DataLoader(pin_memory=True)): non_blocking is then asynchronous",
    ),
    (
        "value read",
        "false",
        re.compile(r"\.(item|tolist|numpy)\s*\("),
        "keep the value on the GPU and read it once at the end of the step; several reads: torch.stack them "
        "and copy once",
    ),
    (
        "copy between host and device",
        "false",
        re.compile(r"\.(to|cuda)\s*\(|super\(\)\.cpu\s*\("),
        "move it once, before the loop (a model, a metric's state, constant tensors): in the step, keep what it "
        "needs on the device",
    ),
    (
        "dynamic shape (a mask or nonzero)",
        "true",
        re.compile(
            r"\.nonzero\s*\(|\bnonzero\s*\(|masked_select|\.unique\s*\(|\bunique\s*\(|repeat_interleave|bincount"
            r"|\[[^\]]*(==|!=|<=|>=|<|>)|\[[^\]]*\b\w*mask\s*\]|torch\.where\s*" + _ONE_ARGUMENT
        ),
        "keep the shape fixed: torch.where(mask, x, 0) or a multiply by the mask; pass output_size= to "
        "repeat_interleave",
    ),
    (
        "value read",
        "false",
        re.compile(r"\.cpu\s*\(|\b(float|int|bool)\s*\("),
        "keep the value on the GPU and read it once at the end of the step; several reads: torch.stack them "
        "and copy once",
    ),
    (
        "Python builtin on tensors",
        "false",
        re.compile(r"(?<![.\w])(max|min|sum|any|all|abs)\s*\("),
        "use the torch op (torch.maximum, torch.sum, ...), which stays on the GPU",
    ),
]
PRINT = "print of a CUDA tensor"
INDEX = "index from a Python tuple or list"
SHORT = {  # the usual fix of each pattern in a few words (a rewriter may say it more precisely)
    "explicit synchronize": "delete the synchronize",
    PRINT: "print after the loop",
    "control flow on a GPU value": "decide on the GPU (torch.where)",
    "host-to-device copy of a Python value": "build the tensor once",
    "index from a Python tuple or list": "index with a CUDA tensor",
    "copy from pageable memory": "pin the host tensor",
    "value read": "keep the value on the GPU",
    "copy between host and device": "move it once, before the loop",
    "dynamic shape (a mask or nonzero)": "keep the shape fixed",
    "Python builtin on tensors": "use the torch op",
    UNKNOWN: "keep the value on the GPU",
}


def classify(code: str) -> tuple[str, str, str]:
    """(pattern, dependency, fix) of a syncing source line, from its text (less a trailing comment); a general
    answer when none fits."""
    statement = re.split(r"\s#", code, maxsplit=1)[0]
    for pattern, dependency, expression, fix in PATTERNS:
        if expression.search(statement):
            return pattern, dependency, fix
    return UNKNOWN, "unknown", "find what this line reads from the GPU and keep it there (nsync profile prices it)"


@dataclass(frozen=True)
class Advice:
    """How to fix one call site: its pattern, and the rewrite in the user's own names where one can be written.

    ``rewrite`` replaces lines ``first_line``-``last_line`` of ``file`` (indented as there; '' deletes them;
    None: no rewrite could be written, ``why`` and ``caveat`` say what to do). ``setup`` goes before line
    ``setup_line`` (0: nowhere in particular, e.g. a library's setting). ``basis``: "code" (read from the
    line), "library" (a known library's sync and its switch) or "kind" (the sync's kind alone: no readable
    line, or no pattern fits).
    """

    pattern: str
    dependency: str  # "false": the host does not need the value (delete, defer, batch); "true": restructure
    short: str  # the fix in a few words, for a table's cell
    why: str
    rewrite: str | None
    setup: str
    caveat: str
    basis: str
    file: str = ""
    first_line: int = 0
    last_line: int = 0
    setup_line: int = 0


@dataclass(frozen=True)
class _Edit:
    """What a rewriter found: the statement rewritten (None: none), the set-up and its line, the words."""

    rewrite: str | None = None
    setup: str = ""
    setup_line: int = 0
    why: str = ""
    caveat: str = ""
    dependency: str = ""
    short: str = ""
    whole: bool = False  # the rewrite replaces the whole compound statement (an if/else), not its header


# ---------------------------------------------------------------------------------------------------------
# Known libraries: a sync issued inside them is fixed by their own setting, where one exists.

_LIBRARY_FIXES: list[tuple[str, re.Pattern[str], str, str, str, str]] = [
    # (package, path and function, pattern, why, the switch, caveat)
    (
        "transformers",
        re.compile(r"trainer\.py:(_run_epoch|_inner_training_loop|training_step)$"),
        "control flow on a GPU value",
        "the Trainer checks every step's loss for NaN or Inf on the host (torch.isnan(...) or torch.isinf(...))",
        "TrainingArguments(..., logging_nan_inf_filter=False)",
        "a NaN or Inf loss is then logged as it is instead of being replaced by the running average",
    ),
    (
        "transformers",
        re.compile(r"trainer\.py:_maybe_log_save_evaluate$"),
        "value read",
        "the Trainer reads the loss and the gradient norm on the host each time it logs",
        "TrainingArguments(..., logging_steps=N)  # a larger N: fewer reads",
        "the reads remain, once every logging_steps steps",
    ),
    (
        "transformers",
        re.compile(r"masking_utils\.py:_ignore_causal_mask_sdpa$"),
        "control flow on a GPU value",
        "the attention-mask check reads whether the padding mask is all ones, on the host, each forward",
        "model(input_ids, attention_mask=None)  # only for batches without padding",
        "with padding the mask is needed, and so is the check",
    ),
    (
        "transformers",
        re.compile(r"generation/(utils|stopping_criteria)\.py:"),
        "value read",
        "generate() reads on the host, each token, whether every sequence has finished",
        "",
        "no setting of generate removes this read: it is one sync per token, priced here; batch more prompts "
        "per call to spread it",
    ),
    (
        "accelerate",
        re.compile(r"operations\.py:send_to_device$"),
        "copy from pageable memory",
        "the batch is copied to the GPU from pageable memory, so the host waits for each copy",
        "DataLoader(..., pin_memory=True)  # Trainer: TrainingArguments(dataloader_pin_memory=True)",
        "pinned memory is page-locked RAM: fine for batches, not for whole datasets",
    ),
    (
        "torchmetrics",
        re.compile(r"\.py:"),
        "value read",
        "the metric checks its inputs on the host at each update",
        "Metric(..., validate_args=False)  # torchmetrics' classification metrics",
        "the inputs are then not checked: validate them once in a test",
    ),
    (
        "torch_geometric",
        re.compile(r"(num_nodes|_scatter|_to_dense_batch)\.py:"),
        "value read",
        "the number of nodes (or the batch size) is read from the GPU with .max() because it was not given",
        "pass it: num_nodes=... (dim_size=..., batch_size=..., max_num_nodes=...)",
        "the value passed must be right for every batch",
    ),
    (
        "lightning",
        re.compile(r"apply_func\.py:to_item$|logger_connector"),
        "value read",
        "Lightning reads each logged tensor on the host (self.log) when it logs a step",
        "Trainer(log_every_n_steps=N), or self.log(..., on_step=False, on_epoch=True)",
        "the values are read less often, not never",
    ),
]


def library_advice(package: str, file: str, function: str) -> Advice | None:
    """The switch of a known library for a sync it issues in ``file``'s ``function``, or None."""
    key = f"{file}:{function}"
    for name, where, pattern, why, switch, caveat in _LIBRARY_FIXES:
        if package.startswith(name) and where.search(key):
            return Advice(
                pattern=pattern,
                dependency="false" if switch else "true",
                short=f"a setting of {name}" if switch else f"inside {name}: no setting",
                why=f"{why} (inside {package}, not in your code).",
                rewrite=None,
                setup=switch,
                caveat=caveat,
                basis="library",
                file=file,
            )
    return None


# ---------------------------------------------------------------------------------------------------------
# Reading the code


@dataclass(frozen=True)
class _Code:
    """A parsed file and the statement holding the syncing line."""

    lines: list[str]
    tree: ast.Module
    chain: list[ast.AST]  # module .. innermost statement holding the line
    line: int

    @property
    def statement(self) -> ast.stmt:
        return self.chain[-1]  # type: ignore[return-value]

    @functools.cached_property
    def _bytes(self) -> tuple[bytes, list[int]]:
        """The file as UTF-8 and where each line starts in it (ast's column offsets count bytes)."""
        encoded = [line.encode() for line in self.lines]
        starts = [0]
        for raw in encoded:
            starts.append(starts[-1] + len(raw) + 1)
        return b"\n".join(encoded), starts

    def _span(self, node: ast.AST) -> tuple[int, int]:
        starts = self._bytes[1]
        return (
            starts[node.lineno - 1] + node.col_offset,  # type: ignore[attr-defined]
            starts[node.end_lineno - 1] + node.end_col_offset,  # type: ignore[attr-defined]
        )

    def text(self, node: ast.AST, changes: Sequence[tuple[ast.AST, str]] = ()) -> str:
        """The source text of a node, with the sub-nodes in ``changes`` replaced by their texts."""
        start, end = self._span(node)
        return self._replaced(start, end, changes)

    def rewritten(self, changes: Sequence[tuple[ast.AST, str]], node: ast.AST | None = None) -> str:
        """The statement's (or ``node``'s) whole lines with the nodes in ``changes`` replaced (a comment after
        the statement's end is dropped: it spoke of the code replaced)."""
        node = node or self.statement
        starts = self._bytes[1]
        return self._replaced(starts[node.lineno - 1], self._span(node)[1], changes)  # type: ignore[attr-defined]

    def _replaced(self, start: int, end: int, changes: Sequence[tuple[ast.AST, str]]) -> str:
        whole = self._bytes[0]
        out, at = [], start
        for (first, last), new in sorted((self._span(n), new) for n, new in changes):
            out += [whole[at:first], new.encode()]
            at = last
        out.append(whole[at:end])
        return b"".join(out).decode()

    def header(self) -> str:
        """The statement's own text: a compound statement's header alone (``if x.any():``), less comments."""
        first, last = self.lines_of(self.statement)
        return "\n".join(_strip_comment(text) for text in self.lines[first - 1 : last])

    def lines_of(self, node: ast.stmt) -> tuple[int, int]:
        """A statement's lines: a compound statement's header alone."""
        body = getattr(node, "body", None)
        if body and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return node.lineno, max(node.lineno, body[0].lineno - 1)
        return node.lineno, node.end_lineno or node.lineno

    @property
    def indent(self) -> str:
        text = self.lines[self.statement.lineno - 1]
        return text[: len(text) - len(text.lstrip())]

    def on_line(self) -> list[ast.AST]:
        """The statement's expression nodes that touch the syncing line (the whole header for one line)."""
        roots = _header_nodes(self.statement)
        nodes = [n for root in roots for n in ast.walk(root) if hasattr(n, "lineno")]
        touching = [n for n in nodes if n.lineno <= self.line <= (n.end_lineno or n.lineno)]  # type: ignore[attr-defined]
        return touching or nodes

    @property
    def function(self) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        found = [n for n in self.chain if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        return found[-1] if found else None

    def loops(self) -> list[ast.For | ast.While]:
        """The loops holding the statement inside its function (outermost first)."""
        function = self.function
        inside = self.chain[self.chain.index(function) + 1 :] if function else self.chain
        return [n for n in inside[:-1] if isinstance(n, (ast.For, ast.While))]

    def names(self) -> set[str]:
        return {n.id for n in ast.walk(self.tree) if isinstance(n, ast.Name)} | {
            n.name for n in ast.walk(self.tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))
        }

    def fresh(self, base: str) -> str:
        """A name the file does not use yet."""
        taken, name, k = self.names(), base, 2
        while name in taken:
            name, k = f"{base}_{k}", k + 1
        return name

    def module_names(self) -> set[str]:
        """Names bound at the module's top level (assignments, imports, definitions)."""
        bound: set[str] = set()
        for node in self.tree.body:
            bound |= _bound(node)
        return bound

    def setup_place(self, needs: set[str]) -> tuple[int, str] | None:
        """Where a one-time set-up using ``needs`` can go: before the outermost loop of the statement's function
        when everything it needs is bound before that loop; else at the top level before the function's
        definition when everything is a top-level name. (line, indent), or None."""
        loops = self.loops()
        function = self.function
        if loops:
            loop = loops[0]
            before: set[str] = set(self.module_names())
            if function is not None:
                before |= {a.arg for a in ast.walk(function.args) if isinstance(a, ast.arg)}
                for node in ast.walk(function):
                    if isinstance(node, ast.stmt) and node.lineno < loop.lineno and node is not function:
                        before |= _bound(node)
            assigned_in_loop = set().union(*(_bound(n) for n in ast.walk(loop) if isinstance(n, ast.stmt)))
            if needs <= (before | _BUILTINS) - assigned_in_loop:
                text = self.lines[loop.lineno - 1]
                return loop.lineno, text[: len(text) - len(text.lstrip())]
            return None
        top = self.chain[1] if len(self.chain) > 2 else None
        if top is None or not isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return None
        if needs <= self.module_names() | _BUILTINS:
            first = min([top.lineno, *(d.lineno for d in top.decorator_list)])
            return first, ""
        return None

    def later_uses(self, name: str) -> list[ast.Name]:
        """Loads of ``name`` after the statement, in its function (or module)."""
        scope = self.function or self.tree
        end = self.statement.end_lineno or self.statement.lineno
        return [
            n
            for n in ast.walk(scope)
            if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) and n.lineno > end
        ]


_BUILTINS = {"torch", "True", "False", "None"}


def _bound(node: ast.AST) -> set[str]:
    """Names a statement binds itself (not inside nested definitions)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    targets: list[ast.AST] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
        targets = [node.target]
    elif isinstance(node, (ast.With, ast.AsyncWith)):
        targets = [item.optional_vars for item in node.items if item.optional_vars is not None]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _header_nodes(node: ast.stmt) -> list[ast.AST]:
    if isinstance(node, (ast.If, ast.While)):
        return [node.test]
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return [node.target, node.iter]
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return [item.context_expr for item in node.items]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return []
    return [node]


def _strip_comment(text: str) -> str:
    return re.split(r"\s#", text, maxsplit=1)[0].rstrip()


def read_code(file: str, line: int, search: Iterable[Path] = ()) -> _Code | None:
    lines = source_lines(file, tuple(search)) if line > 0 else None
    if lines is None or line > len(lines):
        return None
    tree = _parse("\n".join(lines))
    if tree is None:
        return None
    chain: list[ast.AST] = [tree]
    body: list[ast.stmt] = tree.body
    while True:
        holding = [s for s in body if s.lineno <= line <= (s.end_lineno or s.lineno)]
        if not holding:
            break
        node = _syncing(holding, lines)
        chain.append(node)
        inner: list[ast.stmt] = []
        for field in ("body", "orelse", "finalbody", "handlers"):
            for child in getattr(node, field, []):
                inner.extend(child.body if isinstance(child, ast.ExceptHandler) else [child])
        if not any(s.lineno <= line <= (s.end_lineno or s.lineno) for s in inner):
            break
        body = inner
    if len(chain) < 2:
        return None
    return _Code(lines, tree, chain, line)


def _syncing(statements: list[ast.stmt], lines: list[str]) -> ast.stmt:
    """Of several statements on one line (``step(); torch.cuda.synchronize()``), the one that syncs: the last
    whose own text has a pattern (the first when none has)."""
    if len(statements) == 1:
        return statements[0]
    code = _Code(lines, ast.Module(body=[], type_ignores=[]), [], 0)
    known = [s for s in statements if classify(code.text(s))[0] != UNKNOWN]
    return known[-1] if known else statements[0]


_PARSED: dict[int, tuple[str, ast.Module | None]] = {}


def _parse(text: str) -> ast.Module | None:
    key = hash(text)
    cached = _PARSED.get(key)
    if cached is not None and cached[0] == text:
        return cached[1]
    try:
        tree: ast.Module | None = ast.parse(text)
    except (SyntaxError, ValueError):
        tree = None
    if len(_PARSED) > 64:
        _PARSED.clear()
    _PARSED[key] = (text, tree)
    return tree


# ---------------------------------------------------------------------------------------------------------
# The rewriters, one per pattern: each reads the statement and returns what it can write (an empty _Edit: none).


def _is_copy_read(node: ast.AST) -> ast.expr | None:
    """``x.cpu()`` / ``x.numpy()``: the ``x`` copied to the host, else None (said, not rewritten: the host
    tensor may be what the code needs)."""
    if (
        isinstance(node, ast.Call)
        and not node.args
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("cpu", "numpy")
    ):
        return node.func.value
    return None


def _is_read(node: ast.AST) -> ast.expr | None:
    """``x.item()`` / ``x.tolist()`` / ``float(x)`` / ``int(x)``: the ``x`` read, else None."""
    if (
        isinstance(node, ast.Call)
        and not node.args
        and not node.keywords
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("item", "tolist")
    ):
        return node.func.value
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("float", "int")
        and len(node.args) == 1
        and not node.keywords
    ):
        return node.args[0]
    return None


def _value_read(code: _Code) -> _Edit:
    statement = code.statement
    for node in code.on_line():
        if isinstance(node, ast.ListComp) and (inner := _is_read(node.elt)) is not None:
            elt = code.text(node.elt)
            stacked = f"torch.stack({code.text(node, [(node.elt, code.text(inner))])})"
            return _Edit(
                short="torch.stack the reads",
                rewrite=code.rewritten([(node, stacked)]),
                why=f"`{elt}` in the comprehension reads one value per item: one sync each",
                caveat="this keeps the values as one tensor on the GPU, with no sync; where the numbers are needed, "
                "read them all at once with .tolist() (one sync), at the end of the step or every N steps",
            )
        if isinstance(node, ast.DictComp) and (inner := _is_read(node.value)) is not None:
            return _Edit(
                rewrite=code.rewritten([(node.value, code.text(inner))]),
                short="keep the values on the GPU",
                why=f"`{code.text(node.value)}` in the comprehension reads one value per item: one sync each",
                caveat="the dictionary then holds tensors on the GPU, with no sync; where the numbers are needed, "
                "read them all with one copy: dict(zip(d, torch.stack(list(d.values())).tolist()))",
            )
    reads = [(n, inner) for n in code.on_line() if (inner := _is_read(n)) is not None]
    if not reads:
        copies = [n for n in code.on_line() if _is_copy_read(n) is not None]
        return (
            _Edit(why=f"`{code.text(copies[0])}` copies the tensor to the host and waits for the GPU")
            if copies
            else _Edit()
        )
    read, inner = reads[0]
    kept = f"{code.text(inner)}.detach()"
    what = code.text(read)
    if (
        isinstance(statement, ast.AugAssign)
        and _holds(statement.value, read)
        and isinstance(statement.target, ast.Name)
    ):
        total = statement.target.id
        return _Edit(
            rewrite=code.rewritten([(read, kept)]),
            why=f"`{what}` copies the value to the host and waits for the GPU, to add it up on the host",
            caveat=f"`{total}` becomes a tensor on the GPU: read it once, {total}.item(), where the number is "
            "needed (after the loop, or every N steps)",
        )
    if (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Call)
        and isinstance(statement.value.func, ast.Attribute)
        and statement.value.func.attr == "append"
        and len(statement.value.args) == 1
        and _holds(statement.value.args[0], read)
    ):
        kept_in = code.text(statement.value.func.value)
        return _Edit(
            rewrite=code.rewritten([(read, kept)]),
            why=f"`{what}` copies the value to the host and waits for the GPU, only to keep it in a list",
            caveat=f"`{kept_in}` then holds tensors on the GPU: read them once, torch.stack({kept_in}).tolist(), "
            "where the numbers are needed (after the loop, or every N steps)",
        )
    if (
        isinstance(statement, ast.Assign)
        and statement.value is read
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name)
    ):
        name = statement.targets[0].id
        host_uses = [use for use in code.later_uses(name) if _used_by_host(code, use)]
        if host_uses:
            first = host_uses[0]
            return _Edit(
                why=f"`{what}` reads the value on the host, and the host uses it: line {first.lineno}",
                caveat=f"a true dependency: the host uses `{name}` at line {first.lineno} (`"
                f"{code.lines[first.lineno - 1].strip()}`); keep what it does there on the GPU (torch.where), or do "
                "it every N steps; several such reads: read them together, with one copy",
                dependency="true",
            )
        return _Edit(
            rewrite=code.rewritten([(read, kept)]),
            why=f"`{what}` copies the value to the host and waits for the GPU",
            caveat=f"`{name}` becomes a tensor on the GPU: where the host needs the number, read it once, at the "
            "end of the step or every N steps",
        )
    return _Edit(why=f"`{what}` copies the value to the host and waits for the GPU")


def _used_by_host(code: _Code, use: ast.Name) -> bool:
    """Whether a load of a name decides something on the host: a test, a range, an index bound, a format."""
    scope = code.function or code.tree
    for node in ast.walk(scope):
        if isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert)) and _holds(node.test, use):
            return True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("range", "print")
            and any(_holds(a, use) for a in node.args)
        ):
            return True
        if isinstance(node, ast.Slice) and any(_holds(p, use) for p in (node.lower, node.upper, node.step) if p):
            return True
        if isinstance(node, ast.FormattedValue) and _holds(node.value, use):
            return True
    return False


def _holds(tree: ast.AST, node: ast.AST) -> bool:
    return any(n is node for n in ast.walk(tree))


def _print(code: _Code) -> _Edit:
    statement = code.statement
    if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)):
        return _Edit()
    call = statement.value
    values = [a for a in call.args if not isinstance(a, ast.Constant)]
    formatted = [
        v.value
        for a in call.args
        if isinstance(a, ast.JoinedStr)
        for v in a.values
        if isinstance(v, ast.FormattedValue)
    ]
    shown = formatted if len(values) == 1 and isinstance(values[0], ast.JoinedStr) else values
    counter = _loop_counter(code)
    what = code.text(call)
    why = f"`{what}` formats a CUDA tensor, which copies it to the host and waits for the GPU"
    if counter is not None:
        body = "\n".join("    " + text for text in code.rewritten([]).splitlines())
        return _Edit(
            rewrite=f"{code.indent}if {counter} % 100 == 0:\n{body}",
            short="print every 100 steps",
            why=why,
            caveat="it still syncs, once every 100 steps (choose the interval); the other steps are not printed",
        )
    if len(shown) != 1:
        return _Edit(why=why)
    value = shown[0]
    inner = _is_read(value)
    kept = code.text(inner if inner is not None else value)
    name = code.fresh("printed")
    place = code.setup_place(set())
    if place is None:
        return _Edit(why=why)
    line, indent = place
    return _Edit(
        rewrite=f"{code.indent}{name}.append({kept}.detach())",
        setup=f"{indent}{name} = []  # print them once, after the loop: print(torch.stack({name}).tolist())",
        setup_line=line,
        why=why,
        caveat=f"the values are printed after the loop instead of as it runs; in a long run print and clear "
        f"`{name}` every N steps",
    )


def _loop_counter(code: _Code) -> str | None:
    """The step counter of the innermost loop holding the statement: ``for step in range(...)`` or
    ``for i, batch in enumerate(...)``."""
    for loop in reversed(code.loops()):
        if not isinstance(loop, ast.For) or not isinstance(loop.iter, ast.Call):
            continue
        called = loop.iter.func
        if isinstance(called, ast.Name) and called.id == "range" and isinstance(loop.target, ast.Name):
            return loop.target.id
        if (
            isinstance(called, ast.Name)
            and called.id == "enumerate"
            and isinstance(loop.target, ast.Tuple)
            and isinstance(loop.target.elts[0], ast.Name)
        ):
            return loop.target.elts[0].id
    return None


def _literal_index(node: ast.AST) -> bool:
    return (
        isinstance(node, (ast.Tuple, ast.List))
        and bool(node.elts)
        and all(
            (isinstance(e, ast.Constant) and isinstance(e.value, int) and not isinstance(e.value, bool))
            or (isinstance(e, ast.UnaryOp) and isinstance(e.operand, ast.Constant))
            for e in node.elts
        )
    )


def _index(code: _Code) -> _Edit:
    literal_names = _literal_names(code)
    for node in code.on_line():
        if not isinstance(node, ast.Subscript):
            continue
        parts = (
            node.slice.elts if isinstance(node.slice, ast.Tuple) and not _literal_index(node.slice) else [node.slice]
        )
        for part in parts:
            named = isinstance(part, ast.Name) and part.id in literal_names
            if not (_literal_index(part) or named):
                continue
            source = code.text(part)
            base = (
                f"{part.id}_T"
                if isinstance(part, ast.Name) and part.id.isupper()
                else (f"{part.id}_index" if isinstance(part, ast.Name) else f"{_target(code) or 'picked'}_index")
            )
            name = code.fresh(base)
            needs = {part.id} if isinstance(part, ast.Name) else set()
            simple = isinstance(node.value, (ast.Name, ast.Attribute))
            place = code.setup_place(needs | _names_in(node.value)) if simple else None
            device = f"{code.text(node.value)}.device" if place is not None else '"cuda"'
            place = place or code.setup_place(needs)
            if place is None:
                return _Edit(why=f"the index `{source}` is a Python {_kind_of(part, literal_names)}")
            line, indent = place
            data = source if isinstance(part, ast.Name) else f"[{source.strip('()[]').rstrip(', ')}]"
            on = " on the current CUDA device" if device == '"cuda"' else ""
            return _Edit(
                rewrite=code.rewritten([(part, name)]),
                setup=f"{indent}{name} = torch.tensor({data}, device={device})",
                setup_line=line,
                why=f"the index `{source}` is a Python {_kind_of(part, literal_names)}: PyTorch copies it to the GPU "
                "each time, from pageable memory, and waits for the copy",
                caveat=f"the index tensor is made once{on}"
                + (" (name the tensor's device if it lives elsewhere)" if on else "")
                + "; the values it picks are the same",
            )
    return _Edit()


def _from_function(code: _Code) -> tuple[str, str, str] | None:
    """The pattern of a line whose text alone says nothing, read in its function: an index named by a tuple
    or list of integers (``x[:, COLS]``), an index named by a boolean mask made there (``idx = ~torch.isnan(r)``
    then ``r[idx]``), or a module's ``_apply(fn)`` moving its state (``.to(device)`` calls it)."""
    if _named_literal_index(code):
        wanted = INDEX
    elif _mask_named_index(code):
        wanted = "dynamic shape (a mask or nonzero)"
    elif _applies_module_fn(code):
        wanted = "copy between host and device"
    else:
        return None
    return next((p, d, f) for p, d, _, f in PATTERNS if p == wanted)


def _mask_named_index(code: _Code) -> bool:
    """Whether the line indexes with a name its function binds to a boolean expression."""
    scope = code.function or code.tree
    masks = {
        target.id
        for node in ast.walk(scope)
        if isinstance(node, ast.Assign) and _boolean(node.value)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    return any(
        isinstance(part, ast.Name) and part.id in masks
        for node in code.on_line()
        if isinstance(node, ast.Subscript)
        for part in (node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice])
    )


_BOOLEAN_CALLS = {"isnan", "isinf", "isfinite", "isin", "logical_and", "logical_or", "logical_not", "logical_xor",
                  "eq", "ne", "lt", "le", "gt", "ge", "bool"}  # fmt: skip


def _boolean(node: ast.AST) -> bool:
    """Whether an expression makes a boolean tensor: a comparison, a negation or a bitwise mix of them, or a
    call that returns one (``torch.isnan``, ``x.eq(y)``, ``.bool()``)."""
    if isinstance(node, ast.Compare):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Invert, ast.Not)):
        return _boolean(node.operand)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
        return _boolean(node.left) or _boolean(node.right)
    return isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in _BOOLEAN_CALLS


def _applies_module_fn(code: _Code) -> bool:
    """Whether the line is a module's ``_apply(fn)`` (what ``.to()``, ``.cuda()``, ``.cpu()`` run) calling
    ``fn`` on its state, or handing it on."""
    function = code.function
    if function is None or function.name != "_apply":
        return False
    parameters = [a.arg for a in function.args.args if a.arg not in ("self", "cls")]
    if not parameters:
        return False
    fn = parameters[0]
    return any(
        isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Name) and node.func.id == fn)
            or (getattr(node.func, "attr", "") == "_apply" and any(_names_in(a) == {fn} for a in node.args))
        )
        for node in code.on_line()
    )


def _named_literal_index(code: _Code) -> bool:
    """Whether the line indexes with a name bound to a tuple or list of integers (in its file or function)."""
    names = _literal_names(code)
    return any(
        isinstance(part, ast.Name) and part.id in names
        for node in code.on_line()
        if isinstance(node, ast.Subscript)
        for part in (node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice])
    )


def _kind_of(part: ast.AST, names: dict[str, str]) -> str:
    if isinstance(part, ast.Name):
        return names.get(part.id, "list")
    return "tuple" if isinstance(part, ast.Tuple) else "list"


def _literal_names(code: _Code) -> dict[str, str]:
    """Names bound once, at the top level or in the function, to a tuple or list of integers: tuple|list."""
    found: dict[str, str] = {}
    scopes: list[ast.AST] = [code.tree] + ([code.function] if code.function else [])
    for scope in scopes:
        for node in getattr(scope, "body", []):
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and _literal_index(node.value)
            ):
                found[node.targets[0].id] = "tuple" if isinstance(node.value, ast.Tuple) else "list"
    return found


def _target(code: _Code) -> str | None:
    statement = code.statement
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
        return statement.targets[0].id
    return None


def _names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _torch_call(node: ast.AST, *names: str) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in names
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "torch"
    )


def _host_to_device(code: _Code) -> _Edit:
    for node in code.on_line():
        if not (_torch_call(node, "tensor", "as_tensor") and any(k.arg == "device" for k in node.keywords)):  # type: ignore[attr-defined]
            continue
        call: ast.Call = node  # type: ignore[assignment]
        text = code.text(call)
        why = (
            f"`{text}` builds the tensor from Python values on the host and copies it to the GPU from pageable "
            "memory: the host waits for the copy"
        )
        data = call.args[0] if call.args else None
        place = code.setup_place(_names_in(call) - {"torch"})
        if place is not None:
            target = _target(code)
            base = data.id if isinstance(data, ast.Name) else (target or "values")
            name = code.fresh(f"{base}_GPU" if base.isupper() else f"{base}_gpu")
            line, indent = place
            return _Edit(
                rewrite=code.rewritten([(call, name)]),
                setup=f"{indent}{name} = {text}",
                setup_line=line,
                why=why,
                caveat=f"`{name}` is made once: if the values change between steps, copy them instead from pinned "
                "memory with non_blocking=True",
            )
        device = next(k for k in call.keywords if k.arg == "device")
        kept = [code.text(a) for a in call.args] + [
            f"{k.arg}={code.text(k.value)}" for k in call.keywords if k.arg not in ("device", "pin_memory")
        ]
        # torch.as_tensor has no pin_memory: torch.tensor copies the Python values the same way
        pinned = (
            f"torch.tensor({', '.join([*kept, 'pin_memory=True'])}).to({code.text(device.value)}, non_blocking=True)"
        )
        return _Edit(
            rewrite=code.rewritten([(call, pinned)]),
            why=why,
            caveat="the values change each step, so they are still copied each step, but from pinned memory: the "
            "copy is queued and the host does not wait",
        )
    return _Edit()


def _pageable(code: _Code) -> _Edit:
    for node in code.on_line():
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("to", "cuda")
            and any(k.arg == "non_blocking" for k in node.keywords)
        ):
            continue
        held = node.func.value
        source = code.text(held)
        why = (
            f"`{source}` is in pageable memory, so .{node.func.attr}(..., non_blocking=True) cannot be "
            "asynchronous: the host waits for the copy"
        )
        if isinstance(held, ast.Name):
            made = [
                s
                for s in code.tree.body
                if isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == held.id for t in s.targets)
            ]
            if len(made) == 1 and held.id not in _bound_in(code.function):
                after = (made[0].end_lineno or made[0].lineno) + 1
                return _Edit(
                    setup=f"{held.id} = {held.id}.pin_memory()",
                    short=f"pin {held.id} once",
                    setup_line=after,
                    why=why,
                    caveat=f"`{held.id}` is pinned once, where it is made (line {made[0].lineno}); this line stays "
                    "as it is",
                )
            loaders = _calls_named(code.tree, "DataLoader")
            if loaders:
                return _Edit(
                    why=why,
                    short="DataLoader(pin_memory=True)",
                    caveat=f"pin it where it is made: the DataLoader at line {loaders[0].lineno} with pin_memory=True",
                )
        return _Edit(
            rewrite=code.rewritten([(held, f"{source}.pin_memory()")]),
            why=why,
            caveat="pinning each step costs a copy on the host: pin where the tensor is made (DataLoader(..., "
            "pin_memory=True)) where you can",
        )
    return _Edit()


def _bound_in(function: ast.AST | None) -> set[str]:
    if function is None:
        return set()
    return set().union(*(_bound(n) for n in ast.walk(function) if isinstance(n, ast.stmt) and n is not function))


def _calls_named(tree: ast.AST, name: str) -> list[ast.Call]:
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and (getattr(n.func, "id", None) == name or getattr(n.func, "attr", None) == name)
    ]


def _is_mask(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Invert, ast.Not)):
        return _is_mask(node.operand)
    return isinstance(node, ast.Compare) or (isinstance(node, ast.Name) and "mask" in node.id.lower())


def _dynamic_shape(code: _Code) -> _Edit:
    parents = {child: parent for parent in ast.walk(code.statement) for child in ast.iter_child_nodes(parent)}
    for node in code.on_line():
        if not (isinstance(node, ast.Subscript) and _is_mask(node.slice) and isinstance(node.ctx, ast.Load)):
            continue
        mask, values = code.text(node.slice), code.text(node.value)
        kept = f"torch.where({mask}, {values}, 0)"
        why = (
            f"`{code.text(node)}` keeps only the entries where the mask is true: its size depends on GPU values, "
            "so the host waits to learn it"
        )
        parent = parents.get(node)
        call = parents.get(parent) if parent is not None else None
        if isinstance(parent, ast.Attribute) and isinstance(call, ast.Call) and not call.args:
            if parent.attr == "sum":
                return _Edit(
                    rewrite=code.rewritten([(node, kept)]),
                    why=why,
                    caveat="the same sum, with zeros where the mask is false",
                    dependency="false",
                    short="torch.where, not a mask",
                )
            if parent.attr == "mean":
                return _Edit(
                    rewrite=code.rewritten([(call, f"({kept}.sum() / ({mask}).sum())")]),
                    why=why,
                    caveat="the same mean; an empty mask gives NaN, as before",
                    dependency="false",
                    short="torch.where, not a mask",
                )
        target = _target(code)
        if target is not None:
            uses = code.later_uses(target)
            summed = [
                u
                for u in uses
                if isinstance(parents_of(code, u), ast.Attribute) and parents_of(code, u).attr == "sum"  # type: ignore[union-attr]
            ]
            if uses and len(summed) == len(uses):
                return _Edit(
                    rewrite=code.rewritten([(node, kept)]),
                    why=why,
                    caveat=f"`{target}` keeps the full shape, with zeros where the mask is false: right for its sum "
                    f"(line {uses[0].lineno}), which is all this function does with it",
                    dependency="false",
                    short="torch.where, not a mask",
                )
        return _Edit(
            why=why,
            caveat=f"if only a sum or a count of the kept entries is needed, use {kept}; code that needs the kept "
            "entries themselves is a true dependency: move it out of the step, or pad to a fixed size",
            dependency="true",
        )
    return _Edit()


def parents_of(code: _Code, node: ast.AST) -> ast.AST | None:
    scope = code.function or code.tree
    for parent in ast.walk(scope):
        if any(child is node for child in ast.iter_child_nodes(parent)):
            return parent
    return None


def _control_flow(code: _Code) -> _Edit:
    statement = code.statement
    if isinstance(statement, ast.Assert):
        test = code.text(statement.test)
        message = f", {code.text(statement.msg)}" if statement.msg is not None else ""
        return _Edit(
            rewrite=f"{code.indent}torch._assert_async({test}{message})",
            short="check on the GPU (_assert_async)",
            why=f"`assert {test}` reads a GPU value on the host to decide whether to raise",
            caveat="the check then runs on the GPU and a failure is raised at a later sync, not at this line; "
            "torch._assert_async is PyTorch's, though not a public API",
        )
    if (
        isinstance(statement, ast.If)
        and len(statement.body) == 1
        and len(statement.orelse) == 1
        and all(isinstance(s, ast.Assign) and len(s.targets) == 1 for s in (*statement.body, *statement.orelse))
    ):
        then, other = statement.body[0], statement.orelse[0]
        if code.text(then.targets[0]) == code.text(other.targets[0]):  # type: ignore[attr-defined]
            target = code.text(then.targets[0])  # type: ignore[attr-defined]
            selected = (
                f"{code.indent}{target} = torch.where({code.text(statement.test)}, {code.text(then.value)}, "  # type: ignore[attr-defined]
                f"{code.text(other.value)})"  # type: ignore[attr-defined]
            )
            return _Edit(
                rewrite=selected,
                why=f"`if {code.text(statement.test)}:` reads a GPU value on the host to choose a branch",
                caveat="both values are computed; the GPU picks one, element by element",
                whole=True,
            )
    if isinstance(statement, (ast.If, ast.While)):
        return _Edit(
            why=f"`{code.text(statement.test)}` is a GPU value the host reads to choose what to run",
            caveat="a true dependency: compute both outcomes and select with torch.where, or make the check every "
            "N steps, or after the loop",
        )
    return _Edit()


def _builtin(code: _Code) -> _Edit:
    for node in code.on_line():
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("max", "min")):
            continue
        if len(node.args) != 2 or node.keywords:
            continue
        a, b = node.args
        bound = "min" if node.func.id == "max" else "max"
        numbers = [isinstance(x, ast.Constant) for x in (a, b)]
        if any(numbers):
            tensor, number = (b, a) if numbers[0] else (a, b)
            new = f"torch.clamp({code.text(tensor)}, {bound}={code.text(number)})"
        else:
            new = f"torch.{'maximum' if node.func.id == 'max' else 'minimum'}({code.text(a)}, {code.text(b)})"
        return _Edit(
            rewrite=code.rewritten([(node, new)]),
            short=new.split("(")[0],
            why=f"Python's `{node.func.id}` compares the tensors on the host, which reads them",
            caveat="the result is a tensor on the GPU"
            + ("" if any(numbers) else "; both arguments must be tensors of one device"),
        )
    return _Edit()


def _synchronize(code: _Code) -> _Edit:
    statement = code.statement
    if not (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)):
        return _Edit()
    called = code.text(statement.value.func)
    if not called.endswith("cuda.synchronize"):
        return _Edit(why=f"`{code.text(statement.value)}` waits for the GPU")
    timing = any(
        getattr(n.func, "attr", "") in ("perf_counter", "time", "monotonic")
        for n in ast.walk(code.function or code.tree)
        if isinstance(n, ast.Call)
    )
    why = f"`{code.text(statement.value)}` makes the host wait until the GPU has finished everything queued"
    if timing:  # deleting it would change what the clock measures: no rewrite, the way to time instead
        return _Edit(
            why=why,
            caveat="it closes a host clock's timing here: time the GPU work with CUDA events instead "
            "(torch.cuda.Event(enable_timing=True), read once after the loop), then delete it",
        )
    return _Edit(
        rewrite="",
        why=why,
        caveat="if the host must know that some work is done, wait on an event recorded after that work",
    )


_REWRITERS = {
    "value read": _value_read,
    PRINT: _print,
    "index from a Python tuple or list": _index,
    "host-to-device copy of a Python value": _host_to_device,
    "copy from pageable memory": _pageable,
    "dynamic shape (a mask or nonzero)": _dynamic_shape,
    "control flow on a GPU value": _control_flow,
    "Python builtin on tensors": _builtin,
    "explicit synchronize": _synchronize,
}


def advise_code(code: _Code, file: str, printed: bool = False) -> Advice:
    """The advice for a readable line: its pattern, and the rewrite where the code allows one."""
    own = _strip_comment(code.lines[code.line - 1])
    pattern, dependency, fix = classify(own)
    if pattern == UNKNOWN:
        pattern, dependency, fix = classify(code.header())
    if pattern == UNKNOWN:  # what the line's text cannot tell, its function can
        pattern, dependency, fix = _from_function(code) or (pattern, dependency, fix)
    if printed and pattern != PRINT:
        pattern, dependency, fix = PRINT, "false", classify("print(x)")[2]
    edit = _Edit()
    rewriter = _REWRITERS.get(pattern)
    if rewriter is not None:
        edit = rewriter(code)
    if edit.rewrite is not None:
        edit = _checked(edit)
    statement = code.statement
    first, last = (
        (statement.lineno, statement.end_lineno or statement.lineno) if edit.whole else code.lines_of(statement)
    )
    return Advice(
        pattern=pattern,
        dependency=edit.dependency or dependency,
        short=edit.short or SHORT[pattern],
        why=(edit.why or f"`{own.strip()}` syncs") + ".",
        rewrite=edit.rewrite,
        setup=edit.setup,
        caveat=edit.caveat or fix,
        basis="code",
        file=file,
        first_line=first if edit.rewrite is not None else 0,
        last_line=last if edit.rewrite is not None else 0,
        setup_line=edit.setup_line if edit.setup else 0,
    )


def _checked(edit: _Edit) -> _Edit:
    """A rewrite that does not parse is never shown: the advice keeps its words and drops the code."""
    for text in (edit.rewrite or "", edit.setup):
        if not _parses(text):
            return replace(edit, rewrite=None, setup="", setup_line=0)
    return edit


def _parses(text: str) -> bool:
    try:
        ast.parse(textwrap.dedent(text))
    except SyntaxError:
        return False
    return True


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


ADVICE_COLUMNS = ("advice",)  # what advise_callsites adds to the call sites: an Advice, or None


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
    return callsites.assign(advice=pd.Series(advice, index=callsites.index, dtype=object))


@dataclass(frozen=True)
class LineEdit:
    """Lines ``first_line``-``last_line`` of a file replaced by ``text`` ('' deletes them)."""

    first_line: int
    last_line: int
    text: str


@dataclass(frozen=True)
class Reads:
    """Reads on several lines of one function, each a step, whose values the host uses: one copy of them all,
    at the last of them, does what the reads do with one sync instead of one each (the coalescing of the
    articles nsync grew from). What the report says of them (report.analysis.ReadTogether adds the saving)."""

    file: str
    function: str
    lines: list[int]
    why: str
    edits: list[LineEdit]
    caveat: str


@dataclass(frozen=True)
class ReadGroup(Reads):
    """Reads and their call sites: ``site_ids`` in line order; ``released``, those whose sync the combined read
    removes (all but the last: one sync remains, where the values are read)."""

    site_ids: list[int]
    released: list[int]


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
