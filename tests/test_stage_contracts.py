"""Each stage's output is what its module declares, in the one sync order, and speaks nsync's vocabulary:
checked at the boundaries on real H200 traces (a lab loop, pageable copies, a Trainer with library frames)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from nsync import load_trace
from nsync.analysis import run_stages
from nsync.load.model import API_COLUMNS, EVENT_LINK_COLUMNS, GPU_OP_COLUMNS
from nsync.report.tables import LOOP_COLUMNS, SAVING_COLUMNS
from nsync.stages.advice import ADVICE_COLUMNS
from nsync.stages.attribute import ATTRIBUTED_COLUMNS
from nsync.stages.callsites import CALLSITE_COLUMNS, LABEL_COLUMNS, STACK_COLUMNS
from nsync.stages.detect import SYNC_COLUMNS, SYNC_ORDER, detect_syncs, is_relevant_api
from tests.test_cli import ROOT

TRACES = [ROOT / "fixtures/h200/print_deg.sqlite.xz", ROOT / "fixtures/h200/p2.sqlite.xz"]
TRACES += [ROOT / "fixtures/real/hf_trainer.sqlite.xz"]
# ENUM_CUDA_MEMCPY_OPER and ENUM_CUDA_MEM_KIND by name (docs/nsys-sqlite.md §2.16), as the loader says them
DIRECTIONS = {"HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"}
MEMORIES = {"pageable", "pinned", "device", "array", "managed", "device static", "managed static", "unknown"}


def _in_sync_order(frame: pd.DataFrame) -> bool:
    keys = frame[SYNC_ORDER].to_numpy(np.int64)
    return bool(np.all((keys[1:, 0] > keys[:-1, 0]) | ((keys[1:, 0] == keys[:-1, 0]) & (keys[1:, 1] >= keys[:-1, 1]))))


@pytest.fixture(scope="module", params=TRACES, ids=lambda p: p.name.split(".")[0])
def loaded(request):
    return load_trace(request.param, keep_api=is_relevant_api)


@pytest.mark.slow
def test_the_loader_emits_its_declared_columns_in_nsyncs_words(loaded) -> None:
    trace = loaded
    assert tuple(trace.api.columns) == API_COLUMNS
    assert tuple(trace.gpu_ops.columns) == GPU_OP_COLUMNS
    assert tuple(trace.sync_activity.columns) == tuple(trace.cuda_events.columns) == EVENT_LINK_COLUMNS
    ops = trace.gpu_ops
    assert set(ops["copy_direction"].dropna()) <= DIRECTIONS
    assert set(ops["src_memory"].dropna()) | set(ops["dst_memory"].dropna()) <= MEMORIES
    copies = ops["op"] == "memcpy"
    assert ops.loc[copies, "copy_direction"].notna().all() and ops.loc[~copies, "copy_direction"].isna().all()
    for table in (trace.sync_activity, trace.cuda_events):  # CUPTI's 0xFFFFFFFF for "none" is -1 here
        assert (table[["stream_id", "event_id"]].to_numpy() >= -1).all()
        assert (table[["stream_id", "event_id"]].to_numpy() < 0xFFFFFFFF).all()


@pytest.mark.slow
def test_each_stage_adds_its_declared_columns_and_keeps_the_sync_order(loaded) -> None:
    trace = loaded
    detected = detect_syncs(trace, trace.gpu_ops)
    assert list(detected.columns) == SYNC_COLUMNS
    assert _in_sync_order(detected) and isinstance(detected.index, pd.RangeIndex)
    result = run_stages(trace)
    syncs = result.syncs
    assert list(syncs.columns) == [*SYNC_COLUMNS, *ATTRIBUTED_COLUMNS, *STACK_COLUMNS, *LABEL_COLUMNS]
    assert _in_sync_order(syncs) and len(syncs) > 0
    assert list(result.callsites.columns) == [*CALLSITE_COLUMNS, *ADVICE_COLUMNS, *SAVING_COLUMNS, *LOOP_COLUMNS]
    # the exposed-idle window starts once, where attribute puts it: inside the call
    assert (syncs["exposed_start_ns"].between(syncs["start"], syncs["end"])).all()
