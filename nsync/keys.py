"""Row matching on two integer columns (process or thread, correlationId or time) without hash joins.

nsys links rows across tables by a pair: (process, correlationId) from a GPU op to its API call,
(thread, correlationId) from a call to its backtrace twin, (thread, start) from a twin to its Python
mark. At millions of rows a pandas merge copies both tables and hashes every key; here the pair is
packed into one int64, the right side is sorted once and the left side is found by binary search.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def match_rows(
    left_group: np.ndarray, left_id: np.ndarray, right_group: np.ndarray, right_id: np.ndarray
) -> np.ndarray:
    """For each left row, the first right row with the same (group, id), or -1.

    Ids below zero are NULLs (the loader's -1) and match nothing.
    """
    return match_rows_and_repeats(left_group, left_id, right_group, right_id)[0]


def match_rows_and_repeats(
    left_group: np.ndarray, left_id: np.ndarray, right_group: np.ndarray, right_id: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`match_rows`, and which right rows repeat the (group, id) of an earlier right row: the join's
    own sort shows them, at no extra cost."""
    left_group, left_id = np.asarray(left_group, np.int64), np.asarray(left_id, np.int64)
    right_group, right_id = np.asarray(right_group, np.int64), np.asarray(right_id, np.int64)
    repeated = np.zeros(len(right_id), bool)
    if not len(left_id) or not len(right_id):
        return np.full(len(left_id), -1, np.int64), repeated
    right_codes, groups = dense_codes(right_group)
    low = min(int(left_id.min()), int(right_id.min()))
    id_bits = max(1, (max(int(left_id.max()), int(right_id.max())) - low).bit_length())
    if id_bits + max(1, len(groups).bit_length()) > 62:  # ids too far apart to pack: hash the pairs
        repeated[:] = pd.DataFrame({"group": right_group, "id": right_id}).duplicated().to_numpy()
        return _match_by_hash(left_group, left_id, right_group, right_id), repeated
    right_key = _pack(right_codes, right_id, low, id_bits)
    order = np.argsort(right_key, kind="stable")  # stable: among equal keys the first row comes first
    right_key = right_key[order]
    repeated[order[1:][right_key[1:] == right_key[:-1]]] = True
    left_key = _pack(codes_in(left_group, groups), left_id, low, id_bits)  # unknown group: < 0
    pos = np.searchsorted(right_key, left_key)
    np.minimum(pos, len(right_key) - 1, out=pos)
    found = (right_key[pos] == left_key) & (left_id >= 0)
    return np.where(found, order[pos], -1), repeated


DIRECT_RANGE = 1 << 20  # widest value range coded through a lookup table (8 MiB) rather than a hash


def dense_codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A code 0..k-1 per row for its value among the k distinct ``values``, and those values (sorted).

    The columns coded here (processes, devices, streams, string ids) are mostly constant or narrow
    integers: those take one pass through a lookup table instead of a hash per row.
    """
    values = np.asarray(values, np.int64)
    if not len(values):
        return np.zeros(0, np.int64), values
    low, high = int(values.min()), int(values.max())
    if low == high:
        return np.zeros(len(values), np.int64), np.array([low], np.int64)
    if high - low >= DIRECT_RANGE:
        codes, uniques = pd.factorize(values, sort=True)
        return codes.astype(np.int64, copy=False), np.asarray(uniques, np.int64)
    offset = values - low
    present = np.zeros(high - low + 1, bool)
    present[offset] = True
    code_of_offset = np.cumsum(present) - 1
    return code_of_offset[offset], np.flatnonzero(present) + low


def codes_in(values: np.ndarray, uniques: np.ndarray) -> np.ndarray:
    """The position of each of ``values`` in the sorted ``uniques``, or -1 where it is not there."""
    values = np.asarray(values, np.int64)
    if len(uniques) <= 1:
        return np.where(values == uniques[0], 0, -1) if len(uniques) else np.full(len(values), -1, np.int64)
    pos = np.minimum(np.searchsorted(uniques, values), len(uniques) - 1)
    return np.where(uniques[pos] == values, pos, -1)


def _pack(codes: np.ndarray, ids: np.ndarray, low: int, id_bits: int) -> np.ndarray:
    """(group code, id - low) in one int64, built in place in the codes' own array."""
    key = np.asarray(codes, np.int64)
    key <<= id_bits
    key += ids
    key -= low
    return key


def _match_by_hash(
    left_group: np.ndarray, left_id: np.ndarray, right_group: np.ndarray, right_id: np.ndarray
) -> np.ndarray:
    right = pd.DataFrame({"group": right_group, "id": right_id, "row": np.arange(len(right_id))})
    right = right.drop_duplicates(["group", "id"])
    index = pd.MultiIndex.from_arrays([right["group"], right["id"]])
    position = index.get_indexer(pd.MultiIndex.from_arrays([left_group, left_id]))
    rows = right["row"].to_numpy()
    return np.where((position >= 0) & (left_id >= 0), rows[np.maximum(position, 0)], -1)


def take_matched(values: np.ndarray, rows: np.ndarray, missing: int | np.ndarray = -1) -> np.ndarray:
    """``values[rows]`` where a row was matched (``rows >= 0``), else ``missing``."""
    values = np.asarray(values)
    if not len(values):
        return np.broadcast_to(np.asarray(missing, values.dtype), rows.shape).copy()
    return np.where(rows >= 0, values[np.maximum(rows, 0)], missing)
