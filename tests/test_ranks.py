"""Ranks lined up on their collectives: synthetic two-rank runs whose straggler, lateness and clock offset are
known by construction, analysed as a user would (nsync ranks, on a local Dask cluster) and through the API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nsync import AnalysisConfig
from nsync.errors import CannotJudge, GateFailed
from nsync.gates import fail_on_straggler
from nsync.ranks import rank_paths, rank_result, ranks_report
from tests.test_cli import assert_one_line_error, run
from tests.tracebuilder import DEVICE, DTOH, PINNED, TraceBuilder

STEP_US = 5000
STEPS = 12  # the first is warm-up: 11 analysed
ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"


def arrival_us(late_us: float) -> float:
    """When a rank's all-reduce starts in a step (from the step's start): its second kernel's end."""
    return 2010 if late_us == 0 else 1013 + late_us + 1005


def add_rank(b: TraceBuilder, pid: int, late_us: float, other_late_us: float, clock_us: float = 0) -> None:
    """A step: forward (1 ms), then, on a late rank, ``.item()`` (a 4-byte copy and a stream sync at
    train.py:42) and ``late_us`` of Python before the backward (1 ms); then the all-reduce, which ends on
    both ranks 50 µs after the later one arrives. ``clock_us``: this export's clock origin."""
    b.thread_name(1, "MainThread", pid=pid)
    for step in range(STEPS):
        t = clock_us + step * STEP_US
        b.nvtx_range(1, "step", t, t + STEP_US, pid=pid)
        b.kernel(1, t, t + 10, t + 1010, name="forward", pid=pid)
        if late_us:
            b.memcpy(1, "cudaMemcpyAsync_v3020", t + 20, t + 25, t + 1010, t + 1012, DTOH, DEVICE, PINNED, pid=pid)
            sync = b.stream_sync(1, t + 26, t + 1013, pid=pid)
            b.python_stack(1, sync, [("train_step", "/home/u/train.py", 42)], pid=pid)
            resume = t + 1013 + late_us
            b.kernel(1, resume, resume + 5, resume + 1005, name="backward", pid=pid)
        else:
            b.kernel(1, t + 20, t + 1010, t + 2010, name="backward", pid=pid)
        end = t + max(arrival_us(late_us), arrival_us(other_late_us)) + 50
        b.kernel(1, t + 30 if not late_us else t + 1013 + late_us + 10, t + arrival_us(late_us), end,
                 stream=13, name=ALLREDUCE, pid=pid)  # fmt: skip


def rank_export(path: Path, rank: int, late_us: float, other_late_us: float, clock_us: float = 0) -> Path:
    b = TraceBuilder(pid=100 + rank)
    add_rank(b, 100 + rank, late_us, other_late_us, clock_us)
    return b.write(path)


@pytest.fixture
def late_pair(tmp_path: Path) -> Path:
    """Rank 1 is 300 µs late at every all-reduce; its export counts from 7 s later than rank 0's."""
    folder = tmp_path / "run"
    folder.mkdir()
    rank_export(folder / "rank0.sqlite", 0, late_us=0, other_late_us=300)
    rank_export(folder / "rank1.sqlite", 1, late_us=300, other_late_us=0, clock_us=7e6)
    return folder


def test_the_late_rank_and_its_sync_are_named_with_the_delay_they_add(late_pair: Path) -> None:
    results = [rank_result(rank, str(path), AnalysisConfig()) for rank, path in rank_paths([late_pair])]
    report = ranks_report(results, AnalysisConfig())
    assert report.collectives == STEPS
    assert report.clock_offsets_ms[0] == 0 and report.clock_offsets_ms[1] == pytest.approx(-7000, abs=1e-3)
    late_ms = (arrival_us(300) - arrival_us(0)) / 1e3  # 0.308 ms at each all-reduce, one a step
    assert report.held_ms_per_step == pytest.approx(late_ms, abs=1e-6)
    rank0, rank1 = report.ranks
    assert (rank0.last_at, rank1.last_at) == (0, STEPS - 1)
    assert rank1.lateness_ms_per_step == pytest.approx(late_ms, abs=1e-6)
    (top,) = report.stragglers
    assert (top.rank, top.where, top.function, top.collectives_delayed) == (1, "train.py:42", "train_step", STEPS - 1)
    # the GPU idles from the copy's end (1012 µs) to the backward's start (1318 µs): 306 of the 308 µs late
    assert top.delay_ms_per_step == pytest.approx(0.306, abs=0.002)
    assert report.worth_fixing and report.verdict.startswith("rank 1's sync at train.py:42 holds every rank's")


@pytest.mark.slow
def test_one_export_holding_both_ranks_gives_the_same_answer(tmp_path: Path) -> None:
    b = TraceBuilder(pid=100)
    add_rank(b, 100, late_us=0, other_late_us=300)
    add_rank(b, 101, late_us=300, other_late_us=0)
    done = run("ranks", b.write(tmp_path / "all.sqlite"), "--json", "-")
    assert done.returncode == 0, done.stderr
    pooled = run("analyze", tmp_path / "all.sqlite")
    assert "2 processes ran GPU work in this trace: their figures are pooled" in pooled.stderr
    data = json.loads(done.stdout)
    assert [r["path"].rsplit(" ", 1)[-1] for r in data["ranks"]] == ["100)", "101)"]  # "(process 100)"
    assert data["clock_offsets_ms"] == [0, 0]  # one capture, one clock
    assert data["held_ms_per_step"] == pytest.approx((arrival_us(300) - arrival_us(0)) / 1e3, abs=1e-6)
    (top,) = data["stragglers"]
    assert (top["rank"], top["where"]) == (1, "train.py:42")
    assert top["delay_ms_per_step"] == pytest.approx(0.306, abs=0.002)


def test_ranks_that_arrive_together_have_nothing_to_fix(tmp_path: Path) -> None:
    paths = [rank_export(tmp_path / f"rank{r}.sqlite", r, 0, 0, clock_us=r * 3e6) for r in (0, 1)]
    report = ranks_report([rank_result(r, str(p), AnalysisConfig()) for r, p in enumerate(paths)], AnalysisConfig())
    assert report.held_ms_per_step == 0 and report.stragglers == []
    assert not report.worth_fixing and "no rank's sync costs the others enough to fix" in report.verdict


def test_ranks_that_ran_different_collectives_are_paired_in_order_with_a_warning(tmp_path: Path) -> None:
    rank_export(tmp_path / "rank0.sqlite", 0, 0, 300)
    b = TraceBuilder(pid=101)
    b.kernel(1, 0, 10, 1010, name="forward")
    b.kernel(1, 20, 1010, 1100, stream=13, name=ALLREDUCE)
    b.write(tmp_path / "rank1.sqlite")
    results = [rank_result(r, str(p), AnalysisConfig()) for r, p in rank_paths([tmp_path])]
    report = ranks_report(results, AnalysisConfig())
    assert report.collectives == 1
    assert report.warnings[0].message.startswith(f"the ranks ran different numbers of collectives ({STEPS}, 1)")


def test_ranks_without_collectives_say_so(tmp_path: Path) -> None:
    paths = []
    for rank in (0, 1):
        b = TraceBuilder(pid=100 + rank)
        b.kernel(1, 0, 10, 1010, name="forward")
        paths.append(b.write(tmp_path / f"rank{rank}.sqlite"))
    report = ranks_report([rank_result(r, str(p), AnalysisConfig()) for r, p in enumerate(paths)], AnalysisConfig())
    assert report.collectives == 0 and report.stragglers == [] and not report.worth_fixing
    assert report.warnings[0].code == "no-collectives" and "no collective kernels (NCCL)" in report.warnings[0].message
    # nothing lined up, nothing judged (issue 64): the verdict says inconclusive, and a gate cannot pass it
    assert report.verdict.startswith("inconclusive: no collective lined up across the 2 ranks")
    with pytest.raises(CannotJudge):
        fail_on_straggler(report, 5)


def test_the_ranks_gate_fails_on_a_rank_whose_sync_holds_the_others(late_pair: Path) -> None:
    results = [rank_result(rank, str(path), AnalysisConfig()) for rank, path in rank_paths([late_pair])]
    report = ranks_report(results, AnalysisConfig())
    share = 100 * report.stragglers[0].delay_ms_per_step / report.ranks[0].median_step_ms
    with pytest.raises(GateFailed, match="rank 1's sync at"):
        fail_on_straggler(report, share - 1)
    fail_on_straggler(report, share + 1)  # (under the threshold: passes)


@pytest.mark.slow
def test_ranks_of_two_single_gpu_runs_are_inconclusive_under_a_gate_with_the_warning_on_stderr(tmp_path: Path) -> None:
    """issue 64: two single-GPU exports, nothing lined up: rc 1 under --fail-above (0 without a gate), the verdict
    inconclusive, the warning on stderr and not in the summary."""
    fixtures = Path(__file__).resolve().parent.parent / "fixtures/h200"
    pair = [fixtures / "print_ok.sqlite.xz", fixtures / "print_deg.sqlite.xz"]
    gated = run("ranks", *pair, "--workers", "1", "--fail-above", "5")
    assert gated.returncode == 1, gated.stderr
    assert "verdict: inconclusive: no collective lined up" in gated.stdout and "warning" not in gated.stdout
    assert "nsync: warning: no collective kernels (NCCL)" in gated.stderr
    assert run("ranks", *pair, "--workers", "1", "--fail-above", "5", "--pass-inconclusive").returncode == 0


@pytest.mark.slow
def test_nsync_ranks_runs_on_a_local_dask_cluster(late_pair: Path) -> None:
    done = run("ranks", late_pair, "--json", "-", "--workers", "2")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["schema"] == "nsync.ranks/2"
    assert [r["rank"] for r in data["ranks"]] == [0, 1]
    assert data["stragglers"][0]["where"] == "train.py:42"
    summary = run("ranks", late_pair / "rank1.sqlite", late_pair / "rank0.sqlite", "--workers", "1")
    assert summary.returncode == 0, summary.stderr
    assert "verdict: rank 1's sync at train.py:42" in summary.stdout


@pytest.mark.slow
def test_bad_rank_inputs_are_one_line(tmp_path: Path, late_pair: Path) -> None:
    assert_one_line_error(run("ranks", late_pair / "rank0.sqlite"), 2, "1 process with GPU work")
    assert_one_line_error(run("ranks", tmp_path / "nowhere"), 2, "no such file or folder")
    (tmp_path / "rank9.sqlite").write_text("not a database")
    done = run("ranks", late_pair / "rank0.sqlite", tmp_path / "rank9.sqlite", "--workers", "1")
    assert_one_line_error(done, 1, "rank9.sqlite")


@pytest.mark.slow
def test_without_dask_the_command_says_what_to_install(late_pair: Path) -> None:
    import subprocess
    import sys

    blocked = "import sys; sys.modules['distributed'] = None; from nsync.cli import run; sys.exit(run(sys.argv[1:]))"
    done = subprocess.run([sys.executable, "-c", blocked, "ranks", str(late_pair)], capture_output=True, text=True)
    assert_one_line_error(done, 2, "analysing ranks runs on Dask: pip install 'nsync-profiler[dask]'")


def test_splitting_an_export_by_process_keeps_every_row_once(tmp_path: Path) -> None:
    from nsync.load import load_trace, split_processes

    b = TraceBuilder(pid=100)
    add_rank(b, 100, late_us=0, other_late_us=300)
    add_rank(b, 101, late_us=300, other_late_us=0)
    whole = load_trace(b.write(tmp_path / "all.sqlite"))
    parts = split_processes(whole)
    assert list(parts) == [100, 101]
    for table in ("api", "gpu_ops", "sync_activity", "nvtx_ranges", "threads"):
        assert sum(len(getattr(part, table)) for part in parts.values()) == len(getattr(whole, table)), table
    assert len(parts[100].sync_activity) == 0 and len(parts[101].sync_activity) == STEPS  # rank 1's syncs
