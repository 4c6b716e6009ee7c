"""What an export must hold for nsync's figures, so that a damaged or edited one never gives silent numbers.

Before reading: every column a reader needs must exist (a missing one is a one-line error naming it).
After reading: the tables must agree with each other. Kernel launches with no GPU activity at all, or GPU
activity with no CUDA calls, are errors; a part of them unmatched is a warning that names the figures it
skews. A trace whose end was cut by the capture's stop has a few launches without kernels, hence the
tolerance.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsync.errors import TraceError
from nsync.load.nsys.db import ExportDb
from nsync.load.nsys.readers import GPU_COMMON_COLUMNS, GPU_OP_TABLES, RUNTIME, UNNAMED
from nsync.notices import Notice

# table -> (columns every reader of it needs, what nsync reads from it)
REQUIRED_COLUMNS: dict[str, tuple[tuple[str, ...], str]] = {
    "StringIds": (("id", "value"), "names"),
    RUNTIME: (("start", "end", "eventClass", "globalTid", "correlationId", "nameId"), "CUDA calls and syncs"),
    **{table: (tuple(GPU_COMMON_COLUMNS.values()), "GPU activity") for table, _ in GPU_OP_TABLES},
    "NVTX_EVENTS": (("start", "end", "eventType", "globalTid"), "NVTX ranges (steps)"),
}
KERNEL_LAUNCH_PREFIXES = ("cudaLaunch", "cuLaunch")
MIN_CALLS = 10  # below this, a mismatch is too small to judge
TOLERATED_SHARE = 0.05  # launches without a kernel, or ops without a call, before a warning
OLDEST_SUPPORTED_SCHEMA = (3, 0)  # nsys 2022.4
NEWEST_KNOWN_SCHEMA = (3, 28)  # nsys 2026.4 (docs/nsys-sqlite.md §1.4)


def check_columns(db: ExportDb) -> None:
    """Raise TraceError naming the first table that lacks a column nsync reads."""
    for table, (columns, purpose) in REQUIRED_COLUMNS.items():
        if not db.has(table):
            continue
        missing = [column for column in columns if not db.has(table, column)]
        if missing:
            raise TraceError(
                f"{db.name}: table {table} has no column {', '.join(missing)}, which nsync needs to read "
                f"{purpose} (a damaged or edited export?)"
            )


def check_devices_agree(sync_activity: pd.DataFrame, gpu_ops: pd.DataFrame) -> list[Notice]:
    """A warning when syncs wait on devices that ran no GPU work in the trace (device ids that match nothing
    between the tables): the GPU idle after them cannot be measured, and would read 0."""
    if not len(sync_activity) or not len(gpu_ops):
        return []
    worked = pd.MultiIndex.from_arrays([gpu_ops["global_pid"], gpu_ops["device_id"]]).unique()
    waited = pd.MultiIndex.from_arrays([sync_activity["global_pid"], sync_activity["device_id"]])
    unknown = int((~waited.isin(worked)).sum())
    if not unknown:
        return []
    devices = sorted({int(d) for d in sync_activity["device_id"][~waited.isin(worked)]})
    return [
        Notice(
            "devices-disagree",
            f"{unknown} of {len(sync_activity)} syncs wait on a device with no GPU work in the trace (device id "
            f"{', '.join(map(str, devices[:5]))}): the exposed idle after them cannot be measured and reads 0.",
        )
    ]


def check_metadata(meta: dict[str, str], schema_version: str | None) -> list[Notice]:
    """Warnings for exports outside the range nsync supports (no metadata at all: older than 2020)."""
    if not meta:
        return [
            _version(
                "this export has no metadata table (META_DATA_EXPORT or EXPORT_META_DATA): its nsys version is "
                "unknown and may be older than the oldest nsync supports (2022.4, schema 3.0); figures may be wrong."
            )
        ]
    try:
        major_minor = tuple(int(part) for part in (schema_version or "").split(".")[:2])
    except ValueError:
        return [_version(f"export schema version {schema_version!r} cannot be read: figures may be wrong.")]
    if major_minor > NEWEST_KNOWN_SCHEMA:
        return [
            _version(
                f"export schema {schema_version} is newer than nsync has been checked against "
                f"({NEWEST_KNOWN_SCHEMA[0]}.{NEWEST_KNOWN_SCHEMA[1]}); results may be incomplete."
            )
        ]
    if major_minor < OLDEST_SUPPORTED_SCHEMA:
        return [
            _version(
                f"export schema {schema_version} is older than the oldest nsync supports (3.0, nsys 2022.4): "
                "figures may be wrong; export the report again with a newer nsys."
            )
        ]
    return []


def _version(message: str) -> Notice:
    return Notice("export-version", message)


def check_tables_agree(db: ExportDb, api: pd.DataFrame, gpu_ops: pd.DataFrame, launched_op: np.ndarray) -> list[Notice]:
    """Cross-check CUDA calls against GPU activity (``launched_op``: which calls launched some op, from the
    loader's join): an error when one side is missing altogether, a warning naming the affected figures
    when part of it is."""
    if len(gpu_ops) and not db.has(RUNTIME):
        raise TraceError(
            f"{db.name}: GPU activity but no CUDA API table ({RUNTIME}): syncs cannot be found "
            "(a damaged or edited export?)"
        )
    if len(gpu_ops) and not len(api):  # a table that is there but empty says no more than a missing one
        raise TraceError(
            f"{db.name}: GPU activity but no CUDA calls ({RUNTIME} is empty): syncs cannot be found "
            "(a damaged or edited export?)"
        )
    names = api["api"].cat
    unnamed_codes = [k for k, name in enumerate(names.categories) if str(name).startswith(UNNAMED)]
    unnamed = int(np.isin(names.codes.to_numpy(), unnamed_codes).sum()) if unnamed_codes else 0
    if len(api) and unnamed == len(api):
        raise TraceError(
            f"{db.name}: the string table (StringIds) holds none of the CUDA calls' names: syncs cannot be "
            "found (a damaged or edited export?)"
        )
    warnings: list[Notice] = []
    if unnamed:
        warnings.append(
            Notice(
                "tables-disagree",
                f"{unnamed} of {len(api)} CUDA calls have no name in the string table (StringIds): syncs among them "
                "are not found, so the syncs' figures may be missing some.",
            )
        )
    launch_codes = [k for k, name in enumerate(names.categories) if str(name).startswith(KERNEL_LAUNCH_PREFIXES)]
    is_launch = np.isin(names.codes.to_numpy(), launch_codes)
    launches = int(is_launch.sum())
    if launches >= MIN_CALLS:
        unmatched = int((is_launch & ~launched_op).sum())
        if unmatched == launches:
            raise TraceError(
                f"{db.name}: {launches} kernel launches but no GPU activity for any of them (is "
                "CUPTI_ACTIVITY_KIND_KERNEL missing?): GPU idle and exposed idle cannot be measured"
            )
        if unmatched > TOLERATED_SHARE * launches:
            warnings.append(
                Notice(
                    "tables-disagree",
                    f"{unmatched} of {launches} kernel launches have no kernel in the trace: GPU idle, exposed "
                    "idle and the what-if are overstated (a damaged export, or a capture cut short).",
                )
            )
    unlaunched = int((gpu_ops["launch_tid"].to_numpy() < 0).sum())
    if len(gpu_ops) >= MIN_CALLS and len(api) and unlaunched > TOLERATED_SHARE * len(gpu_ops):
        warnings.append(
            Notice(
                "tables-disagree",
                f"{unlaunched} of {len(gpu_ops)} GPU ops have no CUDA call that launched them: the host's lead "
                "and exposed idle are understated for them (nsys skips some APIs, or the export is damaged).",
            )
        )
    return warnings
