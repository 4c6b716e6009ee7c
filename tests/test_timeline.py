"""The array primitives under the analysis, checked against plain-Python answers on random inputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsync.keys import DIRECT_RANGE, codes_in, dense_codes, match_rows
from nsync.stages import timeline
from nsync.stages.timeline import BusyUnion, group_codes, latest_holding, neighbour_in_group, rows_by_key

RNG = np.random.default_rng(7)


@pytest.mark.parametrize(
    "values",
    [
        np.full(50, 1 << 40),  # one process: constant
        RNG.integers(-1, 12, 500),  # streams, with NULL as -1
        RNG.integers(0, 3, 500) * (DIRECT_RANGE * 4) + (1 << 56),  # thread ids, far apart
        np.zeros(0, np.int64),
    ],
    ids=["constant", "narrow", "wide", "empty"],
)
def test_dense_codes_number_the_distinct_values_in_order(values):
    codes, uniques = dense_codes(values)
    assert uniques.tolist() == sorted(set(values.tolist()))
    assert uniques[codes].tolist() == values.tolist()
    assert codes_in(values, uniques).tolist() == codes.tolist()
    assert codes_in(np.array([-5, 1 << 60]), uniques).tolist() == [-1, -1]


def test_group_codes_agree_across_tables():
    left = [RNG.integers(0, 3, 300), RNG.integers(0, 4, 300)]
    right = [RNG.integers(0, 3, 40), RNG.integers(0, 5, 40)]
    left_codes, right_codes = group_codes(left, right)
    pairs = list(zip(*[c.tolist() for c in left])) + list(zip(*[c.tolist() for c in right]))
    codes = left_codes.tolist() + right_codes.tolist()
    assert sorted(set(codes)) == list(range(len(set(pairs))))
    assert len({(p, c) for p, c in zip(pairs, codes)}) == len(set(pairs))  # one code per pair, one pair per code


def test_match_rows_finds_the_first_equal_pair():
    right_group, right_id = RNG.integers(0, 3, 400) << 30, RNG.integers(-1, 100, 400)
    left_group, left_id = RNG.integers(0, 4, 300) << 30, RNG.integers(-1, 120, 300)
    first = {}
    for row, key in enumerate(zip(right_group.tolist(), right_id.tolist())):
        first.setdefault(key, row)
    expected = [first.get((g, i), -1) if i >= 0 else -1 for g, i in zip(left_group.tolist(), left_id.tolist())]
    assert match_rows(left_group, left_id, right_group, right_id).tolist() == expected


@pytest.mark.parametrize("max_scans", [16, 0], ids=["a pass per key", "one sort"])
def test_rows_by_key_gives_each_querys_rows_in_time_order(monkeypatch, max_scans):
    monkeypatch.setattr(timeline, "MAX_SCANS", max_scans)
    tid, device = RNG.integers(0, 4, 1000), RNG.integers(0, 2, 1000)
    times = RNG.permutation(1000) * 10
    query_tid, query_device = np.array([3, 1, 3, 9]), np.array([0, 1, 0, 0])
    seen = {}
    for mine, rows in rows_by_key([tid, device], [query_tid, query_device], times):
        key = (int(query_tid[mine[0]]), int(query_device[mine[0]]))
        assert {(int(query_tid[q]), int(query_device[q])) for q in mine} == {key}
        seen[key] = mine.tolist()
        expected = [r for r in np.argsort(times).tolist() if (tid[r], device[r]) == key]
        assert rows.tolist() == expected
    assert seen == {(3, 0): [0, 2], (1, 1): [1], (9, 0): [3]}


def _idle_by_brute_force(starts, ends, a, b):
    busy = np.zeros(b - a, bool)
    for s, e in zip(starts.tolist(), ends.tolist()):
        busy[max(s, a) - a : max(min(e, b), a) - a] = True
    return int((~busy).sum())


@pytest.mark.parametrize("presorted", [True, False])
def test_busy_union_idle_matches_painting_the_intervals(presorted):
    starts = RNG.integers(0, 2000, 300)
    ends = starts + RNG.integers(0, 40, 300)
    if presorted:
        order = np.argsort(starts, kind="stable")
        starts, ends = starts[order], ends[order]
    union = BusyUnion(starts, ends)
    assert (np.diff(union.starts) > 0).all() and (union.starts[1:] > union.ends[:-1]).all()
    windows = [(0, 2100), (5, 6), (100, 900), (1500, 1501), (1999, 2050)]
    for a, b in windows:
        assert union.idle_between(np.array([a]), np.array([b]))[0] == _idle_by_brute_force(starts, ends, a, b)
    assert union.total_busy == 2100 - _idle_by_brute_force(starts, ends, 0, 2100)


def test_busy_union_of_nothing_is_all_idle():
    union = BusyUnion(np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert union.idle_between(np.array([10]), np.array([25])).tolist() == [15]


WINDOWS = st.lists(st.tuples(st.integers(0, 200), st.integers(0, 60)), max_size=40)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(windows=WINDOWS, at=st.lists(st.integers(-5, 270), max_size=30))
def test_latest_holding_is_the_window_that_began_last_among_those_holding_t(windows, at) -> None:
    windows = sorted(windows)
    starts = np.array([s for s, _ in windows], np.int64)
    ends = np.array([s + length for s, length in windows], np.int64)
    found = latest_holding(starts, ends, np.array(at, np.int64))
    for t, got in zip(at, found.tolist()):
        holding = [i for i, (s, e) in enumerate(zip(starts, ends)) if s <= t < e]
        assert got == (holding[-1] if holding else -1)


@settings(max_examples=300, deadline=None)
@given(
    busy=st.lists(st.tuples(st.integers(0, 300), st.integers(1, 40)), max_size=20),
    windows=WINDOWS,
)
@pytest.mark.slow
def test_idle_once_adds_up_to_the_idle_in_the_union_of_the_windows(busy, windows) -> None:
    """Each idle nanosecond once: per window at most its own idle, together exactly the idle in their union
    (nanosecond by nanosecond, by brute force)."""
    union = BusyUnion(np.array([s for s, _ in busy], np.int64), np.array([s + d for s, d in busy], np.int64))
    start = np.array([s for s, _ in windows], np.int64)
    end = np.array([s + length for s, length in windows], np.int64)
    once = union.idle_once(start, end)
    assert (once <= union.idle_between(start, end)).all() and (once >= 0).all()
    busy_ns = {t for s, d in busy for t in range(s, s + d)}
    held_ns = {t for s, e in zip(start.tolist(), end.tolist()) for t in range(s, e)}
    assert int(once.sum()) == len(held_ns - busy_ns)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 4), max_size=40), st.sampled_from([-2, -1, 1, 2]))
def test_neighbour_in_group_is_the_row_step_places_away_among_its_key_s_rows(keys: list[int], step: int):
    expected = []
    for row, key in enumerate(keys):
        mine = [r for r, k in enumerate(keys) if k == key]  # the key's rows, in row order
        at = mine.index(row) + step
        expected.append(mine[at] if 0 <= at < len(mine) else -1)
    assert neighbour_in_group(np.array(keys, np.int64), step).tolist() == expected
