"""What a user installs: the wheel, in a fresh virtual environment, run from a folder outside the checkout.

An editable install (the suite's own) finds files in the source tree that a wheel may lack; this module
builds the wheel, installs it with its dependencies into a new environment, and runs the commands there,
with no path of the checkout in sight but the input traces.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.browser import load, needs_chromium
from tests.test_real_nsys import needs_nsys

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "fixtures" / "h200"
UV = shutil.which("uv", path=str(Path(sys.executable).parent))


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``bin`` folder of a fresh environment holding the freshly built wheel."""
    folder = tmp_path_factory.mktemp("wheel")
    shutil.rmtree(ROOT / "build", ignore_errors=True)  # no stale build/lib in the wheel
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(folder / "dist"), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = (folder / "dist").glob("nsync_profiler-*.whl")
    venv = folder / "venv"
    if UV:  # the same resolution as pip's, in seconds rather than a minute
        subprocess.run([UV, "venv", "-q", "--python", sys.executable, str(venv)], check=True, timeout=120)
        install = [UV, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), f"{wheel}[dask]"]
    else:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
        install = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", f"{wheel}[dask]"]
    subprocess.run(install, check=True, capture_output=True, timeout=600)
    return venv / "bin"


def nsync(bin_dir: Path, cwd: Path, *args: object) -> subprocess.CompletedProcess[str]:
    """The installed command, run from ``cwd`` with a plain environment (no PYTHONPATH, no checkout)."""
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(cwd), "COLUMNS": "200"}
    return subprocess.run(
        [str(bin_dir / "nsync"), *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    folder = tmp_path / "user"
    folder.mkdir()
    return folder


@pytest.mark.slow
def test_the_wheel_carries_the_package_templates_and_license() -> None:
    wheel_dir = ROOT / "build" / "wheel-check"
    shutil.rmtree(wheel_dir, ignore_errors=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheel_dir), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = wheel_dir.glob("nsync_profiler-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    shutil.rmtree(wheel_dir, ignore_errors=True)
    assert {
        "nsync/templates/__init__.py",
        "nsync/templates/report.html.j2",
        "nsync/templates/diff.html.j2",
        "nsync/capturing/inject/sitecustomize.py",
        "nsync/capturing/inject/_nsync_window.py",
        "nsync/capturing/inject/_nsync_kineto.py",
        "nsync/knowledge/libraries.json",
        "nsync/templates/charts.js.j2",
        "nsync/render/vendor/plotly-basic.min.js.gz",
        "nsync/render/vendor/LICENSE.plotly.js.txt",
    } <= set(names)
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert not any(n.startswith(("tests/", "fixtures/", "benchmarks/")) for n in names)


@pytest.mark.slow
def test_installed_analyze_writes_html_markdown_and_json(installed: Path, elsewhere: Path) -> None:
    result = nsync(
        installed, elsewhere, "analyze", TRACES / "print_deg.sqlite.xz", "--html", "r.html", "--markdown", "r.md",
        "--json", "r.json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "w_print.py:19" in result.stdout
    data = json.loads((elsewhere / "r.json").read_text())
    top = data["callsites"][0]
    assert (Path(top["file"]).name, top["line"], top["function"]) == ("w_print.py", 19, "step")
    assert "`w_print.py:19`" in (elsewhere / "r.md").read_text()
    page = (elsewhere / "r.html").read_text()
    assert 'id="ranking"' in page and "w_print.py" in page
    again = nsync(installed, elsewhere, "analyze", "--from", "r.json", "--html", "again.html")
    assert again.returncode == 0, again.stderr
    assert again.stdout == result.stdout
    generated = re.compile(r" on \d{4}-\d\d-\d\d \d\d:\d\d UTC\.")
    assert generated.sub("", (elsewhere / "again.html").read_text()) == generated.sub("", page)


@pytest.mark.slow
def test_installed_terminal_report_reads_at_80_columns_and_knows_its_version(installed: Path, elsewhere: Path) -> None:
    env = {"PATH": f"{installed}:/usr/bin:/bin", "HOME": str(elsewhere), "COLUMNS": "80"}
    done = subprocess.run(
        [str(installed / "nsync"), "analyze", str(TRACES / "print_deg.sqlite.xz")],
        cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert max(map(len, done.stdout.splitlines())) <= 80
    assert "#1 w_print.py:19  step  saving 0.438 ms/step" in done.stdout
    assert "print(y.sum())" in done.stdout  # the source line, read beside the trace
    version = nsync(installed, elsewhere, "--version")
    declared = re.search(r'^version = "(.+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert declared and version.stdout.strip() == f"nsync {declared.group(1)}"  # the distribution's metadata


@pytest.mark.slow
@needs_chromium
def test_installed_html_renders_in_a_browser(installed: Path, elsewhere: Path) -> None:
    assert nsync(installed, elsewhere, "analyze", TRACES / "print_deg.sqlite.xz", "--html", "r.html").returncode == 0
    dom, console = load(elsewhere / "r.html")
    assert "w_print.py:19" in dom and 'class="plot-container' in dom
    assert not [m for m in console if "Error" in m]


@pytest.mark.slow
def test_installed_diff_writes_html(installed: Path, elsewhere: Path) -> None:
    result = nsync(
        installed, elsewhere, "diff", TRACES / "print_ok.sqlite.xz", TRACES / "print_deg.sqlite.xz", "--html", "d.html"
    )
    assert result.returncode == 0, result.stderr
    assert "regression" in result.stdout
    page = (elsewhere / "d.html").read_text()
    assert "regression" in page and "w_print.py" in page


@pytest.mark.slow
@needs_nsys
def test_installed_profile_returns_the_programs_exit_code_with_every_output(installed: Path, elsewhere: Path) -> None:
    # the program runs with nsync's step-mark hook loaded from the installed package (it waits for torch.optim)
    (elsewhere / "job.py").write_text(
        "import sys, time\ntime.sleep(0.5)\n"
        "hooked = any(type(f).__name__ == '_AfterImport' for f in sys.meta_path)\n"
        "print('working', 'hooked' if hooked else 'not hooked')\nsys.exit(7)\n"
    )
    python = installed / "python"
    # (uncalibrated: its one run is the capture; calibrated, an exit 7 before any step stops the profile, issue 64)
    result = nsync(
        installed, elsewhere, "profile", "--python", python, "--no-calibrate", "--no-cpu-sampling", "--json", "r.json",
        "job.py",
    )  # fmt: skip
    assert result.returncode == 7, result.stderr
    assert "working hooked" in result.stdout
    assert "the program exited with code 7" in result.stderr
    out = elsewhere / "nsync-out"
    assert (out / "job.sqlite").is_file() and (out / "job.nsys-rep").is_file()
    assert "nsync report" in (out / "job.html").read_text()
    assert json.loads((elsewhere / "r.json").read_text())["status"] == "no-cuda"


@pytest.mark.slow
def test_installed_version_and_a_help_that_loads_no_pandas(installed: Path, elsewhere: Path) -> None:
    version = subprocess.run(
        [str(installed / "python"), "-c", "import importlib.metadata as m; print(m.version('nsync-profiler'))"],
        capture_output=True, text=True, check=True, cwd=elsewhere,
    ).stdout.strip()  # fmt: skip
    assert nsync(installed, elsewhere, "--version").stdout == f"nsync {version}\n"
    imports = subprocess.run(
        [str(installed / "python"), "-X", "importtime", "-m", "nsync", "--help"],
        capture_output=True, text=True, cwd=elsewhere, env={**os.environ, "PYTHONPATH": ""},
    )  # fmt: skip
    assert imports.returncode == 0 and "Usage" in imports.stdout
    loaded = {line.rsplit("|", 1)[-1].strip() for line in imports.stderr.splitlines()}
    assert "nsync.cli" in loaded and not {"pandas", "numpy", "plotly", "pyarrow"} & loaded


@pytest.mark.slow
def test_installed_ranks_run_on_dask(installed: Path, elsewhere: Path) -> None:
    from tests.test_ranks import rank_export

    rank_export(elsewhere / "rank0.sqlite", 0, late_us=0, other_late_us=300)
    rank_export(elsewhere / "rank1.sqlite", 1, late_us=300, other_late_us=0)
    done = nsync(installed, elsewhere, "ranks", ".", "--workers", "2", "--json", "ranks.json")
    assert done.returncode == 0, done.stderr
    assert json.loads((elsewhere / "ranks.json").read_text())["stragglers"][0]["where"] == "train.py:42"


@pytest.mark.slow
def test_installed_measure_times_two_programs_and_gates(installed: Path, elsewhere: Path) -> None:
    """nsync measure from the wheel: its sitecustomize times the stand-in torch's steps (the package beside the
    scripts), B's steps 25 % longer by construction: slower, and the gate exits 3; with one command, the
    program imports the installed nsync and its blocks of each version are told apart."""
    from tests.test_calibration import fake_torch
    from tests.test_measure import PROGRAM, STEADY

    fake_torch(elsewhere)
    (elsewhere / "train.py").write_text(PROGRAM)
    args = ("measure", "--python", installed / "python", "--runs", "2", "--warmup-steps", "2", "--steps", "10")
    done = nsync(installed, elsewhere, *args, "--json", "m.json", "--fail-on-regression", "5",
                 f"train.py 8 a {STEADY}", f"train.py 10 b {STEADY}")  # fmt: skip
    assert done.returncode == 3, done.stderr
    result = json.loads((elsewhere / "m.json").read_text())
    assert result["verdict"] == "slower" and result["change"]["pct"] == pytest.approx(25.0, abs=0.01)
    assert "B is slower than A: " in done.stdout
    # one command: the installed package's nsync.fixed() in the program, B's steps 10 % shorter by construction
    from tests.test_measure_switched import PROGRAM as SWITCHED

    (elsewhere / "switched.py").write_text(SWITCHED)
    done = nsync(
        installed,
        elsewhere,
        *args,
        "--steps",
        "20",
        "--block-steps",
        "5",
        "--json",
        "-",
        "switched.py 10 9 100 after 0 0",
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["verdict"] == "faster" and result["change"]["pct"] == pytest.approx(-10.0, abs=0.01)


@pytest.mark.slow
def test_installed_pipes_get_json_alone_and_quiet_the_verdict_alone(installed: Path, elsewhere: Path) -> None:
    """What a CI job reads: `--json -` is JSON from its first byte; `-q` is the verdict's line, nothing on stderr."""
    trace = TRACES / "print_deg.sqlite.xz"
    piped = nsync(installed, elsewhere, "analyze", trace, "--json", "-")
    assert piped.returncode == 0, piped.stderr
    assert json.loads(piped.stdout)["verdict"]["worth_fixing"] is True
    quiet = nsync(installed, elsewhere, "analyze", trace, "-q")
    assert quiet.returncode == 0 and quiet.stderr == ""
    assert quiet.stdout.startswith("verdict: fixing w_print.py:19 would save") and quiet.stdout.count("\n") == 1
    diff = nsync(installed, elsewhere, "diff", TRACES / "print_ok.sqlite.xz", trace, "-q")
    assert diff.returncode == 0 and diff.stderr == "" and diff.stdout.startswith("verdict: regression;")
    bare = nsync(installed, elsewhere)
    assert bare.returncode == 2 and bare.stdout == "" and bare.stderr.startswith("Usage: nsync COMMAND")
