"""Shared fixtures: real H200 traces (decompressed once per session) and the synthetic trace builder."""

from __future__ import annotations

import contextlib
import hashlib
import lzma
import os
import shutil
import signal
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

from nsync import AnalysisConfig
from nsync.analysis import run_stages
from nsync.comparison import diff
from nsync.report import Analysis, Diff
from nsync.stages.report import StageOutputs, analysis_result
from tests.tracebuilder import TraceBuilder

# The property tests draw the same examples on every run (a red CI must mean the change, not the draw);
# NSYNC_HYPOTHESIS_EXPLORE=1 draws new ones, to look for failures (each found is kept as an @example).
hypothesis_settings.register_profile("same-draws", derandomize=True, database=None)
hypothesis_settings.register_profile("explore")
hypothesis_settings.load_profile("explore" if os.environ.get("NSYNC_HYPOTHESIS_EXPLORE") else "same-draws")

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
# fixtures/h200/probe.py: the line of each of its six syncs, and the function it is in (read off the source)
PROBE_LINES = {
    11: "sync_item",
    13: "sync_device",
    15: "sync_event",
    17: "sync_stream",
    19: "h2d_pageable",
    21: "d2h_cpu",
}


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="session", autouse=True)
def committed_fixtures_are_left_alone() -> Iterator[None]:
    """nsync opens user files read-only: the suite must leave every fixture byte-identical."""
    before = _digest(FIXTURES)
    yield
    assert _digest(FIXTURES) == before


def _nsys_agents() -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if b"--start-agent" in (entry / "cmdline").read_bytes():
                    found.add(int(entry.name))
            except OSError:
                continue
    return found


@pytest.fixture(scope="session", autouse=True)
def no_nsys_agent_outlives_the_suite() -> Iterator[None]:
    """Debian's nsys 2022.4 can leave its agent daemon spinning after a hang; never leave one behind. Only an
    agent whose ``nsys profile`` is gone is stopped: a live one may be another suite's capture in progress."""
    before = _nsys_agents()
    yield
    _stop_orphaned_agents(_nsys_agents() - before)


def _stop_orphaned_agents(pids: set[int]) -> int:
    """Stop (SIGTERM, then SIGKILL: nsync.capturing.nsys.hang.stop_agents) the agents of ``pids`` whose nsys is gone."""
    from nsync.capturing.nsys.hang import agents, processes, stop_agents

    orphans = {int(name.rsplit("-", 1)[1]) for pid, name in agents() if pid in pids and name[-1:].isdigit()}
    running = processes()  # read after the agents: an nsys that started meanwhile is in it, and keeps its agent
    return sum(stop_agents(nsys_pid) for nsys_pid in orphans - set(running))


def _decompressed(tmp_path_factory: pytest.TempPathFactory, folder: str) -> Callable[[str], Path]:
    target_folder = tmp_path_factory.mktemp(folder.replace("/", "-"))

    def get(name: str) -> Path:
        target = target_folder / f"{name}.sqlite"
        if not target.exists():
            with lzma.open(FIXTURES / folder / f"{name}.sqlite.xz") as src, target.open("wb") as dst:
                shutil.copyfileobj(src, dst)
        return target

    return get


def compared(base: StageOutputs, cand: StageOutputs) -> Diff:
    """nsync.diff of two runs' results, made of what their stages found (edited where a test says)."""
    return diff(analysis_result(base), analysis_result(cand))


def _staged(trace: Callable[[str], Path]) -> Callable[[str], StageOutputs]:
    """What the stages found in each trace, once per session (uncalibrated: the traces are copied alone)."""
    cache: dict[str, StageOutputs] = {}

    def get(name: str) -> StageOutputs:
        if name not in cache:
            cache[name] = run_stages(trace(name))
        return cache[name]

    return get


def _analysed(stages: Callable[[str], StageOutputs]) -> Callable[[str], Analysis]:
    """The result of each trace's stages (nsync.analyze's, from them)."""
    cache: dict[str, Analysis] = {}

    def get(name: str) -> Analysis:
        if name not in cache:
            cache[name] = analysis_result(stages(name))
        return cache[name]

    return get


@pytest.fixture(scope="session")
def h200(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """Path of a real H200 export (fixtures/h200/NAME.sqlite.xz), decompressed once per session."""
    return _decompressed(tmp_path_factory, "h200")


@pytest.fixture(scope="session")
def h200_stages(h200: Callable[[str], Path]) -> Callable[[str], StageOutputs]:
    return _staged(h200)


@pytest.fixture(scope="session")
def h200_analysis(h200_stages: Callable[[str], StageOutputs]) -> Callable[[str], Analysis]:
    return _analysed(h200_stages)


@pytest.fixture(scope="session")
def real(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """Path of a real program's H200 export (fixtures/real/NAME.sqlite.xz), decompressed once per session."""
    return _decompressed(tmp_path_factory, "real")


@pytest.fixture(scope="session")
def real_stages(real: Callable[[str], Path]) -> Callable[[str], StageOutputs]:
    return _staged(real)


@pytest.fixture(scope="session")
def real_analysis(real_stages: Callable[[str], StageOutputs]) -> Callable[[str], Analysis]:
    return _analysed(real_stages)


@pytest.fixture
def build(tmp_path: Path) -> Callable[..., StageOutputs]:
    """Write a TraceBuilder to disk and run the analysis's stages on it (analysis_result makes their result)."""

    def run(builder: TraceBuilder, **config: object) -> StageOutputs:
        path = builder.write(tmp_path / f"synthetic-{len(list(tmp_path.iterdir()))}.sqlite")
        return run_stages(path, AnalysisConfig(**config))  # type: ignore[arg-type]

    return run


@pytest.fixture(scope="session")
def cpu_only_export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    nsys = shutil.which("nsys")
    assert nsys, "nsys must be installed in CI: run make system-deps"
    folder = tmp_path_factory.mktemp("nsys")
    script = folder / "cpu_only.py"
    script.write_text(
        "import time\ntotal = sum(i * i for i in range(200_000))\ntime.sleep(0.5)\nprint('done', total)\n"
    )
    run_contained(
        [
            nsys,
            "profile",
            "-o",
            str(folder / "run"),
            "-f",
            "true",
            "--trace=osrt,nvtx",
            "--sample=none",
            "--cpuctxsw=none",
            sys.executable,
            str(script),
        ],
        timeout=300,
    ).check_returncode()
    subprocess.run(
        [
            nsys,
            "export",
            "--type",
            "sqlite",
            "-o",
            str(folder / "run.sqlite"),
            "-f",
            "true",
            str(folder / "run.nsys-rep"),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return folder / "run.sqlite"


def run_contained(argv: list[str], timeout: float, **popen: object) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(argv, capture_output=True, text=True, timeout=...)`` for a command that starts nsys: on a
    timeout its whole process group is stopped (SIGTERM, then SIGKILL) and so are the agents of any nsys that
    went with it. A hung capture then fails its own test, not every capture after it: an nsys left running
    makes every later one fail with 'Agent launcher failed.' (seen in CI)."""
    import time

    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, **popen
    )  # type: ignore[call-overload]
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        agents_before = _nsys_agents()
        for stop in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, stop)
            time.sleep(3)
        out, err = proc.communicate()
        _stop_orphaned_agents(agents_before)
        raise subprocess.TimeoutExpired(argv, timeout, output=out, stderr=err) from None
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def remove_stale_nsys_state(untouched_s: float = 0.0) -> list[Path]:
    """Remove what a killed nsys left in /dev/shm (nsync.capturing.nsys.leftovers), which can stop every later nsys from
    starting: a test that kills nsys cleans up after itself, and the suite starts on a machine where nsys starts.
    ``untouched_s``: only state that no session has written for that long (another suite may be starting one)."""
    import time

    from nsync.capturing.nsys.leftovers import stale_session_state

    removed = []
    for state in stale_session_state():
        with contextlib.suppress(OSError):
            if time.time() - state.stat().st_mtime >= untouched_s:
                state.unlink()
                removed.append(state)
    return removed


@pytest.fixture(scope="session", autouse=True)
def nsys_starts() -> None:
    """Agents whose ``nsys profile`` is gone (a run before this one killed it) are stopped, then the state a
    killed nsys left is removed, each with a warning in the suite's summary."""
    stopped = _stop_orphaned_agents(_nsys_agents())
    if stopped:
        warnings.warn(f"stopped {stopped} agent(s) of an nsys that is gone", stacklevel=1)
    removed = remove_stale_nsys_state(untouched_s=60)
    if removed:
        warnings.warn(f"removed nsys state that a killed nsys had left behind: {removed}", stacklevel=1)


def interruptible() -> None:
    """In the child (``preexec_fn``): SIGINT back to its default, which a suite started in the background has
    ignored (and an ignored SIGINT is inherited, so Python would install no KeyboardInterrupt handler at all:
    a Ctrl-C test then fails only when the suite runs in the background)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def no_capture_hangs_forever() -> Iterator[None]:
    """A regression here would hang the suite, not fail it: SIGALRM turns 90 s into a failure."""

    def fail(*_: object) -> None:
        raise TimeoutError("the capture did not end within 90 s")

    previous = signal.signal(signal.SIGALRM, fail)
    signal.alarm(90)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)
