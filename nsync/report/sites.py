"""The call sites an analysis names: each site's own figures (:class:`CallSite`), the syncs outside the main loop
(:class:`OnceSite`), and the fixes that remove several sites at once (:class:`FixedTogether`, :class:`ReadTogether`).
Times are in the unit their name says."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nsync.report.fixes import Advice, Reads


def where(file: str, line: int | None, function: str = "") -> str:
    """``file.py:12``: the file's name and the line; a native frame, which has no line, by its library and its
    function (``libtorch_cuda.so (at::native::copy_kernel_cuda)``: two of one library are told apart); a frame
    of no known file, ``<unknown>:0``."""
    name = str(file).rsplit("/", 1)[-1]
    if not line and function and function != name and not name.startswith("<"):  # (<unknown>:0 stays so)
        return f"{name} ({native_name(function)})"
    return f"{name}:{line}"


def native_name(function: str) -> str:
    """A C++ function without its parameters: ``at::native::copy_kernel_cuda(at::TensorIterator&, bool)`` is
    ``at::native::copy_kernel_cuda``."""
    return function.split("(", 1)[0].strip() or function


@dataclass(frozen=True)
class SyncFrame:
    """Where the sync is issued: the innermost frame outside PyTorch (a library's line, or the call site)."""

    file: str
    line: int
    function: str


@dataclass(frozen=True)
class StackFrame:
    function: str
    file: str
    line: int


class Site:
    """A call site's two frames: the user's line (file, line, function), and where the sync is issued."""

    file: str
    line: int
    function: str
    sync_frame: SyncFrame

    @property
    def where(self) -> str:
        return where(self.file, self.line, self.function)

    @property
    def issued_at(self) -> str:
        """Where a library issues the sync (``trainer.py:1847``); empty when that is the call site itself."""
        frame = self.sync_frame
        return "" if (frame.file, frame.line) == (self.file, self.line) else where(frame.file, frame.line)


@dataclass(frozen=True)
class CallSite(Site):
    file: str
    line: int
    function: str
    sync_frame: SyncFrame
    count: int
    syncs_per_step: float | None
    executions_per_step: float | None
    exposed_idle_ms: float | None
    exposed_idle_ms_per_step: float | None
    host_wait_ms: float | None
    host_wait_ms_per_step: float | None
    lead_before_ms_mean: float | None
    share_of_gpu_idle: float | None
    apis: list[str]
    kinds: list[str]
    copy_directions: list[str]
    stack: list[StackFrame]
    predicted_saving_ms_per_step: float | None
    callsite_source: str
    short_hint: str
    hint: str
    advice: Advice | None = None  # the fix, from the code (None: the hint, from the sync's kind, is all there is)
    predicted_saving_ms_per_step_low: float | None = None  # the saving's 80 % likely range
    predicted_saving_ms_per_step_high: float | None = None
    # a read in a loop of reads (the replay found it): which loop (a loop's sites share it), and what doing the
    # loop's work for all items at once saves
    loop_id: int | None = None
    loop_saving_ms_per_step: float | None = None
    loop_saving_ms_per_step_low: float | None = None
    loop_saving_ms_per_step_high: float | None = None

    @property
    def saving_range_ms(self) -> tuple[float | None, float | None]:
        return self.predicted_saving_ms_per_step_low, self.predicted_saving_ms_per_step_high

    @property
    def loop_saving_range_ms(self) -> tuple[float | None, float | None]:
        return self.loop_saving_ms_per_step_low, self.loop_saving_ms_per_step_high


@dataclass(frozen=True)
class FixedTogether:
    """Syncs at several call sites that one fix removes (nsync.stages.advice.scopes): a library's setting
    (``fix`` is the setting) or the reads of one statement (``fix`` names its lines), priced together."""

    kind: str  # setting | statement
    sites: list[str]  # "file.py:12", by file and line
    fix: str
    predicted_saving_ms_per_step: float | None
    predicted_saving_ms_per_step_low: float | None = None
    predicted_saving_ms_per_step_high: float | None = None

    @property
    def saving_range_ms(self) -> tuple[float | None, float | None]:
        return self.predicted_saving_ms_per_step_low, self.predicted_saving_ms_per_step_high

    @property
    def where(self) -> str:
        """The sites, each file named once: "train.py:33,34,35"."""
        lines: dict[str, list[str]] = {}
        for site in self.sites:
            file, _, line = site.rpartition(":")
            lines.setdefault(file, []).append(line)
        return ", ".join(f"{file}:{','.join(numbers)}" for file, numbers in lines.items())


@dataclass(frozen=True)
class ReadTogether(Reads):
    """Value reads on several lines of one step that one copy would do: the lines, the rewrite as line edits,
    and what fixing them together is predicted to save per step."""

    predicted_saving_ms_per_step: float | None
    predicted_saving_ms_per_step_low: float | None = None
    predicted_saving_ms_per_step_high: float | None = None

    @property
    def saving_range_ms(self) -> tuple[float | None, float | None]:
        return self.predicted_saving_ms_per_step_low, self.predicted_saving_ms_per_step_high

    @property
    def where(self) -> str:
        return f"{Path(self.file).name}:{','.join(map(str, self.lines))}"


@dataclass(frozen=True)
class OnceSite(Site):
    """A call site of syncs outside the main loop (start-up, between steps, teardown)."""

    phase: str
    file: str
    line: int
    function: str
    sync_frame: SyncFrame
    count: int
    host_wait_ms: float | None
