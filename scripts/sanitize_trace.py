"""Make a capture shareable (device-capture.md): drop the environment, rewrite capture-machine paths.

Usage: python scripts/sanitize_trace.py TRACE.sqlite CAPTURE_DIR [REPLACEMENT]  (edits TRACE in place)
"""

import sqlite3
import sys

path, capture_dir = sys.argv[1], sys.argv[2].rstrip("/")
replacement = sys.argv[3] if len(sys.argv) > 3 else "/home/user/proj"
conn = sqlite3.connect(path)
tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
if "TARGET_INFO_SYSTEM_ENV" in tables:
    conn.execute("DELETE FROM TARGET_INFO_SYSTEM_ENV")
if "META_DATA_CAPTURE" in tables:
    conn.execute("DELETE FROM META_DATA_CAPTURE WHERE name LIKE 'PROCESS_%:ENVIRONMENT%'")
conn.execute("UPDATE StringIds SET value = '' WHERE value LIKE '%PATH=%' OR value LIKE '%HOME=%'")
conn.execute("UPDATE StringIds SET value = replace(value, ?, ?)", (capture_dir, replacement))
for table in ("META_DATA_CAPTURE", "META_DATA_EXPORT"):
    if table in tables:  # names from this fixed list, not from the trace
        conn.execute(f"UPDATE {table} SET value = replace(value, ?, ?)", (capture_dir, replacement))
conn.commit()
conn.execute("VACUUM")
conn.close()
