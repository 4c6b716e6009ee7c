"""Write synthetic nsys SQLite exports with nsys's own DDL, so tests know the true answer by construction.

Times are given in microseconds and stored in nanoseconds. Every row a real export would have for the
modelled calls is written: the API row (eventClass 0 runtime / 1 driver) with a versioned name, its GPU
row with the same correlationId and process, SYNCHRONIZATION rows for stream/event syncs, CUDA_EVENT rows
for records, and for a Python backtrace the eventClass 67 twin plus the NVTX mark carrying the frames.
"""

from __future__ import annotations

import sqlite3
import struct
from dataclasses import dataclass, field
from pathlib import Path

import sqlite_utils

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SCHEMAS = {"2022.4": ("nsys-2022.4.sql", "2022.4.2.1", "3.0.0"), "2025.3": ("nsys-2025.3.sql", "2025.3.2.0", "3.20.3")}
US = 1000
PY_DOMAIN = 1
PY_SAMPLING_DOMAIN = 2
INVALID = 0xFFFFFFFF
PAGEABLE, PINNED, DEVICE = 0, 1, 2
HTOD, DTOH, DTOD = 1, 2, 8


def ns(us: float) -> int:
    return round(us * US)


@dataclass
class TraceBuilder:
    schema: str = "2025.3"
    pid: int = 100
    rows: dict[str, list[dict[str, object]]] = field(default_factory=dict)
    strings: dict[str, int] = field(default_factory=dict)
    next_corr: int = 1
    next_chain: int = 0

    # identifiers -----------------------------------------------------------------------------------------
    def gpid(self, pid: int | None = None) -> int:
        return (1 << 48) | ((self.pid if pid is None else pid) << 24)

    def gtid(self, tid: int, pid: int | None = None) -> int:
        return self.gpid(pid) | tid

    def string(self, value: str) -> int:
        if value not in self.strings:
            self.strings[value] = len(self.strings) + 1
        return self.strings[value]

    def _add(self, table: str, **row: object) -> None:
        self.rows.setdefault(table, []).append(row)

    # host side -------------------------------------------------------------------------------------------
    def api(
        self,
        tid: int,
        name: str,
        start_us: float,
        end_us: float,
        pid: int | None = None,
        event_class: int | None = None,
    ) -> int:
        """One CUDA API call; returns its correlationId. Driver names (cu*) get eventClass 1."""
        corr = self.next_corr
        self.next_corr += 1
        if event_class is None:
            event_class = 1 if name.startswith("cu") and not name.startswith("cuda") else 0
        self._add(
            "CUPTI_ACTIVITY_KIND_RUNTIME",
            start=ns(start_us),
            end=ns(end_us),
            eventClass=event_class,
            globalTid=self.gtid(tid, pid),
            correlationId=corr,
            nameId=self.string(name),
            returnValue=0,
            callchainId=None,
        )
        return corr

    def kernel(
        self,
        tid: int,
        launch_us: float,
        gpu_start_us: float,
        gpu_end_us: float,
        stream: int = 7,
        device: int = 0,
        name: str = "kernel",
        pid: int | None = None,
        launch_cost_us: float = 4,
    ) -> int:
        corr = self.api(tid, "cudaLaunchKernel_v7000", launch_us, launch_us + launch_cost_us, pid)
        self._add(
            "CUPTI_ACTIVITY_KIND_KERNEL",
            **self._gpu(gpu_start_us, gpu_end_us, device, stream, corr, pid),
            demangledName=self.string(name),
            shortName=self.string(name),
            mangledName=None,
            launchType=0,
            cacheConfig=0,
            registersPerThread=32,
            gridX=1,
            gridY=1,
            gridZ=1,
            blockX=1,
            blockY=1,
            blockZ=1,
            staticSharedMemory=0,
            dynamicSharedMemory=0,
            localMemoryPerThread=0,
            localMemoryTotal=0,
            gridId=corr,
            sharedMemoryExecuted=0,
            graphNodeId=None,
            sharedMemoryLimitConfig=None,
        )
        return corr

    def memcpy(
        self,
        tid: int,
        name: str,
        start_us: float,
        end_us: float,
        gpu_start_us: float,
        gpu_end_us: float,
        copy_kind: int,
        src_kind: int,
        dst_kind: int,
        nbytes: int = 4,
        stream: int = 7,
        device: int = 0,
        pid: int | None = None,
    ) -> int:
        corr = self.api(tid, name, start_us, end_us, pid)
        self._add(
            "CUPTI_ACTIVITY_KIND_MEMCPY",
            **self._gpu(gpu_start_us, gpu_end_us, device, stream, corr, pid),
            bytes=nbytes,
            copyKind=copy_kind,
            deprecatedSrcId=None,
            srcKind=src_kind,
            dstKind=dst_kind,
            srcDeviceId=None,
            srcContextId=None,
            dstDeviceId=None,
            dstContextId=None,
            migrationCause=None,
            graphNodeId=None,
            virtualAddress=None,
        )
        return corr

    def memset(
        self,
        tid: int,
        name: str,
        start_us: float,
        end_us: float,
        gpu_start_us: float,
        gpu_end_us: float,
        mem_kind: int,
        stream: int = 7,
        device: int = 0,
        pid: int | None = None,
    ) -> int:
        corr = self.api(tid, name, start_us, end_us, pid)
        self._add(
            "CUPTI_ACTIVITY_KIND_MEMSET",
            **self._gpu(gpu_start_us, gpu_end_us, device, stream, corr, pid),
            value=0,
            bytes=4,
            graphNodeId=None,
            memKind=mem_kind,
        )
        return corr

    def stream_sync(
        self,
        tid: int,
        start_us: float,
        end_us: float,
        stream: int = 7,
        device: int = 0,
        name: str = "cudaStreamSynchronize_v3020",
        pid: int | None = None,
    ) -> int:
        corr = self.api(tid, name, start_us, end_us, pid)
        self._sync_row(start_us, end_us, device, stream, corr, pid, sync_type=3, event_id=INVALID)
        return corr

    def event_record(
        self, tid: int, at_us: float, event_id: int, stream: int = 7, device: int = 0, pid: int | None = None
    ) -> int:
        corr = self.api(tid, "cudaEventRecord_v3020", at_us, at_us + 2, pid)
        row = {
            "deviceId": device,
            "contextId": 1,
            "streamId": stream,
            "correlationId": corr,
            "globalPid": self.gpid(pid),
            "eventId": event_id,
        }
        if self.schema != "2022.4":
            row |= {"greenContextId": None, "eventSyncId": event_id}
        self._add("CUPTI_ACTIVITY_KIND_CUDA_EVENT", **row)
        return corr

    def event_sync(
        self, tid: int, start_us: float, end_us: float, event_id: int, device: int = 0, pid: int | None = None
    ) -> int:
        corr = self.api(tid, "cudaEventSynchronize_v3020", start_us, end_us, pid)
        self._sync_row(start_us, end_us, device, INVALID, corr, pid, sync_type=1, event_id=event_id)
        return corr

    def _sync_row(
        self,
        start_us: float,
        end_us: float,
        device: int,
        stream: int,
        corr: int,
        pid: int | None,
        sync_type: int,
        event_id: int,
    ) -> None:
        row = {
            "start": ns(start_us) + 500,
            "end": ns(end_us) - 500,
            "deviceId": device,
            "contextId": 1,
            "streamId": stream,
            "correlationId": corr,
            "globalPid": self.gpid(pid),
            "syncType": sync_type,
            "eventId": event_id,
        }
        if self.schema != "2022.4":  # schema 3.17: syncType renumbered, deprecatedSyncType + eventSyncId added
            row |= {
                "greenContextId": None,
                "deprecatedSyncType": None,
                "syncType": {3: 2, 1: 1}[sync_type],
                "eventSyncId": event_id if sync_type == 1 else INVALID,
            }
        self._add("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", **row)

    def _gpu(
        self, start_us: float, end_us: float, device: int, stream: int, corr: int, pid: int | None
    ) -> dict[str, object]:
        row: dict[str, object] = {
            "start": ns(start_us),
            "end": ns(end_us),
            "deviceId": device,
            "contextId": 1,
            "streamId": stream,
            "correlationId": corr,
            "globalPid": self.gpid(pid),
        }
        if self.schema != "2022.4":
            row["greenContextId"] = None
        return row

    # NVTX and stacks -----------------------------------------------------------------------------------------
    def nvtx_range(self, tid: int, name: str, start_us: float, end_us: float, pid: int | None = None) -> None:
        self._add(
            "NVTX_EVENTS",
            start=ns(start_us),
            end=ns(end_us),
            eventType=59,
            text=name,
            globalTid=self.gtid(tid, pid),
            domainId=0,
        )

    def python_stack(self, tid: int, corr: int, frames: list[tuple[str, str, int]], pid: int | None = None) -> None:
        """Attach a Python backtrace (innermost first) to call ``corr``: twin row + NVTX mark with the blob."""
        call = next(
            r
            for r in self.rows["CUPTI_ACTIVITY_KIND_RUNTIME"]
            if r["correlationId"] == corr and r["globalTid"] == self.gtid(tid, pid)
        )
        name = str(next(k for k, v in self.strings.items() if v == call["nameId"])).split("_v")[0]
        twin_start = int(call["start"]) - 300  # type: ignore[call-overload]
        self._add(
            "CUPTI_ACTIVITY_KIND_RUNTIME",
            start=twin_start,
            end=int(call["end"]) + 300,  # type: ignore[call-overload]
            eventClass=67,
            globalTid=call["globalTid"],
            correlationId=corr,
            nameId=self.string(name),
            returnValue=0,
            callchainId=self._native_chain([("cudaStreamSynchronize", "libcudart.so.13")]),
        )
        self._py_domain(tid, pid, PY_DOMAIN, "Python Backtrace on CUDA")
        self._add(
            "NVTX_EVENTS",
            start=twin_start,
            end=None,
            eventType=34,
            globalTid=self.gtid(tid, pid),
            domainId=PY_DOMAIN,
            binaryData=self.frames_blob(frames),
        )

    def native_stack(self, tid: int, corr: int, frames: list[tuple[str, str]], pid: int | None = None) -> None:
        """Attach a native CUDA backtrace (symbol, module; innermost first) to call ``corr``."""
        call = next(
            r
            for r in self.rows["CUPTI_ACTIVITY_KIND_RUNTIME"]
            if r["correlationId"] == corr and r["globalTid"] == self.gtid(tid, pid)
        )
        self._add(
            "CUPTI_ACTIVITY_KIND_RUNTIME",
            start=int(call["start"]) - 300,
            end=int(call["end"]) + 300,  # type: ignore[call-overload]
            eventClass=67,
            globalTid=call["globalTid"],
            correlationId=corr,
            nameId=call["nameId"],
            returnValue=0,
            callchainId=self._native_chain(frames),
        )

    def python_sample(self, tid: int, at_us: float, frames: list[tuple[str, str, int]], pid: int | None = None) -> None:
        self._py_domain(tid, pid, PY_SAMPLING_DOMAIN, "Python Periodic Sampling")
        self._add(
            "NVTX_EVENTS",
            start=ns(at_us),
            end=None,
            eventType=34,
            globalTid=self.gtid(tid, pid),
            domainId=PY_SAMPLING_DOMAIN,
            binaryData=self.frames_blob(frames),
        )

    def _py_domain(self, tid: int, pid: int | None, domain: int, name: str) -> None:
        existing = self.rows.get("NVTX_EVENTS", [])
        if not any(
            r["eventType"] == 75 and r["domainId"] == domain and r["globalTid"] == self.gtid(tid, pid) for r in existing
        ):
            self._add(
                "NVTX_EVENTS",
                start=0,
                end=None,
                eventType=75,
                text=name,
                globalTid=self.gtid(tid, pid),
                domainId=domain,
            )

    def _native_chain(self, frames: list[tuple[str, str]]) -> int:
        chain = self.next_chain
        self.next_chain += 1
        for depth, (symbol, module) in enumerate(frames):
            self._add(
                "CUDA_CALLCHAINS",
                id=chain,
                symbol=self.string(symbol),
                module=self.string(module),
                unresolved=None,
                originalIP=None,
                stackDepth=depth,
            )
        return chain

    def frames_blob(self, frames: list[tuple[str, str, int]]) -> bytes:
        """The NVTX extended payload layout nsys 2025.x exports (docs/nsys-sqlite.md §2.9)."""
        payload = struct.pack("<QII", 1, 1, len(frames)) + b"".join(
            struct.pack("<QQi4x", self.string(fn), self.string(path), line) for fn, path, line in frames
        )
        return struct.pack("<Q", 1) + struct.pack("<QQQ", 4294967301, len(payload), 32) + payload

    def thread_name(self, tid: int, name: str, pid: int | None = None) -> None:
        self._add("ThreadNames", nameId=self.string(name), priority=0, globalTid=self.gtid(tid, pid))

    def profiler_overhead(self, tid: int, start_us: float, end_us: float, pid: int | None = None) -> None:
        self._add(
            "PROFILER_OVERHEAD",
            start=ns(start_us),
            end=ns(end_us),
            globalTid=self.gtid(tid, pid),
            nameId=self.string("CUDA profiling overhead"),
            returnValue=0,
        )

    # output ----------------------------------------------------------------------------------------------
    def write(self, path: Path, tables: tuple[str, ...] | None = None) -> Path:
        """Write the export. ``tables``: create only these (others absent, like a lazy export)."""
        ddl_file, version, schema = SCHEMAS[self.schema]
        if self.schema == "2022.4":
            assert not any(r.get("binaryData") for r in self.rows.get("NVTX_EVENTS", [])), "no blobs before 3.13"
        conn = sqlite3.connect(path)
        conn.executescript((FIXTURES / "schema" / ddl_file).read_text())
        db = sqlite_utils.Database(conn)
        meta = "EXPORT_META_DATA" if self.schema == "2022.4" else "META_DATA_EXPORT"
        db[meta].insert_all(
            [{"name": "EXPORT_PRODUCT_VERSION", "value": version}, {"name": "EXPORT_SCHEMA_VERSION", "value": schema}]
        )
        db["StringIds"].insert_all([{"id": i, "value": v} for v, i in self.strings.items()])
        gpus = {r["deviceId"] for t in ("CUPTI_ACTIVITY_KIND_KERNEL",) for r in self.rows.get(t, [])}
        db["TARGET_INFO_GPU"].insert_all([{"vmId": 0, "id": d, "name": "Synthetic GPU"} for d in sorted(gpus)])
        for table, rows in self.rows.items():
            db[table].insert_all(rows)
        for table in db.table_names():
            if tables is not None and table not in tables and table != "StringIds" and table != meta:
                db[table].drop()
        conn.commit()
        conn.close()
        return path
