"""Print what surrounds the byte where a torch.profiler trace stops being valid JSON (the offset msgspec names).

    python3 json-context.py TRACE.json.gz OFFSET
"""
import gzip
import sys

raw = gzip.open(sys.argv[1]).read()
at = int(sys.argv[2])
print(len(raw), repr(raw[max(0, at - 600) : at + 200]))
