"""Decode a torch.profiler (Kineto) Chrome-trace JSON into typed records (msgspec: no Python dict per event),
escaping the stray quotes some Kineto versions leave inside names (kineto #1459) before calling it damaged."""

from __future__ import annotations

import gzip
import re
import zlib
from pathlib import Path

import msgspec

from nsync.errors import TraceError
from nsync.load.files import GZIP_MAGIC

MAX_QUOTE_REPAIRS = 100  # stray quotes escaped before a trace is called damaged
_AT_BYTE = re.compile(r"\(byte (\d+)\)")


class Args(msgspec.Struct):
    correlation: int | None = None
    python_id: int | None = msgspec.field(default=None, name="Python id")
    python_parent_id: int | None = msgspec.field(default=None, name="Python parent id")
    device: int | None = None
    stream: int | None = None
    bytes: int | None = None
    name: str | None = None  # a metadata event's: the thread's or process's name
    # a cuda_sync event's (enable_cuda_sync_events): the awaited event, its record call and the stream it was on
    wait_on_cuda_event_id: int | None = None
    wait_on_cuda_event_record_corr_id: int | None = None
    wait_on_stream: int | None = None


class Event(msgspec.Struct):
    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: float = 0.0
    dur: float = 0.0
    args: Args | None = None


class Device(msgspec.Struct):
    id: int = 0
    name: str = ""


class File(msgspec.Struct):
    traceEvents: list[Event]
    deviceProperties: list[Device] = []
    schemaVersion: int | None = None


def decoded(path: Path) -> tuple[File, int]:
    """The trace's events, and how many stray quotes inside its strings were escaped to read it."""
    try:
        raw = path.read_bytes()
        if raw.startswith(GZIP_MAGIC):
            raw = gzip.decompress(raw)
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as err:
        raise TraceError(f"{path}: cannot read the trace ({err})") from err
    for repaired in range(MAX_QUOTE_REPAIRS + 1):
        trace, error = _decode(raw, path)
        if trace is not None:
            return trace, repaired
        quote = _stray_quote(raw, error)
        if quote is None:
            break
        raw = raw[:quote] + b"\\" + raw[quote:]
    raise TraceError(f"{path}: not valid JSON ({error})")


def _decode(raw: bytes, path: Path) -> tuple[File | None, str]:
    """The decoded trace, or None and the decoder's words where the JSON is malformed."""
    try:
        return msgspec.json.decode(raw, type=File), ""
    except msgspec.ValidationError as err:
        raise TraceError(
            f"{path}: JSON, but not a torch.profiler trace nsync can read ({err}); nor is it an nsys SQLite export"
        ) from err
    except msgspec.DecodeError as err:
        return None, str(err)


def _stray_quote(raw: bytes, error: str) -> int | None:
    """Where a string ended too early (``"name": "a "b" c"``, as Kineto writes a name holding a quote: kineto
    #1459): the quote just before the byte the decoder stopped at, when it stopped wanting a ``,`` or ``}``
    there. Where it wanted a ``:``, the name held ``", "`` (source text: ``Library("x", "IMPL")``) and what it
    read as a key is the name's too: the quote before that ``, `` is the stray one."""
    found = _AT_BYTE.search(error)
    if found is None or not ("expected ','" in error or "expected ':'" in error):
        return None
    before = raw[: int(found[1])].rstrip()
    if "expected ':'" in error:  # before ends with the key's closing quote: go back past the key and its comma
        key_open = before.rfind(b'"', 0, len(before) - 1)
        comma = raw[:key_open].rstrip()
        if key_open < 0 or not comma.endswith(b","):
            return None
        before = comma[:-1].rstrip()
    return len(before) - 1 if before.endswith(b'"') and not before.endswith(b'\\"') else None
