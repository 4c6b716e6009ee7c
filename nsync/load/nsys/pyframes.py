"""Decode Python frames from NVTX extended payloads (``NVTX_EVENTS.binaryData``).

Layout (docs/nsys-sqlite.md §2.9, little-endian): ``u64 nPayloads``, then per payload
``u64 schemaId, u64 size, u64 offset``; at ``offset``: ``u64 threadStateId, u32 state, u32 nFrames``,
then 24-byte frames ``u64 functionStringId, u64 fileStringId, i32 line, 4 bytes padding``,
innermost first. Distinct blobs are decoded once each, however many calls share them.
"""

from __future__ import annotations

import html
import struct
from collections.abc import Iterable, Mapping

import numpy as np

from nsync.load.model import Frame, Stack, StackTable

MAX_FRAMES = 1024
_HEADER = struct.Struct("<Q")
_ENTRY = struct.Struct("<QQQ")
_STATE = struct.Struct("<QII")
_FRAME = struct.Struct("<QQi")


def decode_frames(blob: bytes, strings: Mapping[int, str]) -> Stack | None:
    """The frames of the first payload in ``blob``, or None when the blob is not in this layout."""
    try:
        (count,) = _HEADER.unpack_from(blob, 0)
        if count < 1:
            return None
        _schema, _size, offset = _ENTRY.unpack_from(blob, 8)
        if offset + _STATE.size > len(blob):  # (an offset past the blob, as large as 2**64 - 1 in a damaged one)
            return None
        _state_id, _state, nframes = _STATE.unpack_from(blob, offset)
        if nframes > MAX_FRAMES or offset + 16 + 24 * nframes > len(blob):
            return None
        frames = []
        for k in range(nframes):
            function_id, file_id, line = _FRAME.unpack_from(blob, offset + 16 + 24 * k)
            frames.append(Frame(_text(strings, function_id), _text(strings, file_id), int(line)))
    except struct.error:
        return None
    return tuple(frames)


def _text(strings: Mapping[int, str], string_id: int) -> str:
    value = strings.get(string_id)
    return "?" if value is None else html.unescape(str(value))


UNREADABLE = -2  # the stack id of a blob that is there but not in this layout (a damaged export)


def intern_blobs(table: StackTable, blobs: Iterable[object], strings: Mapping[int, str]) -> np.ndarray:
    """Stack ids in ``table`` for a column of blobs (-1 where a blob is missing, UNREADABLE where it cannot be
    decoded)."""
    by_blob: dict[bytes, int] = {}
    out = []
    for blob in blobs:
        if not isinstance(blob, bytes | bytearray):
            out.append(-1)
            continue
        key = bytes(blob)
        stack_id = by_blob.get(key)
        if stack_id is None:
            stack = decode_frames(key, strings)
            stack_id = by_blob[key] = -1 if stack == () else UNREADABLE if stack is None else table.intern(stack)
        out.append(stack_id)
    return np.asarray(out, dtype=np.int64)
