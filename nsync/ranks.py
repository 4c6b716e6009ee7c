"""Several ranks of one data-parallel run: each rank's export analysed on its own (in parallel, on Dask), then
the ranks lined up on the collectives they share, to name the rank that reaches a collective last and the
sync that made it late.

A collective (an NCCL all-reduce, reduce-scatter, ...) ends on every rank at once, when the last rank has
joined it: the ranks' clocks are aligned on collective ends (each export counts from its own origin), and a
rank arrives at a collective when its collective kernel starts on the GPU. The last rank holds every other
one for as long as it is late. Its syncs before that collective idled its GPU: the GPU idle they exposed, up
to the lateness, is the delay they add to every rank (an estimate: one rank's idle, not a replay of all).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from nsync.analysis import analyze
from nsync.config import AnalysisConfig
from nsync.errors import UsageError
from nsync.load import Trace, load_trace, split_processes
from nsync.load.nsys.budget import SAFETY, available_memory_bytes
from nsync.notices import Notice
from nsync.report import Analysis
from nsync.report.analysis import ns_to_ms
from nsync.report.ranks import SCHEMA, RankFacts, Ranks, Straggler
from nsync.report.sites import where
from nsync.stages.detect import is_relevant_api
from nsync.version import DISTRIBUTION

COLLECTIVE_KERNEL = re.compile(r"^nccl", re.IGNORECASE)  # ncclDevKernel_AllReduce_Sum_f32_RING_LL, ncclKernel_...
EXPORT_SUFFIXES = (".sqlite", ".sqlite.xz", ".json", ".json.gz")  # nsys exports, torch.profiler traces
INCONCLUSIVE = "inconclusive"  # the verdict's first word where no collective lined the ranks up


@dataclass(frozen=True)
class RankResult:
    """What a worker sends back about one rank: its report, its collectives and its syncs (small tables)."""

    rank: int
    path: str
    report: Analysis  # without its timeline and tables
    collectives: pd.DataFrame  # start, end (ns, the rank's own clock), name: every collective kernel, in order
    syncs: pd.DataFrame  # start, exposed_idle_ns, where, issued_at, function: the syncs of the analysed steps


def _load(path: str, config: AnalysisConfig) -> Trace:
    return load_trace(
        path, keep_api=is_relevant_api, window_s=config.window_s, max_memory_bytes=config.max_memory_bytes
    )


def rank_result(rank: int, path: str, config: AnalysisConfig) -> RankResult:
    """One rank's analysis, from its own export (on a worker)."""
    return rank_result_of(rank, path, _load(path, config), config)


def rank_result_of(rank: int, label: str, trace: Trace, config: AnalysisConfig) -> RankResult:
    """One rank's analysis, from its trace (``label``: where it came from)."""
    ops = trace.gpu_ops
    names = ops["name"].cat  # each distinct kernel name tested once
    collective_names = [code for code, name in enumerate(names.categories) if COLLECTIVE_KERNEL.match(str(name))]
    is_collective = np.isin(names.codes.to_numpy(), collective_names)
    collectives = ops.loc[is_collective, ["start", "end", "name"]].astype({"name": str})
    analysis = analyze(trace, config)
    syncs = analysis.tables.syncs if analysis.tables is not None else pd.DataFrame()
    return RankResult(
        rank=rank,
        path=label,
        report=replace(analysis, timeline=None, tables=None),  # what only an HTML report draws: 0.3 MB a rank
        collectives=collectives.sort_values("start", kind="stable").reset_index(drop=True),
        syncs=_named_syncs(syncs),
    )


def _named_syncs(syncs: pd.DataFrame) -> pd.DataFrame:
    """start, exposed_idle_ns, where, issued_at and function of each sync (named once per call site)."""
    if syncs.empty:
        numbers = ("start", "exposed_idle_ns")
        columns = (*numbers, "where", "issued_at", "function")
        return pd.DataFrame({c: pd.Series(dtype=np.int64 if c in numbers else object) for c in columns})
    sites = syncs.drop_duplicates("site_id").set_index("site_id")
    frames = list(zip(sites["file"], sites["line"], sites["sync_file"], sites["sync_line"]))
    named = pd.DataFrame(
        {
            "where": [where(f, n) for f, n, _sf, _sn in frames],
            "issued_at": ["" if (sf, sn) == (f, n) else where(sf, sn) for f, n, sf, sn in frames],
            "function": sites["function"].astype(str).to_numpy(),
        },
        index=sites.index,
    )
    timed = syncs[["start", "exposed_idle_ns"]].reset_index(drop=True)
    return pd.concat([timed, named.loc[syncs["site_id"].to_numpy()].reset_index(drop=True)], axis=1)


@dataclass(frozen=True)
class Collectives:
    """The collectives every rank took part in, lined up (rank x collective arrays, ns on rank 0's clock)."""

    offset_ns: np.ndarray  # per rank: add to its times to put them on rank 0's clock
    arrival_ns: np.ndarray  # ranks x collectives: when each rank's collective kernel started
    end_ns: np.ndarray  # collectives: when they ended (on rank 0)
    last_rank: np.ndarray  # collectives: the index (into the ranks) of the rank that arrived last
    lateness_ns: np.ndarray  # collectives: how much later than the next-latest rank it arrived


def line_up(results: Sequence[RankResult]) -> tuple[Collectives, list[Notice]]:
    """Align the ranks on their collectives' ends; warnings where their collectives do not pair."""
    counts = [len(r.collectives) for r in results]
    shared = min(counts) if counts else 0
    warnings = []
    if len(set(counts)) > 1:
        warnings.append(
            Notice(
                "collectives-unpaired",
                "the ranks ran different numbers of collectives (" + ", ".join(map(str, counts)) + f"): the first "
                f"{shared} of each are paired, in order (were the ranks captured over the same span?)",
            )
        )
    shape = (len(results), shared)
    starts = np.array([r.collectives["start"].to_numpy(np.int64)[:shared] for r in results]).reshape(shape)
    ends = np.array([r.collectives["end"].to_numpy(np.int64)[:shared] for r in results]).reshape(shape)
    offset = np.median(ends[:1] - ends, axis=1).astype(np.int64) if shared else np.zeros(len(results), np.int64)
    arrival = starts + offset[:, None]
    ordered = np.sort(arrival, axis=0)
    lateness = ordered[-1] - ordered[-2] if len(results) >= 2 else np.zeros(shared, np.int64)
    return Collectives(offset, arrival, ends[0], np.argmax(arrival, axis=0), lateness), warnings


def delays(results: Sequence[RankResult], lined: Collectives) -> pd.DataFrame:
    """Per sync of a late rank: the delay it added to the collective it preceded. A collective's lateness is
    shared out among the late rank's syncs since its previous collective, costliest in exposed idle first,
    each up to its exposed idle. Columns: rank, collective, where, issued_at, function, delay_ns."""
    parts = []
    for index, result in enumerate(results):
        syncs = result.syncs.loc[result.syncs["exposed_idle_ns"] > 0]
        arrival = lined.arrival_ns[index]
        if syncs.empty or not len(arrival):
            continue
        start = syncs["start"].to_numpy(np.int64) + lined.offset_ns[index]
        collective = np.searchsorted(arrival, start, side="left")  # the first collective it arrives at after
        known = collective < len(arrival)
        mine = np.zeros(len(syncs), bool)
        mine[known] = lined.last_rank[collective[known]] == index
        if mine.any():
            parts.append(syncs.loc[mine].assign(rank=result.rank, collective=collective[mine]))
    columns = ["rank", "collective", "where", "issued_at", "function", "delay_ns"]
    if not parts:
        numbers = ("rank", "collective", "delay_ns")
        return pd.DataFrame({c: pd.Series(dtype=np.int64 if c in numbers else object) for c in columns})
    late = pd.concat(parts, ignore_index=True).sort_values(["collective", "exposed_idle_ns"], ascending=[True, False])
    exposed = late["exposed_idle_ns"].to_numpy(np.int64)
    before = late.groupby("collective", sort=False)["exposed_idle_ns"].cumsum().to_numpy(np.int64) - exposed
    lateness = lined.lateness_ns[late["collective"].to_numpy()]
    late["delay_ns"] = np.clip(lateness - before, 0, exposed)
    return late[columns].reset_index(drop=True)


def ranks_report(results: Sequence[RankResult], config: AnalysisConfig) -> Ranks:
    lined, warnings = line_up(results)
    first = results[0].report
    steps = max(first.steps.count, 1)
    window = first.window
    in_steps = (lined.end_ns >= window.start_ns) & (lined.end_ns < window.end_ns)  # rank 0's analysed steps
    if not lined.end_ns.size:
        warnings.append(
            Notice("no-collectives", "no collective kernels (NCCL) in these traces: the ranks cannot be lined up")
        )
    per_sync = delays(results, lined)
    per_sync = per_sync.loc[in_steps[per_sync["collective"].to_numpy()]]
    keys = ["rank", "where", "issued_at", "function"]
    table = per_sync.groupby(keys, sort=False).agg(collectives=("collective", "nunique"), delay_ns=("delay_ns", "sum"))
    table = table.loc[table["delay_ns"] > 0].sort_values("delay_ns", ascending=False).reset_index()
    stragglers = [
        Straggler(
            rank=int(row["rank"]),
            where=str(row["where"]),
            issued_at=str(row["issued_at"]),
            function=str(row["function"]),
            collectives_delayed=int(row["collectives"]),
            delay_ms_per_step=ns_to_ms(row["delay_ns"] / steps) or 0.0,
        )
        for row in table.to_dict("records")
    ]
    held_ms = ns_to_ms(lined.lateness_ns[in_steps].sum() / steps) or 0.0
    ranks = []
    for index, result in enumerate(results):
        late = in_steps & (lined.last_rank == index)
        report = result.report
        ranks.append(
            RankFacts(
                rank=result.rank,
                path=result.path,
                steps=report.steps.count,
                median_step_ms=report.steps.median_ms,
                gpu_idle_ms_per_step=report.gpu_idle_ms_per_step,
                collectives=len(result.collectives),
                last_at=int(late.sum()),
                lateness_ms_per_step=ns_to_ms(lined.lateness_ns[late].sum() / steps) or 0.0,
            )
        )
    step_ms = first.steps.median_ms
    verdict, worth = _verdict(stragglers, held_ms, step_ms, config, len(results), int(lined.end_ns.size))
    return Ranks(
        schema=SCHEMA,
        ranks=ranks,
        collectives=int(lined.end_ns.size),
        clock_offsets_ms=[ns_to_ms(o) or 0.0 for o in lined.offset_ns],
        held_ms_per_step=held_ms,
        stragglers=stragglers,
        verdict=verdict,
        worth_fixing=worth,
        warnings=warnings,
        reports=[r.report for r in results],
    )


def _verdict(
    stragglers: list[Straggler],
    held_ms: float,
    step_ms: float | None,
    config: AnalysisConfig,
    ranks: int,
    lined_up: int,
) -> tuple[str, bool]:
    if not lined_up:  # nothing tells which rank holds the others: no figure of lateness means anything
        return (
            f"{INCONCLUSIVE}: no collective lined up across the {ranks} ranks, so none can be said to hold the others "
            "(are these the ranks of one data-parallel run, captured with NCCL's kernels?)"
        ), False
    if step_ms is None or step_ms <= 0:
        return "no steps on rank 0: no verdict", False
    threshold = config.worth_fixing_share * step_ms
    if stragglers and stragglers[0].delay_ms_per_step >= threshold:
        top = stragglers[0]
        site = top.where + (f" (issued at {top.issued_at})" if top.issued_at else "")
        return (
            f"rank {top.rank}'s sync at {site} holds every rank's collectives for "
            f"{top.delay_ms_per_step:.2f} ms per step ({100 * top.delay_ms_per_step / step_ms:.1f} % of the step)"
        ), True
    return (
        f"the last rank holds the collectives {held_ms:.2f} ms per step ({100 * held_ms / step_ms:.1f} % of the "
        "step), and no rank's sync costs the others enough to fix"
    ), False


def rank_paths(paths: Sequence[Path]) -> list[tuple[int, Path]]:
    """The exports of ``paths`` (files, or folders of them), with each one's rank: the number in its name
    (``rank3.sqlite``), else its place in natural order."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += [p for p in sorted(path.iterdir()) if p.name.endswith(EXPORT_SUFFIXES)]
        elif path.is_file():
            files.append(path)
        else:
            raise UsageError(f"{path}: no such file or folder")
    if not files:
        raise UsageError(
            "no rank exports (.sqlite, .sqlite.xz, or torch.profiler .json, .json.gz) found: nsync ranks needs "
            "one export per rank, or one export "
            "holding every rank"
        )

    def key(path: Path) -> list[object]:
        return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name)]

    files.sort(key=key)
    numbers = [re.search(r"rank[_-]?(\d+)", p.name) for p in files]
    if all(numbers) and len({int(m.group(1)) for m in numbers if m}) == len(files):
        return [(int(m.group(1)), p) for m, p in zip(numbers, files) if m]
    return list(enumerate(files))


def _ranks_of_one_export(path: Path, config: AnalysisConfig, say: Callable[[str], None]) -> list[RankResult]:
    """The ranks of an export that holds them all, one per process with GPU work, in process id order; they
    are analysed here, one after the other (the export is read once)."""
    say(f"loading {path.name}")
    processes = split_processes(_load(str(path), config))
    if len(processes) < 2:
        raise UsageError(
            f"{path}: {len(processes)} process with GPU work: nsync ranks needs two or more ranks (one export "
            "holding them all, or one export each)"
        )
    results = []
    for rank, (pid, trace) in enumerate(processes.items()):
        say(f"analysing rank {rank} of {len(processes)} (process {pid})")
        results.append(rank_result_of(rank, f"{path} (process {pid})", trace, config))
    return results


def analyze_ranks(
    paths: Sequence[Path],
    config: AnalysisConfig | None = None,
    scheduler: str | None = None,
    workers: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> Ranks:
    """Analyse every rank on Dask (a local cluster of ``workers`` processes, or the one at ``scheduler``),
    each within its share of the memory, then line them up on their collectives.

    ``paths``: the ranks' SQLite exports or folders of them (one per rank, ranked by the number in the name),
    or one export holding every rank's process. Returns the :class:`nsync.Ranks`: the rank that reaches the
    collectives last, and the syncs that make it late by the delay they add to every rank. Raises UsageError
    (no exports, Dask not installed), TraceError (an export that cannot be read).

        >>> ranks = nsync.analyze_ranks([Path("run/")], workers=4)
        >>> ranks.verdict, ranks.stragglers[:3]
    """
    config = config or AnalysisConfig()
    say = progress or (lambda _m: None)
    ranked = rank_paths(paths)
    if len(ranked) == 1:  # one export holding every rank: each of its processes is one
        return ranks_report(_ranks_of_one_export(ranked[0][1], config, say), config)
    try:
        from distributed import Client, LocalCluster, as_completed
    except ModuleNotFoundError:
        raise UsageError(f"analysing ranks runs on Dask: pip install '{DISTRIBUTION}[dask]'") from None
    cluster = None
    if scheduler is None:
        count = max(1, min(workers or os.cpu_count() or 1, len(ranked)))
        budget = config.max_memory_bytes or int((available_memory_bytes() or 4 << 30) * SAFETY / count)
        config = replace(config, max_memory_bytes=budget)
        say(f"starting {count} Dask worker{'s' if count > 1 else ''} ({budget / 2**30:.1f} GiB each)")
        cluster = LocalCluster(
            n_workers=count,
            threads_per_worker=1,
            processes=True,
            memory_limit=budget,
            dashboard_address=None,
            silence_logs=logging.CRITICAL,  # a rank that fails is reported once, by the command
        )
    try:
        with Client(cluster if cluster is not None else scheduler) as client:
            futures = [client.submit(rank_result, rank, str(path), config, pure=False) for rank, path in ranked]
            for done, future in enumerate(as_completed(futures), 1):
                if future.status == "error":
                    future.result()  # raises the worker's error (a one-line NsyncError for a bad export)
                say(f"analysed {done} of {len(futures)} ranks")
            results = client.gather(futures)
    finally:
        if cluster is not None:
            cluster.close()
    return ranks_report(results, config)
