"""A real export with one change each: a one-line error (exit 1) or a warning that names what is missing and
the figures it affects; never a traceback or silent numbers (each case gave wrong figures or an internal
error before)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.test_cli import assert_one_line_error, run

KERNEL, RUNTIME = "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME"


@pytest.fixture
def edited(tmp_path: Path, h200: Callable[[str], Path]) -> Callable[..., Path]:
    def edit(*statements: str, name: str = "p4") -> Path:
        copy = tmp_path / f"{name}-edited.sqlite"
        shutil.copy(h200(name), copy)
        with sqlite3.connect(copy) as conn:
            for sql in statements:
                conn.execute(sql)
        return copy

    return edit


@pytest.mark.slow
@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (f"DROP TABLE {KERNEL}", "kernel launches but no GPU activity for any of them"),
        (f"DROP TABLE {RUNTIME}", f"GPU activity but no CUDA API table ({RUNTIME})"),
        (f"ALTER TABLE {RUNTIME} RENAME COLUMN correlationId TO corr", f"{RUNTIME} has no column correlationId"),
        (f"ALTER TABLE {RUNTIME} RENAME COLUMN globalTid TO tid", f"{RUNTIME} has no column globalTid"),
        (f"ALTER TABLE {RUNTIME} RENAME COLUMN nameId TO name", f"{RUNTIME} has no column nameId"),
        (f"ALTER TABLE {KERNEL} RENAME COLUMN deviceId TO device", f"{KERNEL} has no column deviceId"),
        (f"ALTER TABLE {KERNEL} RENAME COLUMN start TO begin", f"{KERNEL} has no column start"),
    ],
)
def test_a_missing_table_or_column_is_a_one_line_error(edited, change: str, fragment: str) -> None:
    result = run("analyze", edited(change), "--json", "-")
    assert_one_line_error(result, 1, fragment)
    assert result.stdout == ""


@pytest.mark.slow
def test_kernels_missing_for_part_of_the_launches_are_a_warning_naming_the_figures(edited) -> None:
    # every third kernel gone: 1/3 of the launches have no GPU activity
    data = json.loads(run("analyze", edited(f"DELETE FROM {KERNEL} WHERE rowid % 3 = 0"), "--json", "-").stdout)
    (warning,) = [w["message"] for w in data["warnings"] if "kernel launches have no kernel" in w["message"]]
    total = int(warning.split(" of ")[1].split()[0])
    assert int(warning.split()[0]) == pytest.approx(total / 3, abs=2)
    assert "GPU idle, exposed idle and the what-if are overstated" in warning


@pytest.mark.slow
def test_gpu_ops_without_their_calls_are_a_warning(edited) -> None:
    launches = "SELECT id FROM StringIds WHERE value LIKE 'cudaLaunchKernel%'"
    data = json.loads(
        run("analyze", edited(f"DELETE FROM {RUNTIME} WHERE nameId IN ({launches})"), "--json", "-").stdout
    )
    assert any("GPU ops have no CUDA call that launched them" in w["message"] for w in data["warnings"])


@pytest.mark.slow
def test_an_export_without_metadata_says_it_is_outside_the_supported_range(edited) -> None:
    result = run("analyze", edited("DROP TABLE META_DATA_EXPORT", "DROP TABLE META_DATA_CAPTURE"), "--json", "-")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert any(
        w["code"] == "export-version" and "no metadata table" in w["message"] and "2022.4" in w["message"]
        for w in data["warnings"]
    )


# TARGET_INFO_GPU as nsys 2020.5 wrote it (its CREATE statement from a real 2020.5 export's schema,
# fixtures/schema/nsys-2020.5.txt), filled from the export's own rows (its GPU's CUDA ordinal is its id here)
LEGACY_SCHEMA = (Path(__file__).resolve().parent.parent / "fixtures/schema/nsys-2020.5.txt").read_text()
LEGACY_GPU_TABLE = [
    next(line for line in LEGACY_SCHEMA.splitlines() if line.startswith("CREATE TABLE TARGET_INFO_GPU "))
    .replace("TARGET_INFO_GPU", "legacy")
    .rstrip(";"),
    "INSERT INTO legacy SELECT 281474976710656, id, name, '0000:02:00.0', 1 FROM TARGET_INFO_GPU",
    "DROP TABLE TARGET_INFO_GPU",
    "ALTER TABLE legacy RENAME TO TARGET_INFO_GPU",
    "DROP TABLE TARGET_INFO_CUDA_DEVICE",
]


@pytest.mark.slow
@pytest.mark.parametrize(
    "statements",
    [
        [  # nsys of early 2021: TARGET_INFO_CUDA_GPU keyed by deviceId
            "CREATE TABLE TARGET_INFO_CUDA_GPU (deviceId INTEGER, name TEXT)",
            "INSERT INTO TARGET_INFO_CUDA_GPU SELECT id, name FROM TARGET_INFO_GPU",
            "DROP TABLE TARGET_INFO_GPU",
        ],
        [  # CUDA_VISIBLE_DEVICES=3: CUDA device 0 is nsys's GPU 3
            "UPDATE TARGET_INFO_GPU SET id = 3",
            "UPDATE TARGET_INFO_CUDA_DEVICE SET gpuId = 3",
        ],
        [  # nsys 2020.5 (fixtures/schema/nsys-2020.5.txt): TARGET_INFO_GPU by deviceId, no id column
            *LEGACY_GPU_TABLE,
        ],
        [  # the same, its name NULL: the CUDA device's own table (by deviceId) names it
            *LEGACY_GPU_TABLE,
            "UPDATE TARGET_INFO_GPU SET name = NULL",
            "CREATE TABLE TARGET_INFO_CUDA_GPU (vmId INTEGER NOT NULL, name TEXT NOT NULL, deviceId INTEGER NOT NULL, "
            "pid INTEGER)",
            "INSERT INTO TARGET_INFO_CUDA_GPU SELECT vmId, 'NVIDIA H200', deviceId, 0 FROM TARGET_INFO_GPU",
        ],
    ],
    ids=["early-2021", "cuda-visible-devices", "2020.5", "2020.5-unnamed"],
)
def test_gpu_names_come_from_either_gpu_table(edited, statements: list[str]) -> None:
    data = json.loads(run("analyze", edited(*statements), "--json", "-").stdout)
    assert data["trace"]["gpus"] == ["NVIDIA H200"]


@pytest.mark.slow
def test_python_frames_with_an_impossible_frame_count_are_named_not_read_silently(tmp_path: Path, h200) -> None:
    """issue 47: a Python-frames blob (NVTX_EVENTS.binaryData) whose frame count is impossible was read as no
    frames, without a word. Every blob of a real H200 export gets 2**32 - 1 frames: each is named damaged."""
    import struct

    from nsync import analyze

    copy = tmp_path / "frames-damaged.sqlite"
    shutil.copy(h200("print_deg"), copy)
    with sqlite3.connect(copy) as conn:
        rows = conn.execute("SELECT rowid, binaryData FROM NVTX_EVENTS WHERE binaryData IS NOT NULL").fetchall()
        damaged = []
        for rowid, blob in rows:
            offset = struct.unpack_from("<Q", blob, 24)[0]  # the first payload's offset (after its count and id, size)
            blob = bytearray(blob)
            struct.pack_into("<I", blob, offset + 12, 0xFFFFFFFF)  # its frame count
            damaged.append((bytes(blob), rowid))
        conn.executemany("UPDATE NVTX_EVENTS SET binaryData = ? WHERE rowid = ?", damaged)
    assert len(damaged) > 100
    result = analyze(copy, calibration=None)
    (warning,) = [w for w in result.warnings if w.code == "damaged-frames"]
    assert warning.message.startswith(f"{len(damaged)} Python backtraces of the export cannot be read")
    assert all(site.callsite_source != "python-backtrace" for site in result.callsites)
