"""Find the main loop's steps, and only those.

Where they come from, first found first: the NVTX range the user names (``step_range``) or the kernel
(``step_kernel``); the program's own NVTX step ranges (``ProfilerStep#N``, ``train_step``...); the marks
``nsync profile`` puts around each optimizer step (a step runs from one optimizer step's end to the next);
else the period of the launched-kernel sequence (in eager mode one iteration launches the same kernels in
the same order as the next). Steps much longer than the median (an evaluation loop, a checkpoint between
two steps) are set aside, and a found pattern that covers little of the GPU's work is not taken for steps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from nsync.config import AnalysisConfig
from nsync.errors import UsageError
from nsync.knowledge import NESTED_REPEAT, generate_reads
from nsync.load import Trace
from nsync.marks import DATA_MARK, OPTIMIZER_MARK, STEP_MARK
from nsync.settings import setting

_DIGITS = re.compile(r"\d+")
_STEP_EXACT = re.compile(r"^(profilerstep#?n|(train[_ ]?)?step[_ #]?n?|iter(ation)?[_ #]?n?|batch[_ #]?n?)$", re.I)
# a word, not a part of one: "IterDomain" or "batchnorm" is no step
_STEP_LIKE = re.compile(r"(?<![a-z])(step|iter|iteration|batch)(?![a-z])", re.I)
MIN_STEPS = 3
PERIOD_TOLERANCE = 0.05  # an interval between launches of the step kernel is regular within this share
LONG_STEP = 3.0  # a step this many times the median length is set aside (evaluation, checkpoint...)
MAX_PERIODS = 8  # candidate periods compared by how well the whole kernel sequence repeats
MIN_COVERAGE = 0.3  # share of the GPU's busy time that found steps must launch, else they are no steps
MAX_OPTIMIZERS = 8  # optimizer steps one iteration may hold (a GAN's two, an actor-critic's two or three)
SAME_CYCLE = 0.9  # share of optimizer steps that must be made by the same optimizer as the one a cycle before
_OPTIMIZER_NAME = re.compile("^" + re.escape(OPTIMIZER_MARK).replace(r"\{\}", r"(\d+)") + "$")


@dataclass(frozen=True)
class Steps:
    """The main loop's steps in time order (start, end, name); the first ``warmup`` are left out of per-step
    figures. ``source``: ``nvtx:NAME``, ``marks`` (nsync profile's optimizer-step marks), ``kernel:NAME``
    (the step kernel's launches), or ``none``."""

    table: pd.DataFrame
    source: str
    warmup: int
    set_aside: int = 0  # intervals inside the loop left out: much longer than a step
    optimizer_steps: int = 1  # optimizer steps one step holds (``marks``: a GAN's iteration holds 2)

    @property
    def each(self) -> str:
        """What one step is, where the marks tell it is more than an optimizer step ('' otherwise)."""
        return f"one iteration of {self.optimizer_steps} optimizer steps" if self.optimizer_steps > 1 else ""

    @property
    def analysed(self) -> pd.DataFrame:
        return self.table.iloc[self.warmup :]

    @property
    def count(self) -> int:
        return len(self.analysed)

    def median_index(self) -> int | None:
        """Position (among analysed steps) of the step whose length is closest to the median."""
        analysed = self.analysed
        if analysed.empty:
            return None
        durations = (analysed["end"] - analysed["start"]).to_numpy()
        return int(np.argmin(np.abs(durations - np.median(durations))))


def interval_containing(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Index of the interval [start, end) containing each t (intervals in time order, apart), or -1."""
    if not len(starts):
        return np.full(len(t), -1, np.int64)
    k = np.searchsorted(starts, t, side="right") - 1
    return np.where((k >= 0) & (t < ends[np.clip(k, 0, None)]), k, -1)


def step_containing(table: pd.DataFrame, t: np.ndarray) -> np.ndarray:
    """Index (in ``table``, steps in time order) of the step [start, end) containing each t, or -1."""
    return interval_containing(table["start"].to_numpy(np.int64), table["end"].to_numpy(np.int64), t)


def launched_in_steps(steps: Steps, launch_start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ops launched inside a step (their rows) and the index of that step (among all steps)."""
    k = step_containing(steps.table, launch_start)
    rows = np.flatnonzero(k >= 0)
    return rows, k[rows]


def gpu_step_times(
    steps: Steps, launched: tuple[np.ndarray, np.ndarray], gpu_start: np.ndarray, gpu_end: np.ndarray
) -> np.ndarray:
    """Each step's time on the GPU (all steps): from the end of the previous step's work to the end of its own.

    A step's work is what was launched inside its range (``launched``, from :func:`launched_in_steps`); a
    step that does not follow straight on from the previous one starts at its own first op.
    When the host runs ahead (no syncs), NVTX ranges time the host's enqueueing, not the GPU; successive GPU
    completions time the throughput either way. Shared by the analysis (measured ends) and the what-if
    replay (replayed ends).
    """
    rows, k = launched
    if not len(rows):
        return np.full(len(steps.table), np.nan)
    # in the times' own dtype (int64 measured, float replayed): ufunc.at is fast only without casting
    dtype = np.result_type(gpu_start, gpu_end)
    low, high = (np.iinfo(dtype).min, np.iinfo(dtype).max) if dtype.kind in "iu" else (-np.inf, np.inf)
    last_end, first_start = np.full(len(steps.table), low, dtype), np.full(len(steps.table), high, dtype)
    np.maximum.at(last_end, k, gpu_end[rows])
    np.minimum.at(first_start, k, gpu_start[rows])
    last = np.where(last_end == low, np.nan, last_end)  # a step that launched nothing: NaN
    first = np.where(first_start == high, np.nan, first_start)
    # after a gap longer than a step (a step set aside: an evaluation loop), a step's GPU time starts at its
    # own first op
    starts, ends = steps.table["start"].to_numpy(np.int64), steps.table["end"].to_numpy(np.int64)
    gap = starts[1:] - ends[:-1]
    follows = np.concatenate([[False], gap <= np.median(ends - starts)])
    return last - np.where(follows, np.concatenate([[np.nan], last[:-1]]), first)


def data_waits_ns(steps: Steps, ranges: pd.DataFrame) -> np.ndarray:
    """Each analysed step's time the host spent waiting for a DataLoader's batch (the ``nsync: data loader``
    ranges nsync profile puts around each batch, counted in the step they begin in); zeros where none."""
    table = steps.analysed
    waits = ranges.loc[ranges["name"].astype(str) == DATA_MARK]
    if waits.empty or table.empty:
        return np.zeros(len(table), np.int64)
    k = step_containing(table, waits["start"].to_numpy(np.int64))
    length = (waits["end"] - waits["start"]).to_numpy(np.int64)
    return np.bincount(k[k >= 0], weights=length[k >= 0], minlength=len(table)).astype(np.int64)


DATA_BOUND_SHARE = 0.2  # a loop whose host waits for its DataLoader this share of a step is bound by its data


def bound_by_data(steps: Steps, ranges: pd.DataFrame) -> bool:
    """Whether the host waits for its DataLoader at least DATA_BOUND_SHARE of the mean analysed step."""
    table = steps.analysed
    step_ns = float((table["end"] - table["start"]).mean()) if len(table) else 0.0
    return step_ns > 0 and float(data_waits_ns(steps, ranges).mean()) >= DATA_BOUND_SHARE * step_ns


def normalise_range_name(name: str) -> str:
    """``ProfilerStep#12`` and ``iter3`` -> ``ProfilerStep#N`` and ``iterN``."""
    return _DIGITS.sub("N", name)


def empty_steps_table() -> pd.DataFrame:
    return pd.DataFrame(
        {"start": pd.Series(dtype=np.int64), "end": pd.Series(dtype=np.int64), "name": pd.Series(dtype=object)}
    )


def find_steps(trace: Trace, ops: pd.DataFrame, config: AnalysisConfig) -> Steps:
    table, source = _chosen_steps(trace, ops, config)
    if table is None:
        table, source = _found_steps(trace, ops)
    optimizer_steps = int(table.attrs.get("optimizer_steps", 1))
    table, set_aside = _regular(table)
    if config.warmup_steps is not None:
        if len(table) and config.warmup_steps >= len(table):
            raise UsageError(
                f"cannot skip {config.warmup_steps} warm-up steps ({setting('AnalysisConfig.warmup_steps')}): "
                "the trace has "
                f"{len(table)} steps ({source}), and at least one must be left to analyse"
            )
        warmup = max(config.warmup_steps, 0)
    else:
        warmup = 1 if len(table) >= 4 else 0
    return Steps(
        table=table.reset_index(drop=True),
        source=source,
        warmup=warmup,
        set_aside=set_aside,
        optimizer_steps=optimizer_steps,
    )


def _chosen_steps(trace: Trace, ops: pd.DataFrame, config: AnalysisConfig) -> tuple[pd.DataFrame | None, str]:
    """The steps the user named (an NVTX range, a kernel), taken as they are."""
    if config.step_kernel is not None:
        return _kernel_steps(ops, config.step_kernel), f"kernel:{config.step_kernel}"
    if config.step_range is None:
        return None, "none"
    ranges = trace.nvtx_ranges
    names = ranges["name"].astype(str)
    wanted = config.step_range
    chosen = (names == wanted) | (names.map(normalise_range_name) == normalise_range_name(wanted))
    if not chosen.any():
        available = ", ".join(sorted(set(names.map(normalise_range_name)))[:8]) or "none"
        raise UsageError(f"no NVTX range named {wanted!r} in this trace (ranges: {available})")
    if wanted == STEP_MARK:
        return _between_marks(ranges), "marks"
    return _one_thread(ranges.loc[chosen]), f"nvtx:{wanted}"


def _found_steps(trace: Trace, ops: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The first of: the program's own NVTX step ranges, nsync's marks, the kernel period. A range whose
    name only holds a step-like word, or a kernel period, must launch enough of the GPU's work."""
    ranges = trace.nvtx_ranges
    names = ranges["name"].astype(str)
    normalised = names.map(normalise_range_name)
    counts = normalised.loc[names != STEP_MARK].value_counts()
    counts = counts[counts >= MIN_STEPS]
    candidates: list[tuple[pd.DataFrame, str, bool]] = []  # (steps, source, whether they must cover enough)
    for pattern, loose in ((_STEP_EXACT, False), (_STEP_LIKE, True)):
        matching = [name for name in counts.index if pattern.search(name)]
        if matching:
            best = max(matching, key=lambda n: (counts[n], n))
            candidates.append((_one_thread(ranges.loc[normalised == best]), f"nvtx:{best}", loose))
            break
    if (names == STEP_MARK).sum() > MIN_STEPS:
        candidates.append((_between_marks(ranges), "marks", False))
    for table, source, loose in candidates:
        if len(table) >= MIN_STEPS and (not loose or _coverage(table, ops) >= MIN_COVERAGE):
            return table, source
    found = _kernel_period_steps(ops)
    if found is not None and len(found[0]) >= MIN_STEPS and _coverage(found[0], ops) >= MIN_COVERAGE:
        return found
    return empty_steps_table(), "none"


def _coverage(table: pd.DataFrame, ops: pd.DataFrame) -> float:
    """Share of the GPU's busy time (summed over ops) launched inside the steps."""
    duration = (ops["end"] - ops["start"]).to_numpy(np.int64)
    inside = step_containing(table.sort_values("start"), ops["launch_start"].to_numpy(np.int64)) >= 0
    total = duration.sum()
    return float(duration[inside].sum() / total) if total > 0 else 0.0


def _regular(table: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The steps without those much longer than the median (robust to a few such), and how many those were."""
    if len(table) < MIN_STEPS:
        return table, 0
    length = (table["end"] - table["start"]).to_numpy(np.int64)
    regular = length <= LONG_STEP * np.median(length)
    return table.loc[regular], int((~regular).sum())


def _one_thread(ranges: pd.DataFrame) -> pd.DataFrame:
    """The ranges of the thread that has most of them, without nested repeats, in time order."""
    tid = ranges["global_tid"].value_counts().idxmax()
    own = ranges.loc[ranges["global_tid"] == tid].sort_values("start")
    ends = own["end"].to_numpy()
    previous_end = np.concatenate([[np.iinfo(np.int64).min], np.maximum.accumulate(ends)[:-1]])
    top_level = own["start"].to_numpy() >= previous_end
    return own.loc[top_level, ["start", "end", "name"]].reset_index(drop=True)


def _between_marks(ranges: pd.DataFrame) -> pd.DataFrame:
    """Steps from one iteration's last optimizer step's end to the next (the first step, before any mark, is
    unknown). An iteration is one optimizer step, or the cycle of several (``attrs["optimizer_steps"]``) that the
    ranges naming each step's optimizer repeat (a GAN steps its discriminator's, then its generator's)."""
    names = ranges["name"].astype(str)
    marks = _one_thread(ranges.loc[names == STEP_MARK])
    ends = marks["end"].to_numpy(np.int64)
    cycle, first = _optimizer_cycle(marks, ranges.loc[names.str.fullmatch(_OPTIMIZER_NAME).to_numpy()])
    bounds = ends[first - 1 :: cycle] if first > 0 else ends[cycle - 1 :: cycle]
    table = pd.DataFrame(
        {
            "start": bounds[:-1],
            "end": bounds[1:],
            "name": "step (optimizer step marks)" if cycle == 1 else f"iteration ({cycle} optimizer steps)",
        }
    )
    table.attrs["optimizer_steps"] = cycle
    return table


def _optimizer_cycle(marks: pd.DataFrame, named: pd.DataFrame) -> tuple[int, int]:
    """How many optimizer steps one iteration holds, and the first mark that begins one: the shortest period
    by which the optimizers stepping repeat (on SAME_CYCLE of the marks), beginning where the first optimizer
    to have stepped steps. (1, 0) where the marks do not name their optimizer (captures before nsync 0.30)."""
    if named.empty or len(marks) < 2 * MIN_STEPS:
        return 1, 0
    number = named["name"].astype(str).str.extract(_OPTIMIZER_NAME, expand=False).astype(float)
    # each mark's optimizer: the named range that begins inside it, on its thread
    inside = named.assign(number=number.to_numpy()).sort_values("start")
    k = interval_containing(
        marks["start"].to_numpy(np.int64), marks["end"].to_numpy(np.int64), inside["start"].to_numpy(np.int64)
    )
    which = np.full(len(marks), -1.0)
    which[k[k >= 0]] = inside["number"].to_numpy()[k >= 0]
    for cycle in range(1, min(MAX_OPTIMIZERS, len(marks) // MIN_STEPS) + 1):
        same = which[cycle:] == which[:-cycle]
        if np.mean(same & (which[cycle:] >= 0)) >= SAME_CYCLE:  # (so some marks name their optimizer)
            return cycle, int(np.flatnonzero(which == which[which >= 0].min())[0] % cycle)
    return 1, 0


def _launched_kernels(ops: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Launch times and name codes of the kernels launched from the host, in launch order (all threads: in
    PyTorch the backward pass is launched by autograd's own thread), and the names the codes stand for."""
    kernels = ops.loc[(ops["op"] == "kernel") & (ops["launch_tid"] >= 0), ["name", "launch_start"]]
    launch = kernels["launch_start"].to_numpy(np.int64)
    codes, names = pd.factorize(kernels["name"].to_numpy(dtype=object))
    order = np.argsort(launch, kind="stable")
    return launch[order], codes[order].astype(np.int64), [str(n) for n in names]


def _kernel_steps(ops: pd.DataFrame, name: str) -> pd.DataFrame:
    launch, codes, names = _launched_kernels(ops)
    if name not in names:
        known = ", ".join(sorted(names)[:5]) or "none"
        raise UsageError(f"no kernel named {name!r} is launched in this trace (some that are: {known})")
    bounds = launch[codes == names.index(name)]
    return pd.DataFrame({"start": bounds[:-1], "end": bounds[1:], "name": f"step (kernel: {name})"})


def _kernel_period_steps(ops: pd.DataFrame) -> tuple[pd.DataFrame, str] | None:
    """Steps from the period of the launched-kernel sequence.

    For each kernel, the gaps (in launches) between its successive launches; its period is the commonest
    gap, and the launches it covers are the sum of the gaps equal to it (within PERIOD_TOLERANCE where no
    kernel repeats exactly over enough of the trace: a loop whose launches vary with the data). Of the
    periods of the kernels that cover most, the step's is the one by which the whole sequence repeats best
    (shortest of equals); of its kernels, the one whose regular launches start earliest (the first kernel
    of a step). Its regular intervals are the steps; start-up, evaluation loops and teardown launch other
    sequences and fall outside them.
    """
    launch, codes, names = _launched_kernels(ops)
    n = len(codes)
    if n < 2 * (MIN_STEPS + 1):
        return None
    by_code = np.argsort(codes, kind="stable")  # each kernel's launches, in order
    grouped_code = codes[by_code]
    same = grouped_code[1:] == grouped_code[:-1]
    gap_code, gap, gap_at = grouped_code[1:][same], np.diff(by_code)[same], by_code[:-1][same]
    if not len(gap):
        return None
    pairs = pd.DataFrame({"code": gap_code, "gap": gap}).value_counts(sort=False).reset_index(name="count")
    modal = pairs.sort_values(["code", "count", "gap"], ascending=[True, False, True]).drop_duplicates("code")
    period = np.zeros(len(names), np.int64)
    period[modal["code"].to_numpy()] = modal["gap"].to_numpy()
    own_period = period[gap_code]
    # exact repeats first (eager loops); within a tolerance only if none cover enough (data-dependent loops)
    for tolerance in (0.0, PERIOD_TOLERANCE):
        regular = (own_period >= 2) & (np.abs(gap - own_period) <= tolerance * own_period)
        covered = np.bincount(gap_code[regular], weights=gap[regular], minlength=len(names))
        if covered.max() >= MIN_COVERAGE * n:
            break
    if covered.max() <= 0:
        return None
    first = np.full(len(names), n, np.int64)
    np.minimum.at(first, gap_code[regular], gap_at[regular])
    # The period: of the periods of the kernels that cover most, the one by which the whole sequence repeats
    # best (a layer's kernels repeat every layer but not across the embedding, the loss, the optimizer);
    # the shortest of equals (a kernel of every other step repeats as well, but twice as far).
    candidates = np.flatnonzero(covered >= 0.5 * covered.max())
    periods = np.unique(period[candidates[np.argsort(-covered[candidates])][:MAX_PERIODS]])
    repeat = np.array([np.mean(codes[:-p] == codes[p:]) if p < n else 0.0 for p in periods.tolist()])
    best_period = _finer_period(periods, repeat, covered, period, candidates)
    near_best = candidates[period[candidates] == best_period]
    near_best = near_best[covered[near_best] >= 0.98 * covered[near_best].max()]
    step_code = near_best[np.argmin(first[near_best])]
    mine = regular & (gap_code == step_code)
    starts, ends = launch[gap_at[mine]], launch[gap_at[mine] + gap[mine]]
    name = names[step_code]
    return pd.DataFrame({"start": starts, "end": ends, "name": f"step (kernel: {name})"}), f"kernel:{name}"


def _finer_period(
    periods: np.ndarray, repeat: np.ndarray, covered: np.ndarray, period: np.ndarray, candidates: np.ndarray
) -> int:
    """The period that repeats best (the shortest of equals), unless a loop at least MIN_STEPS times finer
    inside it covers as much of the sequence and repeats NESTED_REPEAT well: a generate() request repeats best
    (its prefill repeats with it), but its decode steps cover more and are the loop."""
    best = int(periods[np.flatnonzero(repeat >= repeat.max() - 0.002)[0]])
    reach = {int(p): float(covered[candidates[period[candidates] == p]].max()) for p in periods.tolist()}
    finer = [
        int(p)
        for p, r in zip(periods.tolist(), repeat.tolist())
        if p * MIN_STEPS <= best and r >= NESTED_REPEAT and reach[int(p)] >= reach[best]
    ]
    return max(finer, key=lambda p: (reach[p], -p)) if finer else best


def what_a_step_is(source: str, sync_files: pd.Series, syncs_per_step: pd.Series) -> str:
    """What one step is where the trace tells ('' where it does not: a loop's iteration): steps found by their
    kernel sequence (``source``) whose call sites (their ``sync_files`` and ``syncs_per_step``) hold generate()'s
    finished-sequences read once a step are decode steps, one new token each."""
    if not source.startswith("kernel:") or sync_files.empty:
        return ""
    per_step = syncs_per_step.loc[generate_reads(sync_files)]
    return "one new token of generate()" if ((per_step > 0.9) & (per_step < 1.1)).any() else ""
