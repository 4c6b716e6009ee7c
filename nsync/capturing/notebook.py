"""``nsync.capture()``: torch.profiler around a block of a notebook or a script, analysed when the block ends.

    >>> with nsync.capture(steps=40) as run:
    ...     train(model, loader)
    >>> run                      # in a notebook: the report inline (_repr_html_); elsewhere its summary

In the program's own process there is no calibration run: the warm-up steps, timed unprofiled with CUDA events
in the same process before the window opens, calibrate the prediction instead. The window is of optimizer
steps, as ``nsync profile``'s (``warmup_steps``, then ``steps``), marked as nsys's step marks; with
``steps=None`` the whole block is captured. The profiler stops when the window closes and the block runs on.
"""

from __future__ import annotations

import html
import itertools
import sys
from contextlib import ContextDecorator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from nsync.analysis import analyze
from nsync.capturing.run import TORCH_TRACE_SUFFIX, kineto_hooks
from nsync.config import AnalysisConfig
from nsync.errors import UsageError
from nsync.load.calibration import Calibration
from nsync.marks import OPTIMIZER_MARK, STEP_MARK
from nsync.render.notebook import notebook_html
from nsync.report import Analysis

new_profiler, enter_range, exit_range = kineto_hooks()  # torch.profiler as nsync profile --backend torch runs it


@dataclass(repr=False)
class CapturedRun:
    """What a :class:`capture` block gave: the trace written, its analysis (None until the block ended, or
    where the window never opened: ``note`` says why), the optimizer steps seen."""

    trace: Path | None = None
    analysis: Analysis | None = None
    optimizer_steps: int = 0
    note: str = ""

    def _repr_html_(self) -> str:
        """The report inline, in a frame of its own (its styles and scripts stay inside)."""
        if self.analysis is None:
            return f"<p>nsync: {html.escape(self.note or 'the block has not ended yet')}</p>"
        return notebook_html(self.analysis)

    def __repr__(self) -> str:
        """One line: the analysis's verdict, or why there is none (``str()`` is the whole summary)."""
        said = repr(self.analysis) if self.analysis is not None else self.note or "the block has not ended yet"
        return f"<nsync.CapturedRun: {said}>"

    def __str__(self) -> str:
        if self.analysis is None:
            return f"nsync: {self.note or 'the block has not ended yet'}"
        from nsync.render.terminal import render_terminal

        return render_terminal(self.analysis)


@dataclass
class _Window:
    """The window's state, moved by the optimizer-step hooks."""

    warmup: int
    steps: int | None
    done: int = 0
    profiler: Any = None
    finished: bool = False
    marks: list[Any] = field(default_factory=list)
    events: list[Any] = field(default_factory=list)  # CUDA events at the warm-up steps' ends
    optimizers: dict[int, int] = field(default_factory=dict)  # id(optimizer) -> its number, as first stepped


class capture(ContextDecorator):
    """Capture ``steps`` optimizer steps after ``warmup_steps`` of the block with torch.profiler (``steps=None``:
    the whole block), write the trace to ``out_dir/NAME.pt.trace.json.gz`` and analyse it. As a decorator,
    each call of the function is a block; ``self.run`` is the last one's :class:`CapturedRun`."""

    def __init__(
        self,
        steps: int | None = 40,
        warmup_steps: int = 10,
        out_dir: str | Path = "nsync-out",
        name: str = "capture",
        config: AnalysisConfig | None = None,
    ) -> None:
        if (steps is not None and steps < 1) or warmup_steps < 1:
            raise UsageError("nsync.capture: steps and warmup_steps must be at least 1 (steps=None: the whole block)")
        self.steps, self.warmup, self.config = steps, warmup_steps, config
        self.out_dir, self.name = Path(out_dir), name
        self.run = CapturedRun()
        self._window = _Window(warmup_steps, steps)
        self._hooks: list[Any] = []

    def __enter__(self) -> CapturedRun:
        torch = _torch()
        self.run = CapturedRun()
        self._window = _Window(self.warmup, self.steps)
        if self.steps is None:
            self._start()
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        self._hooks = [
            register_optimizer_step_pre_hook(lambda optimizer, *_: self._before_step(optimizer)),
            register_optimizer_step_post_hook(lambda *_: self._after_step(torch)),
        ]
        return self.run

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        for hook in self._hooks:
            hook.remove()
        self._hooks = []
        self._stop()
        self.run.optimizer_steps = self._window.done
        if self.run.trace is None:
            self.run.note = (
                f"the block made {self._window.done} optimizer steps and the window opens after {self.warmup}: "
                "nothing was captured (fewer warmup_steps, or steps=None for the whole block)"
            )
            return
        self.run.analysis = analyze(self.run.trace, self.config, calibration=self._calibration())

    def _before_step(self, optimizer: object) -> None:
        window = self._window
        opens = window.steps is not None and not window.finished and window.done == window.warmup
        if opens and window.profiler is None:
            self._start()
        if window.profiler is not None:  # the step's range, and inside it which optimizer steps (as captures do)
            number = window.optimizers.setdefault(id(optimizer), len(window.optimizers) + 1)
            window.marks += [enter_range(STEP_MARK), enter_range(OPTIMIZER_MARK.format(number))]

    def _after_step(self, torch: Any) -> None:
        window = self._window
        while window.marks:
            exit_range(window.marks.pop())
        window.done += 1
        if window.profiler is None and not window.finished and torch.cuda.is_initialized():
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            window.events.append(event)
        if window.steps is not None and window.done >= window.warmup + window.steps:
            self._stop()

    def _start(self) -> None:
        _torch()
        self._window.profiler = new_profiler()
        self._window.profiler.start()

    def _stop(self) -> None:
        window = self._window
        if window.profiler is None:
            return
        torch = _torch()
        if torch.cuda.is_initialized():
            torch.cuda.synchronize()
        while window.marks:
            exit_range(window.marks.pop())
        profiler, window.profiler, window.finished = window.profiler, None, True
        profiler.stop()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        trace = self.out_dir / f"{self.name}{TORCH_TRACE_SUFFIX}"
        profiler.export_chrome_trace(str(trace))
        self.run.trace = trace

    def _calibration(self) -> Calibration | None:
        """The warm-up steps' unprofiled GPU times (the first left out: it warms up), as marks' intervals."""
        events = self._window.events
        if len(events) < 3:
            return None
        _torch().cuda.synchronize()
        intervals = [round(a.elapsed_time(b) * 1e6) for a, b in itertools.pairwise(events)]
        return Calibration(None, {"marks": np.array(intervals[1:], np.int64)}, command=("nsync.capture",))


def _torch() -> Any:
    try:
        import torch
    except ImportError as err:
        raise UsageError(f"nsync.capture needs torch in this Python ({sys.executable}): {err}") from err
    return torch
