"""Real torch.profiler captures (torch 2.11.0+cu130 on a lent H100, 2026-12-05; fixtures/kineto/h100) read with
their programs' sources: Kineto names each Python frame by its function's first line, and the line that synced is
found in the source (nsync.load.frame_lines). The answer each test checks is known apart from nsync: the line each
lab scenario marks ``# SYNC``, the verdict its paired unprofiled timing gives (ab-timings.log), a direct count over
the JSON."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

import nsync
from nsync.load import Frame, load_trace
from nsync.load.frame_lines import FrameLines
from nsync.load.kineto import decode as kineto_json
from tests.kineto_writer import api_counts

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
H100 = FIXTURES / "kineto" / "h100"
LAB, REAL = FIXTURES / "h200", FIXTURES / "real"


def _sync_line(program: Path) -> int:
    """The line the scenario itself marks as its sync."""
    return next(n for n, text in enumerate(program.read_text().splitlines(), 1) if "# SYNC" in text)


def _analysed(name: str, sources: Path) -> nsync.Analysis:
    return nsync.analyze(H100 / f"{name}.pt.trace.json.gz", source_dirs=[sources])


@pytest.mark.parametrize("scenario", ["w_item", "w_tuple", "w_print", "w_mask"])
def test_a_torch_profiler_capture_names_the_line_that_synced(scenario: str) -> None:
    result = _analysed(f"{scenario}_degraded", LAB)
    site = result.callsites[0]
    assert (site.file, site.line) == (f"{scenario}.py", _sync_line(LAB / f"{scenario}.py"))
    assert result.trace.profiler == "torch.profiler" and result.trace.gpus == ["NVIDIA H100 80GB HBM3"]
    assert not [w for w in result.warnings if w.code == "python-lines"]


@pytest.mark.parametrize("scenario", ["w_item", "w_print", "w_mask"])
def test_the_verdict_on_a_sync_the_unprofiled_timing_finds_is_worth_fixing(scenario: str) -> None:
    # ab-timings.log: each of these paid 0.33-1.03 ms a step, its interquartile range clear of 0
    verdict = _analysed(f"{scenario}_degraded", LAB).verdict
    assert verdict is not None and verdict.worth_fixing and not verdict.measure


@pytest.mark.xfail(
    strict=True,
    reason="captured in a session whose unprofiled timing was noisy (ab IQR 0.08-1.16 ms): the capture's sync waited "
    "0.02 ms and the calibrated replay finds nothing; a later capture on the same kind of machine gave 0.45 ms "
    "(0.28-0.65), nsys 0.46, truth 0.50 (both-ways.tsv)",
)
def test_w_tuple_captured_by_torch_profiler_gets_the_verdict_its_timing_gives() -> None:
    verdict = _analysed("w_tuple_degraded", LAB).verdict
    assert verdict is not None and verdict.worth_fixing


def test_the_healthy_twin_and_a_gpu_bound_real_program_have_nothing_worth_fixing() -> None:
    healthy = _analysed("w_item_healthy", LAB)
    assert healthy.verdict is not None and not healthy.verdict.worth_fixing and not healthy.callsites
    # ResNet-50's loss.item() costs nothing measurable (fixtures/real/README.md: 0.13 ms, noise -0.96 to 2.10)
    resnet = _analysed("resnet_train", REAL)
    assert resnet.verdict is not None and not resnet.verdict.worth_fixing
    site = resnet.callsites[0]
    assert (site.file, site.line, site.function) == ("resnet_train.py", 32, "<module>")  # loss.item()


def test_without_the_source_a_frame_keeps_its_functions_first_line_and_a_warning_says_so(tmp_path: Path) -> None:
    copied = tmp_path / "w_item_degraded.pt.trace.json.gz"
    copied.write_bytes((H100 / copied.name).read_bytes())
    result = nsync.analyze(copied, calibration=None)
    assert (result.callsites[0].file, result.callsites[0].line) == ("w_item.py", 12)  # `def step():`
    (warning,) = [w for w in result.warnings if w.code == "python-lines"]
    assert "w_item.py" in warning.message and "--source-dir" in warning.message


@pytest.mark.parametrize("path", sorted(H100.glob("*.pt.trace.json.gz")), ids=lambda p: p.name.split(".")[0])
def test_calls_per_api_equal_a_direct_count_over_the_json(path: Path) -> None:
    loaded = load_trace(path).api["api"].astype(str).value_counts().to_dict()
    assert loaded == api_counts(path)


def test_a_quote_left_unescaped_inside_a_name_is_read_as_part_of_it(tmp_path: Path) -> None:
    path = tmp_path / "quoted.json"
    text = json.dumps({"schemaVersion": 1, "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "NAME", "ts": 1.0}]})
    path.write_bytes(text.replace('"NAME"', '"say "hi" now"').encode())
    decoded, repaired = kineto_json.decoded(path)
    assert repaired == 2 and decoded.traceEvents[0].name == 'say "hi" now'
    gz = tmp_path / "quoted.json.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    (warning,) = [w for w in load_trace(gz).warnings if "not escaped" in w.message]
    assert "2 quotes" in warning.message


def test_a_name_holding_a_quoted_list_is_read_whole(tmp_path: Path) -> None:
    """A Python frame named by source text (pytorch #113001): ``", "`` inside the name reads as a key."""
    name = 'lib = Library("_test", "IMPL")(1): <module>'
    path = tmp_path / "listed.json"
    event = {"ph": "X", "cat": "python_function", "name": "NAME", "ts": 1.0, "dur": 2.0, "pid": 1, "tid": 1}
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": [event, {**event, "name": "next"}]}))
    path.write_text(path.read_text().replace('"NAME"', f'"{name}"'))
    decoded, repaired = kineto_json.decoded(path)
    assert [e.name for e in decoded.traceEvents] == [name, "next"] and repaired == 4


SOURCE = """import torch

def log(values):
    return [v.item() for v in values]

def step(x, values):
    total = x.sum().item()
    if total > 0:
        print(x)
    picked = x[x > 0]
    return log(values), total.item()

def helper():
    a = torch.ones(3).item()
    b = torch.ones(3).item()
    return a + b

def report(x, y):
    if x.any():
        print(
            f"x {x.sum().item()} "
            f"y {y.sum().item()}"
        )
"""


SCRIPT = """import sys
steps = int(sys.argv[1])
total = 0.0
for step in range(steps):
    x = torch.rand(4, device="cuda")
    loss = x.sum()
    loss.backward()
    optimizer.step()
    total += float(loss)
print(float(total))
"""


@pytest.mark.parametrize(
    ("frames", "via", "lines"),
    [
        # the C function the innermost frame was in names its line: print at 9
        ([Frame("step", "prog.py", 6)], ["print"], [9]),
        # no C function: the one mask index in step (line 10)
        ([Frame("step", "prog.py", 6)], [None], [10]),
        # two lines call .item() in step: no single line, the first line kept
        ([Frame("step", "prog.py", 6)], ["item"], [6]),
        # an outer frame's line from the frame inside it (log, called at 11); the inner from its C function
        ([Frame("log", "prog.py", 3), Frame("step", "prog.py", 6)], ["item", None], [4, 11]),
        # through a wrapper frame of a library to the name the user's line calls
        (
            [Frame("log", "prog.py", 3), Frame("_wrapper", "site-packages/lib/x.py", 40), Frame("step", "prog.py", 6)],
            ["item", None, None],
            [4, 40, 11],
        ),
        ([Frame("helper", "prog.py", 13)], ["item"], [13]),
        # one statement's reads over two lines (a log line): its first read's line, as nsys's statement site
        ([Frame("report", "prog.py", 18)], ["item"], [21]),
        # a script's <module> frame, named by the line where the profiler started (the step's optimizer.step()),
        # reading with float() and no C function seen: the one read of that loop (pyg_collate's float(loss))
        ([Frame("<module>", "script.py", 8)], [None], [9]),
        # one started outside any loop: no single read, its line kept
        ([Frame("<module>", "script.py", 2)], [None], [2]),
    ],
)
def test_frames_are_placed_on_the_one_line_that_calls_inward(tmp_path, frames, via, lines) -> None:
    (tmp_path / "prog.py").write_text(SOURCE)
    (tmp_path / "script.py").write_text(SCRIPT)
    placed = FrameLines([tmp_path]).placed(frames, via)
    assert [f.line for f in placed] == lines


def test_a_folder_of_tensorboard_traces_is_read_by_its_newest_and_says_which(tmp_path: Path) -> None:
    """issue 64: torch.profiler's tensorboard_trace_handler writes WORKER.TIME.pt.trace.json(.gz) into a folder;
    `nsync analyze FOLDER` refused it. It reads the newest (by its time written), saying which."""
    older, newer = tmp_path / "host_1.100.pt.trace.json.gz", tmp_path / "host_1.200.pt.trace.json.gz"
    older.write_bytes((H100 / "w_item_degraded.pt.trace.json.gz").read_bytes())
    newer.write_bytes((H100 / "w_item_healthy.pt.trace.json.gz").read_bytes())
    os.utime(older, (1_700_000_000, 1_700_000_000))
    result = nsync.analyze(tmp_path, source_dirs=[LAB])
    assert result.trace.path == str(newer)
    said = f"{tmp_path}: a folder; read host_1.200.pt.trace.json.gz, the newest of 2 torch.profiler traces in it"
    assert [w.message for w in result.warnings if w.code == "trace-chosen"] == [said]
    # the older one read alone is the degraded twin: its line is the sync the scenario marks
    assert nsync.analyze(older, source_dirs=[LAB]).callsites[0].line == _sync_line(LAB / "w_item.py")


def test_a_torch_profiler_trace_is_told_in_its_own_words(tmp_path: Path) -> None:
    """issue 64: nsys's words (-t cuda, nsys's slow-down) on a torch.profiler trace; a JSON array read as a
    damaged SQLite file."""
    cpu = nsync.analyze(FIXTURES / "kineto/cpu_train.pt.trace.json.gz")
    assert not any("-t cuda" in w.message for w in cpu.warnings)
    result = nsync.analyze(H100 / "w_item_degraded.pt.trace.json.gz", source_dirs=[LAB], calibration=None)
    assert result.what_if is not None and "torch.profiler slows a host more" in result.what_if.note
    array = tmp_path / "events.json"
    array.write_text("[1, 2, 3]")
    with pytest.raises(nsync.TraceError, match=r"JSON, but not a torch\.profiler trace .* nor is it an nsys SQLite"):
        nsync.analyze(array)
