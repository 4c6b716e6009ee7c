"""The machine-readable result (schema ``nsync.analysis/1``)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nsync.analysis import Analysis

NS_PER_MS = 1e6


def ns_to_ms(value_ns: float | None) -> float | None:
    if value_ns is None or (isinstance(value_ns, float) and math.isnan(value_ns)):
        return None
    return round(float(value_ns) / NS_PER_MS, 6)


def fixed(value: float | None, digits: int = 3) -> str:
    """A figure as text for the human-facing renderers: fixed decimals, '-' where there is none."""
    return "-" if value is None else f"{value:.{digits}f}"


def _num(value: float) -> float | None:
    return None if value is None or math.isnan(float(value)) else round(float(value), 4)


def _pct(part: float, whole: float) -> float | None:
    return round(100 * part / whole, 2) if whole else None


def analysis_to_dict(analysis: Analysis, top: int | None = None) -> dict[str, Any]:
    from nsync.analysis import SCHEMA

    totals = analysis.totals
    steps = analysis.steps
    stats = analysis.step_stats
    durations = stats["duration_ns"] if len(stats) else None
    gpu_durations = stats["gpu_duration_ns"].dropna() if len(stats) else None
    gpu_idle = totals["gpu_idle_ns"]
    sites = analysis.callsites if top is None else analysis.callsites.head(top)
    return {
        "schema": SCHEMA,
        "status": analysis.status,
        "trace": {
            "path": analysis.trace_path,
            "nsys_version": analysis.nsys_version,
            "export_schema_version": analysis.schema_version,
            "gpus": analysis.gpus,
        },
        "steps": {
            "count": steps.count,
            "median_ms": ns_to_ms(float(durations.median())) if durations is not None else None,
            "gpu_median_ms": ns_to_ms(float(gpu_durations.median()))
            if gpu_durations is not None and len(gpu_durations)
            else None,
            "source": steps.source,
            "total": len(steps.table),
            "warmup_skipped": steps.warmup,
            "set_aside": steps.set_aside,
        },
        "window": {"start_ns": analysis.window_ns[0], "end_ns": analysis.window_ns[1]},
        "totals": {
            "span_ms": ns_to_ms(totals["span_ns"]),
            "gpu_count": totals["gpu_count"],
            "gpu_idle_ms": ns_to_ms(gpu_idle),
            "gpu_busy_ms": ns_to_ms(totals["gpu_busy_ns"]),
            "gpu_idle_pct": _pct(gpu_idle, totals["span_ns"] * totals["gpu_count"]),
            "per_gpu": [
                {
                    "device_id": gpu["device_id"],
                    "name": gpu["name"],
                    "idle_ms": ns_to_ms(gpu["idle_ns"]),
                    "idle_pct": _pct(gpu["idle_ns"], totals["span_ns"]),
                }
                for gpu in totals["per_gpu"]
            ],
            "exposed_idle_ms": ns_to_ms(totals["exposed_idle_ns"]),
            "host_wait_ms": ns_to_ms(totals["host_wait_ns"]),
            "sync_count": totals["sync_count"],
            "syncs_outside_window": totals.get("syncs_outside_window", 0),
            "predicted_step_ms_without_syncs": ns_to_ms(analysis.what_if.without_syncs_step_ns)
            if analysis.what_if
            else None,
        },
        "verdict": _verdict(analysis),
        "phases": _phases(analysis),
        "callsites": [_callsite(row, gpu_idle) for row in sites.to_dict("records")],
        "outside_main_loop": [
            {
                "phase": row["phase"],
                **_frames(row),
                "count": int(row["count"]),
                "host_wait_ms": ns_to_ms(row["host_wait_ns"]),
            }
            for row in analysis.phase_sites.to_dict("records")
        ],
        "what_if": _what_if(analysis),
        "warnings": list(analysis.warnings),
        "config": asdict(analysis.config),
    }


def _verdict(analysis: Analysis) -> dict[str, Any] | None:
    verdict = analysis.verdict
    if verdict is None:
        return None
    return {
        "text": verdict.text,
        "worth_fixing": verdict.worth_fixing,
        "largest_saving_ms_per_step": ns_to_ms(verdict.largest_saving_ns),
        "share_pct": round(100 * verdict.share, 2),
        "site": verdict.site,
        "all_syncs_together": verdict.together,
        "threshold_pct": round(100 * analysis.config.worth_fixing_share, 2),
    }


def _phases(analysis: Analysis) -> list[dict[str, Any]]:
    gpus = max(analysis.totals["gpu_count"], 1)
    return [
        {
            "phase": row["phase"],
            "start_ns": int(row["start"]),
            "end_ns": int(row["end"]),
            "duration_ms": ns_to_ms(row["duration_ns"]),
            "intervals": int(row["intervals"]),
            "gpu_idle_ms": ns_to_ms(row["gpu_idle_ns"]),
            "gpu_idle_pct": _pct(row["gpu_idle_ns"], row["duration_ns"] * gpus),
            "sync_count": int(row["sync_count"]),
            "host_wait_ms": ns_to_ms(row["host_wait_ns"]),
        }
        for row in analysis.phases.to_dict("records")
    ]


def _frames(row: dict[str, Any]) -> dict[str, Any]:
    """A call site's two frames: the user's line, and where the sync is issued."""
    return {
        "file": row["file"],
        "line": int(row["line"]),
        "function": row["function"],
        "sync_frame": {"file": row["sync_file"], "line": int(row["sync_line"]), "function": row["sync_function"]},
    }


def _what_if(analysis: Analysis) -> dict[str, Any] | None:
    predicted = analysis.what_if
    if predicted is None:
        return None
    return {
        "replayed_step_ms": ns_to_ms(predicted.replayed_step_ns),
        "unprofiled_step_ms": ns_to_ms(predicted.unprofiled_step_ns),
        "host_scale": round(predicted.host_scale, 4),
        "calibrated": predicted.calibrated,
        "calibrated_step_ms": None if predicted.calibrated_step_ns is None else ns_to_ms(predicted.calibrated_step_ns),
        "predicted_step_ms_without_syncs": ns_to_ms(predicted.without_syncs_step_ns),
        "launch_latency_us": round(predicted.latency_ns / 1e3, 3),
        "replayed_steps": list(predicted.replayed_steps),
        "sites_left_out": predicted.sites_left_out,
        "note": predicted.note,
    }


def _callsite(row: dict[str, Any], gpu_idle_ns: int) -> dict[str, Any]:
    return {
        **_frames(row),
        "count": int(row["count"]),
        "syncs_per_step": _num(row["syncs_per_step"]),
        "executions_per_step": _num(row["executions_per_step"]),
        "exposed_idle_ms": ns_to_ms(row["exposed_idle_ns"]),
        "exposed_idle_ms_per_step": ns_to_ms(row["exposed_idle_ns_per_step"]),
        "host_wait_ms": ns_to_ms(row["host_wait_ns"]),
        "host_wait_ms_per_step": ns_to_ms(row["host_wait_ns_per_step"]),
        "lead_before_ms_mean": ns_to_ms(row["lead_before_ns_mean"]),
        "share_of_gpu_idle": _num(row["exposed_idle_ns"] / gpu_idle_ns) if gpu_idle_ns else None,
        "apis": list(row["apis"]),
        "kinds": list(row["kinds"]),
        "copy_directions": list(row["copy_directions"]),
        "stack": [{"function": f.function, "file": f.file, "line": f.line} for f in row["stack"]],
        "predicted_saving_ms_per_step": ns_to_ms(row.get("predicted_saving_ns_per_step")),
        "callsite_source": row["callsite_source"],
        "short_hint": row["short_hint"],
        "hint": row["hint"],
    }


def render_json(analysis: Analysis, top: int | None = None) -> str:
    return json.dumps(analysis_to_dict(analysis, top), indent=2, allow_nan=False) + "\n"
