"""A test that keeps a fix fixed: fail when the code under test makes the host wait for the GPU.

    from nsync.testing import sync_free

    def test_the_training_step_does_not_sync():
        step(batch)                       # once, outside: lazy set-up may sync
        with sync_free():
            step(batch)                   # fails with the line, its pattern and the fix

    @sync_free(allow=["train.py:88"])     # a decorator too; allow-list the syncs you accept
    def test_eval(): ...

    @pytest.mark.sync_free(allow=[...])   # or a pytest marker (nsync's pytest plugin)

It runs the code under PyTorch's sync debug mode (``torch.cuda.set_sync_debug_mode("warn")``), records every
sync PyTorch reports with the Python line that made it, and fails at the end of the block with all of them.
What the debug mode cannot see, sync_free cannot either: syncs outside PyTorch's CUDA calls (NCCL
collectives, extensions and libraries calling CUDA themselves, cudaDeviceSynchronize in some versions) and
those inside sparse ops. Profile those with ``nsync profile``. Without a CUDA device there is nothing to
check: sync_free then skips the test (unittest.SkipTest, which pytest and unittest both count as skipped).
"""

from __future__ import annotations

import collections
import contextlib
import linecache
import os
import textwrap
import traceback
import unittest
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from nsync.stages.advice import PATTERNS, Advice, advise_code, classify, read_code

__all__ = ["PATTERNS", "Sync", "SyncFound", "classify", "sync_free"]

SYNC_WARNING = "called a synchronizing CUDA operation"  # PyTorch's words, in warn mode
_WARNINGS = os.path.abspath(warnings.__file__)


@dataclass(frozen=True)
class Sync:
    """One sync PyTorch reported, at the innermost line of the caller's code that made it."""

    file: str
    line: int
    function: str
    code: str  # the source line ('' when the file cannot be read)
    pattern: str
    dependency: str  # false: the host does not need the value (delete, defer, batch); true: restructure
    fix: str
    rewrite: str = ""  # the line rewritten, and its one-time set-up, where nsync can write them from the code

    @property
    def where(self) -> str:
        return f"{os.path.basename(self.file)}:{self.line}"

    def __str__(self) -> str:
        code = f": {self.code}" if self.code else ""
        said = f"{self.where} in {self.function}(){code}\n    {self.pattern} ({self.dependency} dependency): {self.fix}"
        return said + "".join(f"\n      {line}" for line in self.rewrite.splitlines())


class SyncFound(AssertionError):
    """The code under sync_free synced: each sync with its line, its pattern and the fix."""

    def __init__(self, syncs: list[Sync]) -> None:
        self.syncs = syncs
        counts = collections.Counter(syncs)  # a line that syncs in a loop is said once, with its count
        lines = [f"{len(syncs)} CUDA sync(s) in code that must not sync:"]
        lines += [f"  {sync}" if n == 1 else f"  {n} x {sync}" for sync, n in counts.items()]
        lines.append("  (allow one with sync_free(allow=['file.py:LINE']) where the sync is accepted)")
        super().__init__("\n".join(lines))


class sync_free(contextlib.ContextDecorator):
    """Fail (SyncFound) when the block or decorated function syncs, except at the ``allow``-ed places:
    ``"file.py:LINE"`` (a path's end and a line), ``"file.py"`` (any line of it) or ``"function()"``."""

    def __init__(self, allow: Iterable[str] = ()) -> None:
        self.allow = tuple(allow)
        self.syncs: list[Sync] = []

    def __enter__(self) -> sync_free:
        import torch

        if not torch.cuda.is_available():
            raise unittest.SkipTest("sync_free needs a CUDA device: PyTorch's sync debug mode sees nothing without one")
        self._torch = torch
        self._skip = (os.path.dirname(os.path.abspath(torch.__file__)), {os.path.abspath(__file__), _WARNINGS})
        self.syncs = []
        self._advised: dict[tuple[str, int], tuple[str, str, str, str, str]] = {}
        self._warnings = warnings.catch_warnings()
        self._warnings.__enter__()
        warnings.simplefilter("always")  # every sync, not the first of each line
        self._shown = warnings.showwarning
        warnings.showwarning = self._record
        self._mode = torch.cuda.get_sync_debug_mode()
        torch.cuda.set_sync_debug_mode("warn")
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._torch.cuda.set_sync_debug_mode(self._mode)
        self._warnings.__exit__(kind, error, trace)
        found = [sync for sync in self.syncs if not self._allowed(sync)]
        if found and kind is None:
            raise SyncFound(found)

    def _record(self, message: Any, category: Any, filename: str, lineno: int, *rest: Any, **named: Any) -> None:
        if SYNC_WARNING not in str(message):
            self._shown(message, category, filename, lineno, *rest, **named)
            return
        frames = traceback.extract_stack()[:-1]  # the stack as PyTorch warned: the syncing call is in it
        at = next((k for k in range(len(frames) - 1, -1, -1) if self._callers(frames[k].filename)), None)
        if at is None:
            file, line, function = filename, lineno, "?"
        else:
            file, line, function = frames[at].filename, frames[at].lineno or 0, frames[at].name
            while function.startswith("<") and at > 0 and frames[at - 1].filename == file:
                at -= 1  # a comprehension or lambda: named by the function it is written in
                function = frames[at].name
        key = (file, line)
        if key not in self._advised:
            self._advised[key] = _advised(file, line)
        self.syncs.append(Sync(file, line, function, *self._advised[key]))

    def _callers(self, filename: str) -> bool:
        """Whether a frame is the caller's code: not PyTorch's, nsync's testing, the warnings machinery."""
        path = os.path.abspath(filename)
        return not (path.startswith(self._skip[0] + os.sep) or path in self._skip[1] or filename.startswith("<"))

    def _allowed(self, sync: Sync) -> bool:
        path = sync.file.replace(os.sep, "/")
        for entry in self.allow:
            if entry.endswith("()") and entry[:-2] == sync.function:
                return True
            name, _, line = entry.rpartition(":")
            if line.isdigit() and _names(path, name) and int(line) == sync.line:
                return True
            if not line.isdigit() and _names(path, entry):
                return True
        return False


def _advised(file: str, line: int) -> tuple[str, str, str, str, str]:
    """(code, pattern, dependency, fix, rewrite) of a syncing line: read and parsed where the file is readable
    (the fix said of this line, and the rewrite in the code's own names), else from the line's text alone."""
    code = linecache.getline(file, line).strip()
    parsed = read_code(file, line)
    if parsed is None:
        return (code, *classify(code), "")
    advice: Advice = advise_code(parsed, file)
    shown = []
    if advice.rewrite is not None:
        shown.append(f"fix: {advice.change}{':' if advice.rewrite else ''}")
        shown += ["  " + text for text in textwrap.dedent(advice.rewrite).splitlines()]
    if advice.setup:
        shown.append(f"once, before line {advice.setup_line}:")
        shown += ["  " + text for text in textwrap.dedent(advice.setup).splitlines()]
    if shown and advice.caveat:
        shown.append(f"note: {advice.caveat}")
    fix = advice.why if shown else f"{advice.why} {advice.caveat}"
    return code, advice.pattern, advice.dependency, fix, "\n".join(shown)


def _names(path: str, end: str) -> bool:
    """Whether ``end`` ('train.py', 'pkg/train.py') names the file at ``path``, a whole name at a time."""
    end = end.replace(os.sep, "/")
    return path == end or path.endswith("/" + end)
