"""Make a capture shareable (docs/device-capture.md): drop the environment, rewrite capture-machine paths.

Usage: python scripts/sanitize_trace.py TRACE.sqlite CAPTURE_DIR [REPLACEMENT] [--shrink] [--keep-until=NS]
(edits TRACE in place)

--shrink also empties the tables nsync never reads (CPU samples and their callchains, OS runtime calls,
scheduling), so that a long capture fits in a fixture; the tables themselves stay. It also drops the native
CUDA backtraces nsync never reads (it reads those of the calls that may sync and have no Python frames: about a
fifth of a fixture's size goes).
--keep-until=NS cuts the capture short: every CUDA call, GPU op and NVTX range that starts after NS (the
trace's own clock) goes, with the backtraces only they used. Say so wherever the fixture is described.
"""

import re
import sqlite3
import sys
from pathlib import Path

ENV_ENTRY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
ENV_VARIABLE = re.compile(r"[A-Z_][A-Z0-9_]*=\S")


def is_environment(value: object) -> bool:
    """An environment block ("OLDPWD=/x\\0CUDA_HOME=/usr/local/cuda\\0...") or one variable ("CUDA_HOME=/usr")."""
    if not isinstance(value, str):
        return False
    entries = value.split("\0")
    return bool(ENV_VARIABLE.match(value)) or (len(entries) > 1 and any(ENV_ENTRY.match(e) for e in entries))


UNREAD_TABLES = ("COMPOSITE_EVENTS", "SAMPLING_CALLCHAINS", "OSRT_API", "OSRT_CALLCHAINS", "SCHED_EVENTS")
TIMED_TABLES = (
    "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "NVTX_EVENTS",
)
shrink = "--shrink" in sys.argv
keep_until = next((int(a.split("=", 1)[1]) for a in sys.argv[1:] if a.startswith("--keep-until=")), None)
args = [a for a in sys.argv[1:] if a != "--shrink" and not a.startswith("--keep-until=")]
path, capture_dir = args[0], args[1].rstrip("/")
replacement = args[2] if len(args) > 2 else "/home/user/proj"
conn = sqlite3.connect(path)
tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
if "TARGET_INFO_SYSTEM_ENV" in tables:
    conn.execute("DELETE FROM TARGET_INFO_SYSTEM_ENV")
if "META_DATA_CAPTURE" in tables:
    conn.execute("DELETE FROM META_DATA_CAPTURE WHERE name LIKE 'PROCESS_%:ENVIRONMENT%'")
conn.execute("UPDATE StringIds SET value = '' WHERE value LIKE '%PATH=%' OR value LIKE '%HOME=%'")
# nsys keeps each process's environment as one NUL-separated string (SQLite's LIKE stops at the first NUL) and
# some variables alone: read in Python, blanked by id
environment = [(i,) for i, value in conn.execute("SELECT id, value FROM StringIds") if is_environment(value)]
conn.executemany("UPDATE StringIds SET value = '' WHERE id = ?", environment)
conn.execute("UPDATE StringIds SET value = replace(value, ?, ?)", (capture_dir, replacement))
for table in ("META_DATA_CAPTURE", "META_DATA_EXPORT"):
    if table in tables:  # names from this fixed list, not from the trace
        conn.execute(f"UPDATE {table} SET value = replace(value, ?, ?)", (capture_dir, replacement))
for table in UNREAD_TABLES if shrink else ():
    if table in tables:  # names from this fixed list, not from the trace
        conn.execute(f"DELETE FROM {table}")
for table in TIMED_TABLES if keep_until is not None else ():
    if table in tables:  # names from this fixed list, not from the trace
        conn.execute(f"DELETE FROM {table} WHERE start > ?", (keep_until,))
if keep_until is not None and "CUDA_CALLCHAINS" in tables:
    conn.execute(
        "DELETE FROM CUDA_CALLCHAINS WHERE id NOT IN "
        "(SELECT callchainId FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE callchainId IS NOT NULL)"
    )
conn.commit()
if shrink and "CUDA_CALLCHAINS" in tables:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from nsync.load import load_trace

    whole = load_trace(path, max_memory_bytes=1 << 62)  # all of it: never a part that fits in memory
    read = whole.callchains["callchain_id"].unique().tolist()
    conn.execute("CREATE TEMP TABLE read_chains (id INTEGER PRIMARY KEY)")
    conn.executemany("INSERT INTO read_chains VALUES (?)", [(int(chain),) for chain in read])
    conn.execute("DELETE FROM CUDA_CALLCHAINS WHERE id NOT IN (SELECT id FROM read_chains)")
    conn.commit()
conn.execute("VACUUM")
conn.close()
