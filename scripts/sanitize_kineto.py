"""Sanitize (and, with --shrink, shrink) a torch.profiler trace before it is committed as a fixture.

    python3 scripts/sanitize_kineto.py IN.json[.gz] OUT.json.gz [--shrink]

Removed: the capture's file name (``traceName``), its id and clock (``trace_id``, ``baseTimeNanoseconds``), the
host name, and the addresses in C-function names (``object at 0x7f..``). --shrink also drops the event kinds
nsync does not read (``cpu_op``, ``ac2g`` flows, ``gpu_user_annotation``, ``overhead``), as the nsys fixtures'
--shrink drops tables.
"""

import gzip
import json
import re
import sys

UNREAD = {"cpu_op", "ac2g", "gpu_user_annotation", "overhead"}
ADDRESS = re.compile(r" at 0x[0-9a-f]+")

source, target = sys.argv[1], sys.argv[2]
raw = open(source, "rb").read()
data = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
for key in ("traceName", "trace_id", "baseTimeNanoseconds", "host_name"):
    data.pop(key, None)
events = data["traceEvents"]
if "--shrink" in sys.argv:
    events = [e for e in events if e.get("cat") not in UNREAD]
for event in events:
    if event.get("cat") == "python_function":
        event["name"] = ADDRESS.sub("", event["name"])
data["traceEvents"] = events
with gzip.open(target, "wt", compresslevel=9) as handle:
    json.dump(data, handle, separators=(",", ":"))
print(f"{target}: {len(events)} events")
