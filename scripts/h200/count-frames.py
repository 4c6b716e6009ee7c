"""What an export holds for nsync's call sites: NVTX events by domain and kind, how many carry a blob (the
Python backtraces), and CUDA runtime calls with a native backtrace. One line each (scripts/h200/nvtx-cost.sh)."""

import sqlite3
import sys

db = sqlite3.connect(sys.argv[1])
tables = {name for (name,) in db.execute("select name from sqlite_master where type = 'table'")}
if "NVTX_EVENTS" in tables:
    domains = dict(db.execute("select domainId, text from NVTX_EVENTS where eventType = 75"))
    for domain, kind, count, blobs in db.execute(
        "select domainId, eventType, count(*), count(binaryData) from NVTX_EVENTS group by 1, 2"
    ):
        print(f"nvtx domain={domains.get(domain, domain)!r} eventType={kind} rows={count} with_blob={blobs}")
else:
    print("no NVTX_EVENTS table")
runtime = db.execute("select count(*), count(callchainId) from CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()
print(f"runtime calls={runtime[0]} with_callchain={runtime[1]}")
