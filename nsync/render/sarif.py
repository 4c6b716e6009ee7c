"""SARIF 2.1.0, the format code scanning reads (GitHub shows each result on its line of a pull request): one
result per finding (nsync.render.findings), the saving in its message and properties, the rewrite as its fix."""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from nsync.code import find_source
from nsync.render.findings import Finding, findings
from nsync.render.options import RenderOptions, refuse
from nsync.report import Analysis, Diff, Measurement, Ranks, Result
from nsync.report.fixes import Advice
from nsync.version import installed_version

SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
ROOT = "%SRCROOT%"  # the files' base: code scanning resolves it to the repository's root


@functools.singledispatch
def render_sarif(result: Result, options: RenderOptions = RenderOptions()) -> str:
    """``result`` as a SARIF 2.1.0 log (an analysis or a diff: their findings on the user's lines)."""
    raise TypeError(f"not an nsync result: {type(result).__name__}")


@render_sarif.register
def _analysis_sarif(result: Analysis, options: RenderOptions = RenderOptions()) -> str:
    return _log(findings(result, options), options.source_dirs)


@render_sarif.register
def _diff_sarif(result: Diff, options: RenderOptions = RenderOptions()) -> str:
    return _log(findings(result, options), options.source_dirs)


@render_sarif.register
def _ranks_sarif(result: Ranks, options: RenderOptions = RenderOptions()) -> str:
    refuse(result, "SARIF", "its JSON or Markdown (its lines are ranks', not one checkout's)")


@render_sarif.register
def _measurement_sarif(result: Measurement, options: RenderOptions = RenderOptions()) -> str:
    refuse(result, "SARIF", "its JSON, Markdown or the terminal summary (it names no line)")


def _log(found: list[Finding], source_dirs: tuple[Path, ...]) -> str:
    rules = sorted({f.rule for f in found})
    driver = {
        "name": "nsync",
        "version": installed_version(),
        "informationUri": "https://pypi.org/project/nsync-profiler/",
        "rules": [{"id": rule, "shortDescription": {"text": _rule_text(rule)}} for rule in rules],
    }
    results = [_result(f, rules.index(f.rule), source_dirs) for f in found]
    log = {"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [{"tool": {"driver": driver}, "results": results}]}
    return json.dumps(log, indent=2, allow_nan=False) + "\n"


def _rule_text(rule: str) -> str:
    pattern = rule.partition("/")[2].replace("-", " ")
    return f"A CUDA synchronization that makes the GPU wait ({pattern})" if pattern else "A CUDA synchronization"


def _result(found: Finding, index: int, source_dirs: tuple[Path, ...]) -> dict[str, Any]:
    where = uri(found.file, source_dirs)
    location = {"artifactLocation": _artifact(where), "region": {"startLine": found.line}}
    result: dict[str, Any] = {
        "ruleId": found.rule,
        "ruleIndex": index,
        "level": found.level,
        "message": {"text": found.message},
        "locations": [{"physicalLocation": location}],
        "partialFingerprints": {"nsyncSite/v1": f"{where}:{found.properties.get('function', '')}"},
        "properties": {k: v for k, v in found.properties.items() if v is not None},
    }
    if found.advice is not None:
        result["fixes"] = [_fix(found.advice, uri(found.advice.file or found.file, source_dirs))]
    return result


def _fix(advice: Advice, where: str) -> dict[str, Any]:
    """The rewrite as SARIF's replacements: lines first-last become the rewrite, the set-up inserted before its
    line (whole lines: a region without columns ends at its last line's end)."""
    replacements = [
        {
            "deletedRegion": {"startLine": advice.first_line, "endLine": advice.last_line},
            "insertedContent": {"text": advice.rewrite or ""},
        }
    ]
    if advice.setup and advice.setup_line > 0:
        at = {"startLine": advice.setup_line, "startColumn": 1, "endLine": advice.setup_line, "endColumn": 1}
        replacements.insert(0, {"deletedRegion": at, "insertedContent": {"text": advice.setup + "\n"}})
    change = {"artifactLocation": _artifact(where), "replacements": replacements}
    return {"description": {"text": f"{advice.change}: {advice.short}"}, "artifactChanges": [change]}


def _artifact(where: str) -> dict[str, str]:
    """A file's location: under the repository's root, or (not found here) the absolute URI the trace names."""
    return {"uri": where} if where.startswith("file:") else {"uri": where, "uriBaseId": ROOT}


def uri(file: str, source_dirs: tuple[Path, ...] = ()) -> str:
    """A traced file as a URI relative to the repository's root, which is the working directory (nsync runs from
    the checkout in CI): the path the trace names where it lies under it, else the file of that name found here
    (the working directory, ``source_dirs``: a capture made on another machine), else the traced path as a
    file URI."""
    here = Path(os.getcwd())
    for path in (Path(file), find_source(file, [here, *source_dirs])):
        if path is None:
            continue
        if not path.is_absolute():
            return quote(path.as_posix())
        if path.resolve().is_relative_to(here.resolve()):
            return quote(path.resolve().relative_to(here.resolve()).as_posix())
    return Path(file).as_uri() if Path(file).is_absolute() else quote(Path(file).as_posix())
