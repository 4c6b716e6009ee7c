"""torch.profiler (Kineto) traces: read into the same trace model as nsys exports (nsync.load.kineto).

The GPU traces here are written in Kineto's format from the rows of real H200 nsys exports (tests/kineto_writer.py):
the same program, so the answer must be the nsys export's. The CPU trace is a real torch 2.13.0+cpu profile."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

import nsync
from nsync.errors import TraceError
from nsync.load import load_trace
from tests.kineto_writer import api_counts, write_kineto

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CPU_TRACE = FIXTURES / "kineto" / "cpu_train.pt.trace.json.gz"


def _both(trace_path: Path, tmp_path: Path) -> tuple[nsync.Analysis, nsync.Analysis, Path]:
    kineto = write_kineto(load_trace(trace_path), tmp_path / f"{trace_path.stem}.pt.trace.json.gz")
    return nsync.analyze(trace_path, calibration=None), nsync.analyze(kineto, calibration=None), kineto


def _top(result: nsync.Analysis) -> tuple[str, int]:
    site = result.callsites[0]
    return site.file.rsplit("/", 1)[-1], site.line


def _verdict(result: nsync.Analysis) -> tuple[bool, bool, str]:
    assert result.verdict is not None
    return result.verdict.worth_fixing, result.verdict.measure, result.verdict.site


def test_a_lab_scenario_read_from_kineto_gets_the_nsys_exports_answer(h200, tmp_path: Path) -> None:
    by_nsys, by_kineto, kineto = _both(h200("w_item_degraded"), tmp_path)
    assert by_kineto.trace.profiler == "torch.profiler" and by_kineto.trace.gpus == ["NVIDIA H200"]
    assert _top(by_kineto) == _top(by_nsys) == ("w_item.py", 17)
    assert by_kineto.verdict is not None and by_nsys.verdict is not None
    assert _verdict(by_kineto) == _verdict(by_nsys) == (True, False, "w_item.py:17 (its loop, for all items at once)")
    assert by_kineto.steps.count == by_nsys.steps.count == 59
    saving = by_nsys.verdict.largest_saving_ms_per_step
    assert by_kineto.verdict.largest_saving_ms_per_step == pytest.approx(saving, rel=0.02)
    # every call the JSON holds is read, API by API (the direct count)
    loaded = load_trace(kineto).api["api"].astype(str).value_counts().to_dict()
    assert loaded == api_counts(kineto)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("folder", "name"),
    [("h200", "print_deg"), ("h200", "w_mask_degraded"), ("real", "resnet_train"), ("real", "timm_gradnorm")],
)
def test_real_programs_read_from_kineto_get_the_nsys_exports_answer(h200, real, tmp_path, folder, name) -> None:
    by_nsys, by_kineto, _ = _both((h200 if folder == "h200" else real)(name), tmp_path)
    assert _top(by_kineto) == _top(by_nsys)
    assert _verdict(by_kineto) == _verdict(by_nsys)
    assert by_kineto.steps.count == by_nsys.steps.count
    assert by_kineto.steps.source == by_nsys.steps.source
    nsys_syncs = by_nsys.tables.syncs["api"].astype(str).value_counts()  # type: ignore[union-attr]
    kineto_syncs = by_kineto.tables.syncs["api"].astype(str).value_counts()  # type: ignore[union-attr]
    assert kineto_syncs[kineto_syncs > 0].to_dict() == nsys_syncs[nsys_syncs > 0].to_dict()


def test_a_cpu_only_torch_trace_loads_and_says_it_has_no_cuda() -> None:
    trace = load_trace(CPU_TRACE)
    assert len(trace.api) == 0 and len(trace.gpu_ops) == 0
    # six ProfilerStep#N ranges (schedule active=6) and PyTorch's own optimizer-step annotations as nsync's marks
    names = trace.nvtx_ranges["name"].value_counts()
    assert sum(n.startswith("ProfilerStep#") for n in names.index) == 6
    assert names["nsync: optimizer step"] == 6
    result = nsync.analyze(CPU_TRACE)
    assert result.status == "no-cuda"
    (warning,) = [w for w in result.warnings if w.code == "kineto-trace"]
    assert "no CUDA activity" in warning.message and "ProfilerActivity.CUDA" in warning.message


def _trace_file(tmp_path: Path, events: list[dict], name: str = "t.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": [], "traceEvents": events}))
    return path


def _x(cat: str, name: str, ts: float, dur: float, **args: object) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 7, "tid": 7, "ts": ts, "dur": dur, "args": args}


def test_a_calls_stack_is_its_innermost_python_frame_and_its_parents_without_c_functions(tmp_path: Path) -> None:
    events = [
        _x("python_function", "train.py(30): <module>", 100.0, 50.0, **{"Python id": 1, "Python parent id": None}),
        _x("python_function", "train.py(12): step", 110.0, 20.0, **{"Python id": 2, "Python parent id": 1}),
        _x(
            "python_function",
            "torch/_tensor.py(1100): __format__",
            111.0,
            3.0,
            **{"Python id": 3, "Python parent id": 2},
        ),  # ends before the call
        _x(
            "python_function",
            "<built-in method item of Tensor object at 0x7f>",
            115.0,
            4.0,
            **{"Python id": 4, "Python parent id": 2},
        ),
        _x("python_function", "typing.py(400): inner", 140.0, 2.0, **{"Python id": 5, "Python parent id": 1}),
        _x("cuda_runtime", "cudaStreamSynchronize", 116.0, 2.0, correlation=9),
        _x("cuda_runtime", "cudaLaunchKernel", 140.5, 1.0, correlation=10),
        _x("cuda_runtime", "cudaLaunchKernel", 200.0, 1.0, correlation=11),  # outside every frame
    ]
    trace = load_trace(_trace_file(tmp_path, events))
    stacks = [trace.stacks[i] if i >= 0 else None for i in trace.api["py_stack_id"]]
    assert [(f.file, f.line, f.function) for f in stacks[0]] == [("train.py", 12, "step"), ("train.py", 30, "<module>")]
    assert [f.file for f in stacks[1]] == ["<stdlib>/typing.py", "train.py"]
    assert stacks[2] is None
    assert trace.api["start"].tolist() == [16_000, 40_500, 100_000]  # ns from the first event (ts 100.0 us)


def test_copies_take_their_direction_and_memories_from_their_names(tmp_path: Path) -> None:
    events = [
        _x("cuda_runtime", "cudaMemcpyAsync", 10.0, 5.0, correlation=1),
        _x("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 12.0, 1.0, correlation=1, device=0, stream=7, bytes=4),
        _x("cuda_runtime", "cudaMemsetAsync", 20.0, 1.0, correlation=2),
        _x("gpu_memset", "Memset (Device)", 21.0, 1.0, correlation=2, device=0, stream=7, bytes=64),
    ]
    ops = load_trace(_trace_file(tmp_path, events)).gpu_ops
    assert ops["op"].astype(str).tolist() == ["memcpy", "memset"]
    assert ops[["copy_direction", "src_memory", "dst_memory"]].astype(str).values.tolist()[0] == [
        "DtoH",
        "device",
        "pageable",
    ]
    assert ops["dst_memory"].astype(str).tolist()[1] == "device"
    assert ops["launch_start"].tolist() == [0, 10_000] and ops["bytes"].tolist() == [4, 64]


def test_kineto_sync_events_give_the_stream_and_the_event_record_a_sync_waited_on(tmp_path: Path) -> None:
    """Stream 7 runs a 1 ms kernel, stream 13 a 50 µs one. A cudaStreamSynchronize whose cuda_sync event names
    stream 13 waits on that stream alone; a cudaEventSynchronize waits on stream 13 up to its event's record (the
    cudaEventRecord the event names, at 5 µs); a sync without an event of its own waits on the whole device."""
    from nsync.stages.detect import detect_syncs

    def gpu(name: str, ts: float, dur: float, corr: int, stream: int) -> dict:
        return {**_x("kernel", name, ts, dur, correlation=corr, device=0, stream=stream), "pid": 0, "tid": stream}

    def sync(kind: str, corr: int, stream: int, **wait: int) -> dict:
        args = {"cuda_sync_kind": kind, "stream": stream, "correlation": corr, "device": 0, "context": 1, **wait}
        return {"ph": "X", "cat": "cuda_sync", "name": kind, "pid": 0, "tid": stream, "ts": 0.0, "dur": 1.0,
                "args": args}  # fmt: skip

    events = [
        _x("cuda_runtime", "cudaLaunchKernel", 1.0, 2.0, correlation=1),
        gpu("long", 10.0, 1000.0, 1, 7),
        _x("cuda_runtime", "cudaLaunchKernel", 3.0, 1.0, correlation=2),
        gpu("short", 10.0, 50.0, 2, 13),
        _x("cuda_runtime", "cudaEventRecord", 5.0, 1.0, correlation=4),
        _x("cuda_runtime", "cudaStreamSynchronize", 20.0, 40.0, correlation=3),
        sync("Stream Sync", 3, 13),
        _x("cuda_runtime", "cudaEventSynchronize", 70.0, 1.0, correlation=5),
        sync("Event Sync", 5, 13, wait_on_stream=13, wait_on_cuda_event_record_corr_id=4, wait_on_cuda_event_id=9),
        _x("cuda_runtime", "cudaDeviceSynchronize", 80.0, 931.0, correlation=6),
    ]
    trace = load_trace(_trace_file(tmp_path, events))
    syncs = detect_syncs(trace, trace.gpu_ops).set_index("correlation_id")
    assert syncs.loc[[3, 5, 6], "scope_stream_id"].tolist() == [13, 13, -1]
    assert syncs.loc[5, "cutoff_ns"] == 4_000  # the record's call, 4 µs after the first event
    assert syncs.loc[3, "cutoff_ns"] == 19_000  # (a stream sync: everything launched before it)


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b'{"traceEvents": [{"ph": "X", "ts": "soon"}]}', "not a torch.profiler trace nsync can read"),
        (b'{"traceEvents": [', "not valid JSON"),
        (gzip.compress(b'{"traceEvents": []}', mtime=0)[:-9], "cannot read the trace"),
    ],
    ids=["a field of the wrong type", "cut JSON", "cut gzip"],  # (ids of bytes would vary with gzip's clock)
)
def test_a_damaged_trace_is_one_line_error(tmp_path: Path, content: bytes, said: str) -> None:
    path = tmp_path / "bad.json.gz"
    path.write_bytes(content)
    with pytest.raises(TraceError, match=said) as err:
        load_trace(path)
    assert "\n" not in str(err.value)


@pytest.mark.slow
def test_nsync_analyze_takes_a_kineto_trace_by_its_content(h200, tmp_path: Path) -> None:
    kineto = write_kineto(load_trace(h200("print_deg")), tmp_path / "run.pt.trace.json.gz")
    quiet = subprocess.run(
        [sys.executable, "-m", "nsync", "analyze", str(kineto), "-q"], capture_output=True, text=True, check=False
    )
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout.startswith("verdict: fixing w_print.py:")
    data = json.loads(
        subprocess.run(
            [sys.executable, "-m", "nsync", "analyze", str(kineto), "--json", "-"], capture_output=True, check=True
        ).stdout
    )
    assert data["trace"]["profiler"] == "torch.profiler"


def test_nsync_ranks_finds_torch_profiler_traces_in_a_folder(tmp_path: Path) -> None:
    from nsync.ranks import rank_paths

    for name in ("rank1.pt.trace.json.gz", "rank0.pt.trace.json.gz", "notes.txt"):
        (tmp_path / name).write_bytes(b"{}")
    assert [(rank, path.name) for rank, path in rank_paths([tmp_path])] == [
        (0, "rank0.pt.trace.json.gz"),
        (1, "rank1.pt.trace.json.gz"),
    ]


def test_a_standard_library_frame_from_kineto_is_no_users_file() -> None:
    """Kineto writes the stdlib's typing.py as 'typing.py'; the loader names it '<stdlib>/typing.py', which the call
    sites must read as the standard library's (the site is the user's frame outside it)."""
    from nsync.stages.callsites import is_user_file

    assert not is_user_file("<stdlib>/typing.py") and is_user_file("train.py")


SEG_SCRIPT = """import torch
model, optimizer, x, target = None, None, None, None
classes = 2
inter, union = [0, 0], [0, 0]
for step in range(3):
    out = model(x)
    loss = out.sum()
    loss.backward()
    optimizer.step()
    predicted = out.argmax(1)
    for c in range(classes):
        p, t = predicted == c, target == c
        inter[c] += (p & t).sum().item()
        union[c] += (p | t).sum().item()
"""


def test_reads_of_a_loop_on_two_lines_are_placed_by_the_order_of_the_frames_calls(tmp_path: Path) -> None:
    """A script's ``<module>`` frame is named by the line the profiler started on (optimizer.step(), 9) and
    ``.item()`` is called on lines 13 and 14: each read is placed by its turn among the frame's calls (as
    tv_seg_iou's per-class loop, which was put on ``optimizer.step()``)."""
    (tmp_path / "seg.py").write_text(SEG_SCRIPT)
    events = [_x("python_function", "seg.py(9): <module>", 0.0, 10_000.0, **{"Python id": 1, "Python parent id": None})]

    def call(name: str, ts: float, sync: bool = False) -> None:
        events.append(_x("python_function", name, ts, 8.0, **{"Python id": len(events) + 10, "Python parent id": 1}))
        if sync:
            events.append(_x("cuda_runtime", "cudaStreamSynchronize", ts + 1.0, 5.0, correlation=len(events)))

    ts = 10.0
    for _step in range(2):
        call("torch/nn/modules/module.py(1700): _wrapped_call_impl", ts)
        call("<built-in method backward of Tensor object at 0x7f>", ts + 10)
        call("torch/optim/sgd.py(80): step", ts + 20)
        call("<built-in method argmax of Tensor object at 0x7f>", ts + 30)
        for k in range(4):  # per class: sum, item (line 13), sum, item (line 14)
            call("<built-in method sum of Tensor object at 0x7f>", ts + 40 + 20 * k)
            call("<built-in method item of Tensor object at 0x7f>", ts + 50 + 20 * k, sync=True)
        ts += 200
    trace = load_trace(_trace_file(tmp_path, events))
    lines = [trace.stacks[i][0].line for i in trace.api["py_stack_id"]]
    assert lines == [13, 14, 13, 14] * 2
