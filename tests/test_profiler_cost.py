"""What nsync profile's nsys flags cost the host, measured on the H200 (fixtures/h200/profiler-cost): the README's
tables are what the raw logs give, and its findings hold on them."""

from __future__ import annotations

import json
import re
import statistics

from tests.conftest import FIXTURES

COST = FIXTURES / "h200/profiler-cost"
README = (COST / "README.md").read_text()
NUMBER = r"(-?[\d.]+)"


def call_overhead() -> dict[tuple[int, int], dict[str, float]]:
    """(launches, depth) -> {"unprofiled": µs, "profiled": µs}, the median of the runs' medians."""
    runs: dict[tuple[int, int], dict[str, list[float]]] = {}
    mode = ""
    for line in (COST / "call-overhead.log").read_text().splitlines():
        if line.startswith("== "):
            mode = line.split()[1]
        elif line.startswith("RESULT "):
            result = json.loads(line.removeprefix("RESULT "))
            key = result["launches"], result["depth"]
            runs.setdefault(key, {}).setdefault(mode, []).append(result["median_us"])
    return {key: {m: statistics.median(v) for m, v in modes.items()} for key, modes in runs.items()}


def per_launch_us(table: dict[tuple[int, int], dict[str, float]], depth: int, mode: str) -> float:
    return (table[(32, depth)][mode] - table[(0, depth)][mode]) / 32


def flag_runs() -> list[dict]:
    """The `hf_gpt2_perseq` ab runs of flag-cost.log and sampling-rate.log, in order, with their configuration."""
    runs = []
    for log in ("flag-cost.log", "sampling-rate.log"):
        for line in (COST / log).read_text().splitlines():
            found = re.match(r"^(\d+) (\S+) RESULT (\{.*\})$", line)
            if found:
                result = json.loads(found[3])
                if result["program"] == "hf_gpt2_perseq":
                    config = "sampling-16x-rarer" if log == "sampling-rate.log" else found[2]
                    runs.append({"round": int(found[1]), "config": config, **result})
    return runs


NVTX_TRACED = {
    "none": None,
    "full": True,
    "no-osrt": True,
    "no-backtraces": True,
    "cuda-only": False,
    "cuda-backtraces": False,
    "cuda-nvtx": True,
    "sampling-16x-rarer": True,
}


def test_the_call_overhead_table_is_what_the_log_gives():
    rows = re.findall(rf"^\| (\d+) \| (\d+) \| {NUMBER} \| {NUMBER} \|$", README, re.M)
    table = call_overhead()
    assert len(rows) == len(table) == 6
    for launches, depth, unprofiled, profiled in rows:
        medians = table[(int(launches), int(depth))]
        assert (float(unprofiled), float(profiled)) == (medians["unprofiled"], medians["profiled"])


def test_nsys_slows_a_launch_by_half_and_plain_python_not_at_all_whatever_the_depth():
    table = call_overhead()
    for depth in (4, 40):
        plain = table[(0, depth)]
        assert plain["profiled"] / plain["unprofiled"] < 1.05
        unprofiled, profiled = per_launch_us(table, depth, "unprofiled"), per_launch_us(table, depth, "profiled")
        assert 6 < unprofiled < 6.5 and 9.5 < profiled < 10.1  # the README's figures
        assert 1.4 < profiled / unprofiled < 1.7
    assert abs(per_launch_us(table, 40, "profiled") / per_launch_us(table, 4, "profiled") - 1) < 0.05


def test_the_flag_table_is_what_the_logs_give():
    rows = re.findall(rf"^\| (\d) \| ([^|]+) \| (yes|no|-) \| {NUMBER} \| {NUMBER} \| {NUMBER} \|$", README, re.M)
    runs = flag_runs()
    assert len(rows) == len(runs) == 9
    for (round_, _flags, traced, degraded, healthy, saving), run in zip(rows, runs):
        assert int(round_) == run["round"]
        assert traced == {None: "-", True: "yes", False: "no"}[NVTX_TRACED[run["config"]]]
        logged = (run["degraded_median_ms"], run["healthy_median_ms"], run["saving_median_ms"])
        assert tuple(float(x) for x in (degraded, healthy, saving)) == tuple(round(x, 3) for x in logged)


def test_every_run_that_traced_nvtx_lost_the_saving_and_every_other_kept_most_of_it():
    runs = flag_runs()
    (unprofiled,) = [r for r in runs if r["config"] == "none"]
    for run in runs:
        traced = NVTX_TRACED[run["config"]]
        share = run["saving_median_ms"] / unprofiled["saving_median_ms"]
        slowed = run["healthy_median_ms"] / unprofiled["healthy_median_ms"]
        if traced:
            assert share < 0.3 and slowed > 1.35, run["config"]
        elif traced is False:
            assert share > 0.7 and slowed < 1.2, run["config"]
