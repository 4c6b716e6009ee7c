"""Call sites: the innermost user frame, stack sources in order of preference, ranking and hints."""

from __future__ import annotations

from nsync.load import Frame
from nsync.stages.callsites import callsite_frame, is_user_file
from tests.tracebuilder import DEVICE, DTOH, HTOD, PAGEABLE, TraceBuilder

SITE = "/opt/venv/lib/python3.12/site-packages"
PRINT_STACK = [
    ("__init__", f"{SITE}/torch/_tensor_str.py", 182),
    ("__repr__", f"{SITE}/torch/_tensor.py", 574),
    ("step", "/home/u/proj/train.py", 19),
    ("run", "/home/u/proj/harness.py", 16),
    ("&lt;module&gt;", "/home/u/proj/train.py", 22),
]


def test_user_files_exclude_stdlib_site_packages_frozen_and_torch():
    assert is_user_file("/home/u/proj/train.py")
    assert is_user_file("<stdin>")
    assert not is_user_file("/usr/lib/python3.11/threading.py")
    assert not is_user_file("/opt/venv/lib/python3.12/site-packages/torch/_tensor.py")
    assert not is_user_file("/usr/lib/python3/dist-packages/numpy/core.py")
    assert not is_user_file("<frozen runpy>")
    assert not is_user_file("/home/u/src/pytorch/torch/nn/modules/module.py")


def test_callsite_is_the_innermost_user_frame_or_the_innermost_frame():
    stack = tuple(Frame(*f) for f in PRINT_STACK)
    assert callsite_frame(stack, "python-backtrace") == Frame("step", "/home/u/proj/train.py", 19)
    library_only = (Frame("f", f"{SITE}/torch/x.py", 1), Frame("g", "/usr/lib/python3.11/runpy.py", 2))
    assert callsite_frame(library_only, "python-backtrace") == library_only[0]


def scenario(b: TraceBuilder) -> tuple[int, int]:
    """Two syncs in different lines; the first costs 300 µs of exposed idle, the second 100 µs."""
    b.kernel(1, 0, 10, 1010, name="k1")
    item = b.stream_sync(1, 20, 1015)
    b.kernel(1, 1300, 1310, 3310, name="k2")
    cpu = b.memcpy(1, "cudaMemcpyAsync_v3020", 1320, 3320, 3310, 3315, DTOH, DEVICE, PAGEABLE, nbytes=1 << 20)
    b.kernel(1, 3400, 3415, 5000, name="k3")
    return item, cpu


def test_ranking_by_exposed_idle_with_frames_hints_and_sources(build):
    b = TraceBuilder()
    item, cpu = scenario(b)
    b.python_stack(1, item, PRINT_STACK)
    b.python_stack(1, cpu, [("to_host", "/home/u/proj/train.py", 30), ("main", "/home/u/proj/train.py", 40)])
    a = build(b)
    sites = a.callsites
    assert list(zip(sites["file"], sites["line"], sites["function"])) == [
        ("/home/u/proj/train.py", 19, "step"),
        ("/home/u/proj/train.py", 30, "to_host"),
    ]
    assert list(sites["exposed_idle_ns"]) == [(1304 - 1010) * 1000, (3404 - 3315) * 1000]
    assert list(sites["callsite_source"]) == ["python-backtrace", "python-backtrace"]
    assert sites.iloc[0]["short_hint"] == "print outside the hot loop"
    assert sites.iloc[1]["short_hint"] == "pin memory, non_blocking=True"
    top_stack = sites.iloc[0]["stack"]
    assert top_stack[-1].function == "<module>"  # HTML entities of the string table are decoded
    assert len(top_stack) == len(PRINT_STACK)


def test_native_callchain_is_the_fallback_and_skips_cuda_runtime_frames(build):
    b = TraceBuilder()
    item, _ = scenario(b)
    b.native_stack(
        1,
        item,
        [
            ("cuStreamSynchronize", "/usr/lib/libcuda.so.1"),
            ("cudaStreamSynchronize", "/usr/lib/libcudart.so.13"),
            ("at::native::_local_scalar_dense_cuda", "/x/libtorch_cuda.so"),
            ("_PyEval_EvalFrameDefault", "/usr/bin/python3.12"),
        ],
    )
    a = build(b)
    site = a.callsites.iloc[0]
    assert (site["file"], site["function"], site["callsite_source"]) == (
        "libtorch_cuda.so",
        "at::native::_local_scalar_dense_cuda",
        "cuda-callchain",
    )
    assert a.callsites.iloc[1]["callsite_source"] == "none"  # the copy had no stack at all
    assert a.callsites.iloc[1]["function"] == "cudaMemcpyAsync"


def test_python_sampling_is_the_last_resort(build):
    b = TraceBuilder()
    scenario(b)
    b.python_sample(1, 500, [("wait_for_it", "/home/u/proj/train.py", 11)])  # during the first sync
    b.python_sample(1, 1200, [("unrelated", "/home/u/proj/train.py", 99)])
    a = build(b)
    assert list(a.callsites["callsite_source"]) == ["python-sampling", "python-sampling"]
    assert list(a.callsites["line"]) == [11, 99]  # the copy at 1320 takes the 1200 sample (120 µs before)


def test_hostile_names_are_kept_verbatim(build):
    b = TraceBuilder()
    item, _ = scenario(b)
    evil = "</script><img src=x onerror=alert(1)>[bold red]x[/]"
    b.python_stack(1, item, [(evil, f"/home/u/{evil}.py", 1)])
    a = build(b)
    assert a.callsites.iloc[0]["function"] == evil


def tuple_index(b: TraceBuilder, launch_between: bool) -> None:
    """A tuple index: a 24-byte pageable copy to the GPU (20-1040 µs, queued behind k1), whose call has no
    frames, then a stream sync 3 µs after it (1043-1050) with the line's frames; ``launch_between``: a kernel
    launched between the two (then they are not known to be one line's)."""
    b.kernel(1, 0, 10, 1010, name="k1")
    b.memcpy(1, "cudaMemcpyAsync_v3020", 20, 1040, 1030, 1031, HTOD, PAGEABLE, DEVICE, nbytes=24)
    if launch_between:
        b.kernel(1, 1041, 1048, 1049, name="between", launch_cost_us=1)
    sync = b.stream_sync(1, 1043, 1050)
    b.python_stack(1, sync, [("step", "/home/u/proj/train.py", 19)])
    b.kernel(1, 1100, 1107, 2000, name="k2")


def test_a_frameless_copy_just_before_its_line_s_sync_is_that_line_s(build):
    b = TraceBuilder()
    tuple_index(b, launch_between=False)
    sites = build(b).callsites
    assert list(zip(sites["line"], sites["count"])) == [(19, 2)]
    assert set(sites.iloc[0]["kinds"]) == {"pageable-copy", "stream-sync"}


def test_a_frameless_copy_with_a_launch_before_the_next_sync_stays_apart(build):
    b = TraceBuilder()
    tuple_index(b, launch_between=True)
    sites = build(b).callsites
    assert sorted(zip(sites["line"], sites["count"])) == [(0, 1), (19, 1)]


def test_a_trace_of_launches_alone_is_not_told_it_lacks_python_frames(build):
    """nsys takes Python backtraces with its sync and memory calls only: a compiled program with no copy and no
    sync (the H200's torch.compile capture of scripts/h200/compile-step.py) has none to miss, and was told to
    capture with the very flags nsync profile had used. A sync without frames is still told."""
    b = TraceBuilder()
    for k in range(20):
        b.kernel(1, 100 + 10 * k, 110 + 10 * k, 115 + 10 * k)
    assert not [w for w in build(b).warnings if w.code == "python-frames"]
    b.stream_sync(1, 400, 420)
    assert [w for w in build(b).warnings if "no Python frames in this trace" in w.message]
