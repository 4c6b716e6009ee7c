"""The fix written from the code (nsync.stages.advice): each rewrite against the one known to be right by
construction (the lab scenarios' own healthy twins, and the rewrites of the articles nsync grew from, on small
programs written out here), and the rewrites nsync wrote for the lab scenarios against the ones measured on the
H200 (fixtures/h200/fixes: each patched scenario ran under the sync debug mode 'error' without a sync, at the
healthy twin's step time)."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from nsync.analysis import run_stages
from nsync.stages.advice import Advice, LineEdit, advise, advise_code, read_code, read_groups

ROOT = Path(__file__).resolve().parent.parent
LAB = ROOT / "fixtures/h200"


def _advice(tmp_path: Path, program: str, line: int) -> Advice:
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(program))
    code = read_code(str(path), line)
    assert code is not None
    return advise_code(code, str(path))


def _lab(script: str, line: int) -> Advice:
    path = LAB / script
    code = read_code(str(path), line)
    assert code is not None
    return advise_code(code, str(path))


def _healthy_line(script: str, marker: str) -> str:
    """The healthy twin's line of a scenario, found by its text (the scenario's own fix)."""
    return next(line for line in (LAB / script).read_text().splitlines() if marker in line).split("#")[0].rstrip()


def test_a_comprehension_of_norm_reads_becomes_one_foreach_norm_as_in_the_healthy_twin() -> None:
    """w_param's healthy twin: its 16 gradient norms by one torch._foreach_norm, stacked on the GPU."""
    advice = _lab("w_param.py", 19)
    assert (advice.pattern, advice.dependency) == ("value read", "false")
    assert advice.rewrite == _healthy_line("w_param.py", "torch._foreach_norm(")
    assert (advice.first_line, advice.last_line, advice.setup) == (19, 19, "")


def test_a_comprehension_of_other_reads_becomes_one_stacked_tensor(tmp_path: Path) -> None:
    advice = _advice(tmp_path, "import torch\ndef f(xs, log):\n    log.append([x.sum().item() for x in xs])\n", 3)
    assert advice.rewrite == "    log.append(torch.stack([x.sum() for x in xs]))"


def test_a_read_kept_in_a_list_is_kept_on_the_gpu_as_in_the_healthy_twin() -> None:
    advice = _lab("w_two.py", 19)
    assert advice.rewrite == _healthy_line("w_two.py", "losses.append(loss.detach())")
    assert "torch.stack(losses).tolist()" in advice.caveat


@pytest.mark.parametrize(
    ("line", "rewritten"),
    [
        ("stats.append(h.abs().mean().item())", "stats.append(h.abs().mean().detach())"),
        ("stats.append(h.detach().abs().mean().item())", "stats.append(h.detach().abs().mean())"),  # once is enough
        ("total += h.detach().sum().item()", "total += h.detach().sum()"),
    ],
)
def test_a_read_is_cut_from_autograd_once(tmp_path: Path, line: str, rewritten: str) -> None:
    advice = _advice(tmp_path, f"import torch\ndef f(h, stats, total):\n    {line}\n", 3)
    assert advice.rewrite == f"    {rewritten}"


def test_a_mask_whose_result_is_only_summed_becomes_torch_where_as_in_the_healthy_twin() -> None:
    advice = _lab("w_mask.py", 15)
    assert advice.rewrite == "        kept = torch.where(y > 0, y, 0)"
    healthy = _healthy_line("w_mask.py", "z = torch.where(y > 0, y, 0).sum()")
    assert healthy.strip() == "z = torch.where(y > 0, y, 0).sum()"  # the same values, then its sum (line 16)
    assert advice.dependency == "false"  # only the sum is used: the host never needed the count


def test_a_mask_whose_kept_entries_are_used_is_a_true_dependency_with_no_rewrite(tmp_path: Path) -> None:
    program = """
    import torch
    def step(y):
        kept = y[y > 0]
        return kept.sort().values
    """
    advice = _advice(tmp_path, program, 4)
    assert (advice.pattern, advice.dependency, advice.rewrite) == ("dynamic shape (a mask or nonzero)", "true", None)
    assert "torch.where(y > 0, y, 0)" in advice.caveat


def test_a_tuple_index_becomes_a_cuda_index_made_once_before_the_step_function() -> None:
    advice = _lab("w_tuple.py", 19)
    assert advice.rewrite == "        picked = y[:, picked_index]"
    assert advice.setup == 'picked_index = torch.tensor([0, 2, 3], device="cuda")'
    assert advice.setup_line == 13  # before `def step():`, at the top level, where `y` does not exist yet


def test_a_named_list_index_in_a_loop_gets_its_tensor_before_the_loop_on_the_indexed_tensors_device(
    tmp_path: Path,
) -> None:
    """The issue's example: SUM_COLS, a module constant; `local` exists before the loop."""
    program = """
    import torch
    SUM_COLS = [0, 2, 5]
    def train(local, batches):
        for batch in batches:
            sums = local[:, SUM_COLS].sum(dim=0)
    """
    advice = _advice(tmp_path, program, 6)
    assert advice.pattern == "index from a Python tuple or list"
    assert advice.rewrite == "        sums = local[:, SUM_COLS_T].sum(dim=0)"
    assert advice.setup == "    SUM_COLS_T = torch.tensor(SUM_COLS, device=local.device)"
    assert advice.setup_line == 5  # before the loop, at its indentation


def test_an_index_held_in_an_attribute_set_by_a_condition_is_an_index_made_where_it_is_set(tmp_path: Path) -> None:
    """Issue 43's example: `self.cols = ... if healthy else COLS`, used as `local[:, self.cols]` in forward."""
    program = """
    import torch
    COLS = (0, 2)
    class Head(torch.nn.Module):
        def __init__(self, healthy):
            super().__init__()
            self.cols = torch.tensor(COLS, device="cuda") if healthy else COLS
        def forward(self, local):
            return local[:, self.cols]
    """
    advice = _advice(tmp_path, program, 9)
    assert (advice.pattern, advice.dependency) == ("index from a Python tuple or list", "false")
    assert advice.rewrite is None and "make `self.cols` a CUDA tensor where it is set" in advice.caveat


@pytest.mark.parametrize(
    ("program", "line"),
    [
        ("import torch\ndef pick(x, cols=(1, 3)):\n    return x[:, cols]\n", 3),  # a parameter's default
        ("import torch\nA = [0, 1]\ndef pick(x, wide):\n    cols = [0, 1, 2] if wide else A\n    return x[cols]\n", 5),
        ("import torch\nclass M:\n    KEEP = (0, 4)\n    def f(self, x):\n        return x[:, self.KEEP]\n", 5),
    ],
)
def test_an_index_bound_through_defaults_conditions_and_class_names_is_a_python_index(
    tmp_path: Path, program: str, line: int
) -> None:
    assert _advice(tmp_path, program, line).pattern == "index from a Python tuple or list"


def test_a_per_batch_copy_is_told_to_pin_and_copy_without_waiting_not_to_move_once(tmp_path: Path) -> None:
    """Issue 43: `x.to(device)` of each batch cannot move before the loop; the advice says what removes its wait."""
    program = "import torch\ndef train(loader, model):\n    for x in loader:\n        model(x.to('cuda'))\n"
    advice = _advice(tmp_path, program, 4)
    assert advice.pattern == "copy between host and device"
    said = advice.why + advice.caveat
    assert "pin_memory=True" in said and "non_blocking=True" in said and advice.short.startswith("pin it")


def test_a_read_s_advice_never_reads_once_a_step(tmp_path: Path) -> None:
    """Issue 43: "read it once at the end of the step" still syncs once a step."""
    program = "import torch\ndef train(loss, total):\n    total += loss.item()\n    return total\n"
    advice = _advice(tmp_path, program, 3)
    assert advice.pattern == "value read" and "end of the step" not in advice.why + advice.caveat
    assert "after the loop" in advice.caveat and "every N steps" in advice.caveat


def test_a_constant_tensor_built_each_step_is_built_once() -> None:
    advice = _lab("w_list.py", 18)
    assert advice.rewrite == "        w = weights_gpu"
    assert advice.setup == 'weights_gpu = torch.tensor(weights, device="cuda")'  # the healthy twin's fixed_weights


def test_a_tensor_of_values_that_change_each_step_is_copied_from_pinned_memory(tmp_path: Path) -> None:
    program = """
    import torch
    def step(x, sizes):
        scale = torch.tensor(sizes, dtype=torch.float32, device=x.device)
        return x * scale
    """
    advice = _advice(tmp_path, program, 4)
    assert advice.rewrite == (
        "    scale = torch.tensor(sizes, dtype=torch.float32, pin_memory=True).to(x.device, non_blocking=True)"
    )


def test_a_pageable_copy_of_a_module_tensor_pins_it_once_where_it_is_made() -> None:
    advice = _lab("w_list.py", 19)
    assert advice.pattern == "copy from pageable memory"
    assert (advice.rewrite, advice.setup, advice.setup_line) == (None, "host_batch = host_batch.pin_memory()", 12)


def test_a_print_in_a_counted_loop_prints_every_100_steps(tmp_path: Path) -> None:
    program = """
    import torch
    def train(model, batches):
        for step, batch in enumerate(batches):
            loss = model(batch)
            print(f"step {step} loss {loss}")
    """
    advice = _advice(tmp_path, program, 6)
    assert advice.pattern == "print of a CUDA tensor"
    assert advice.rewrite == '        if step % 100 == 0:\n            print(f"step {step} loss {loss}")'


def test_a_print_with_no_counter_is_deferred_to_a_list_made_before_the_function() -> None:
    advice = _lab("w_print.py", 19)
    assert advice.rewrite == "        printed.append(y.sum().detach())"
    assert advice.setup.startswith("printed = []") and advice.setup_line == 15


def test_an_accumulated_read_keeps_the_total_on_the_gpu() -> None:
    """fixtures/real/lstm_lm.py:92, pytorch/examples' word_language_model: `total_loss += loss.item()`."""
    path = ROOT / "fixtures/real/lstm_lm.py"
    code = read_code(str(path), 92)
    assert code is not None
    advice = advise_code(code, str(path))
    assert advice.rewrite == "            total_loss += loss.detach()"
    assert "total_loss.item()" in advice.caveat


def test_a_read_the_host_branches_on_is_a_true_dependency_with_no_rewrite(tmp_path: Path) -> None:
    program = """
    def step(loss, best):
        value = loss.item()
        if value < best:
            return value
        return best
    """
    advice = _advice(tmp_path, program, 3)
    assert (advice.dependency, advice.rewrite) == ("true", None)
    assert "line 4" in advice.caveat


@pytest.mark.parametrize(
    ("program", "line", "rewrite"),
    [
        # clamp takes a tensor or a number as its bound (torch.minimum would raise on roi_heads' int im_w)
        ("import torch\ndef f(a, b):\n    return max(a, b)\n", 3, "    return torch.clamp(a, min=b)"),
        ("import torch\ndef f(n):\n    return x / min(n, 1)\n", 3, "    return x / torch.clamp(n, max=1)"),
        ("import torch\ndef f(x):\n    assert (x >= 0).all()\n", 3, "    torch._assert_async((x >= 0).all())"),
        (
            "import torch\ndef f(loss, a, b):\n    if loss > 1:\n        r = a\n    else:\n        r = b\n"
            "    return r\n",
            3,
            "    r = torch.where(loss > 1, a, b)",
        ),
        ("import torch\ndef f():\n    torch.cuda.synchronize()\n", 3, ""),
        ("import time, torch\ndef f():\n    torch.cuda.synchronize()\n    return time.perf_counter()\n", 3, None),
        (
            "import torch\ndef f(d):\n    return {k: v.item() for k, v in d.items()}\n",
            3,
            "    return {k: v for k, v in d.items()}",
        ),
        ("import torch\ndef f(x, m):\n    return x[x > m].sum()\n", 3, "    return torch.where(x > m, x, 0).sum()"),
    ],
    ids=["max", "min-number", "assert", "if-else", "synchronize", "timing-synchronize", "dict-of-reads", "masked-sum"],
)
def test_the_articles_rewrites(tmp_path: Path, program: str, line: int, rewrite: str | None) -> None:
    """The sync-free alternatives of the NVIDIA skill's quick-reference table, on one-line programs (a
    synchronize that closes a host clock's timing is not deleted: the clock would then measure less)."""
    advice = _advice(tmp_path, program, line)
    assert advice.rewrite == rewrite
    if rewrite is None:
        assert "CUDA events" in advice.caveat and advice.first_line == 0
        return
    if_else = advice.pattern == "control flow on a GPU value" and "where" in rewrite
    assert (advice.first_line, advice.last_line) == (line, 6 if if_else else line)


@pytest.mark.parametrize(
    ("program", "rewrite"),
    [
        # clamp takes a number or a tensor as its bound: torch.minimum raised on torchvision's int im_w
        ("import torch\ndef f(box, w):\n    x = min(box[2] + 1, w)\n", "    x = torch.clamp(box[2] + 1, max=w)"),
        # Python's `or` takes each tensor's truth on the host: an _assert_async of it would still sync
        ("import torch\ndef f(d):\n    assert d.all() or (~d).all(), 'x'\n", None),
        # a message formatted with the values would read them: left out
        (
            "import torch\ndef f(y):\n    assert y.isfinite().all(), 'bad {}'.format(y)\n",
            "    torch._assert_async(y.isfinite().all())",
        ),
        # torch.where picks tensors, never strings
        ("import torch\ndef f(s):\n    if s.isfinite():\n        m = f'{s}'\n    else:\n        m = 'no'\n", None),
        # int() of a read wants a Python number (a length, a size): the host's own use
        ("import torch\ndef f(n):\n    m = int(n.max().item())\n    return m\n", None),
    ],
    ids=["clamp-by-a-name", "assert-or", "assert-message", "where-of-strings", "int-of-a-read"],
)
def test_rewrites_that_would_still_sync_or_fail_are_not_written(
    tmp_path: Path, program: str, rewrite: str | None
) -> None:
    """Rewrites of corpus lines that, read again, still synced at the line or could not run (torchdiffeq's asserts
    joined by `or` with formatted messages, torchvision's min(box, im_w), lightning's message chosen by a check,
    torchaudio's int(lengths.max().item()))."""
    assert _advice(tmp_path, program, 3).rewrite == rewrite


# transformers' SequenceBiasLogitsProcessor.__call__ (generation/logits_process.py), as harvested on the H100
SEQUENCE_BIAS = """\
def bias_of(self, input_ids, scores):
    bias = torch.zeros_like(scores)
    for sequence_ids, sequence_bias in self.sequence_bias.items():
        last_token = sequence_ids[-1]
        matching_rows = torch.eq(
            input_ids[:, -1:],
            torch.tensor(sequence_ids[:-1], dtype=input_ids.dtype, device=input_ids.device),
        ).prod(dim=1)
        bias[:, last_token] += torch.where(
            matching_rows.bool(),
            torch.tensor(sequence_bias, device=input_ids.device),
            torch.tensor(0.0, device=input_ids.device),
        )
    return bias
"""


def test_a_statement_with_two_copies_to_the_device_gets_one_rewrite_of_both(tmp_path: Path) -> None:
    """On the H100 (scripts/h200/check-rewrites.py), line 11's rewrite was written and line 12's, which touched
    the same statement, set aside: the statement still synced 8 times. Each line now gets the same rewrite, in
    which neither copy is made from pageable memory."""
    both = [_advice(tmp_path, SEQUENCE_BIAS, line) for line in (11, 12)]
    assert both[0].rewrite == both[1].rewrite and not both[0].setup and not both[1].setup
    assert both[0].rewrite == (
        "        bias[:, last_token] += torch.where(\n"
        "            matching_rows.bool(),\n"
        "            torch.tensor(sequence_bias, pin_memory=True).to(input_ids.device, non_blocking=True),\n"
        "            torch.tensor(0.0, pin_memory=True).to(input_ids.device, non_blocking=True),\n"
        "        )"
    )
    # a copy of the loop's values is copied pinned; a lone one whose names are bound before the loop is made there
    assert _advice(tmp_path, SEQUENCE_BIAS, 7).setup == ""
    lone = SEQUENCE_BIAS.replace("torch.tensor(sequence_bias, device=input_ids.device)", "sequence_bias")
    assert _advice(tmp_path, lone, 12).setup == "    values_gpu = torch.tensor(0.0, device=input_ids.device)"


def test_a_sync_in_a_known_library_gets_the_librarys_setting() -> None:
    advice = advise(
        "/home/user/proj/hf_trainer.py", 34, "/x/site-packages/transformers/trainer.py", 1847, "_run_epoch",
        "transformers", printed=False,
    )  # fmt: skip
    assert advice is not None and advice.basis == "library"
    assert "logging_nan_inf_filter=False" in advice.setup and advice.rewrite is None


def test_an_unreadable_line_has_no_advice_and_the_kinds_hint_stands() -> None:
    assert advise("/nowhere/train.py", 3, "/nowhere/train.py", 3, "step", "", printed=False) is None


def test_a_file_that_does_not_parse_gives_no_advice_and_no_error(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text("def f(:\n    x.item()\n")
    assert read_code(str(path), 2) is None


def test_every_rewrite_nsync_writes_parses(tmp_path: Path) -> None:
    """Each lab scenario's and each real program's syncing line: where a rewrite is written, it parses once put
    back in its file (the whole file, with the set-up inserted)."""
    cases = [(LAB / s, n) for s, n in [("w_print.py", 19), ("w_item.py", 17), ("w_mask.py", 15), ("w_tuple.py", 19),
             ("w_list.py", 18), ("w_list.py", 19), ("w_two.py", 19), ("w_two.py", 23), ("w_param.py", 19),
             ("w_hidden.py", 41)]]  # fmt: skip
    cases += [(ROOT / "fixtures/real" / s, n) for s, n in [("lstm_lm.py", 92), ("timm_gradnorm.py", 30),
              ("compiled_train.py", 29), ("resnet_train.py", 32)]]  # fmt: skip
    written = 0
    for path, line in cases:
        code = read_code(str(path), line)
        assert code is not None
        advice = advise_code(code, str(path))
        lines = path.read_text().splitlines()
        if advice.rewrite is not None:
            lines[advice.first_line - 1 : advice.last_line] = advice.rewrite.splitlines()
            written += 1
        if advice.setup_line:
            lines[advice.setup_line - 1 : advice.setup_line - 1] = advice.setup.splitlines()
        ast.parse("\n".join(lines))
    assert written == len(cases) - 1  # all but the pageable copy (a set-up alone)


@pytest.mark.slow
def test_the_patches_nsync_writes_for_the_lab_are_the_ones_measured_on_the_h200(tmp_path: Path) -> None:
    """`nsync analyze --suggest-patch` on each scenario's degraded capture, in a copy of the scenario, gives
    the patch that fixtures/h200/fixes/ ran on the H200 (scripts/h200/fixes.py): there, each patched degraded
    mode ran under the sync debug mode 'error' without raising, where the original raised at its line."""
    checks = [json.loads(line) for line in (LAB / "fixes/fixes-checks.jsonl").read_text().splitlines()]
    for scenario in ("w_print", "w_item", "w_mask", "w_tuple", "w_list", "w_two", "w_param"):
        folder = tmp_path / scenario
        folder.mkdir()
        shutil.copy(LAB / f"{scenario}.py", folder)
        patch = folder / "fix.patch"
        trace = LAB / "cal" / f"{scenario}_degraded.sqlite.xz"
        command = [sys.executable, "-m", "nsync", "analyze", str(trace), "--suggest-patch", str(patch), "-q"]
        subprocess.run(command, cwd=folder, check=True, capture_output=True)
        assert patch.read_text() == (LAB / "fixes" / f"{scenario}.patch").read_text()
        subprocess.run(["git", "apply", "--check", str(patch)], cwd=folder, check=True)  # as the README says
        subprocess.run(["patch", "-p1", "-s", "-i", str(patch)], cwd=folder, check=True)
        ast.parse((folder / f"{scenario}.py").read_text())
        ran = {(c["script"], c["mode"]): c["synced"] for c in checks if c["scenario"] == scenario}
        assert ran == {("original", "degraded"): True, ("fixed", "degraded"): False, ("fixed", "healthy"): False}


def _sites(path: Path, lines: list[int], counts: list[int]) -> pd.DataFrame:
    rows = []
    for site_id, (line, count) in enumerate(zip(lines, counts)):
        code = read_code(str(path), line)
        assert code is not None
        rows.append({"site_id": site_id, "file": str(path), "line": line, "advice": advise_code(code, str(path)),
                     "count": count})  # fmt: skip
    return pd.DataFrame(rows)


def test_three_reads_the_host_uses_become_one_copy_as_in_the_grouped_twin() -> None:
    """fixtures/h200/w_reads.py: degraded() reads three values at three points of the step and logs them;
    grouped() is the same step with one stacked read where the last value is made."""
    path = LAB / "w_reads.py"
    (group,) = read_groups(_sites(path, [23, 26, 29], [59, 59, 59]), [])
    assert (group.lines, group.site_ids, group.released) == ([23, 26, 29], [0, 1, 2], [0, 1])
    assert group.edits[:2] == [LineEdit(23, 23, ""), LineEdit(26, 26, "")]
    assert group.edits[2] == LineEdit(29, 29, _healthy_line("w_reads.py", "= torch.stack([loss, peak, spread])"))


def test_reads_whose_values_are_used_in_between_or_that_run_apart_are_not_read_together(tmp_path: Path) -> None:
    program = """
    def step(a, b, log):
        x = a.item()
        log.append(f"{x}")
        y = b.item()
        log.append(f"{x} {y}")
    """
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(program))
    assert read_groups(_sites(path, [3, 5], [40, 40]), []) == []  # x is used before y is read
    path.write_text(textwrap.dedent(program).replace('    log.append(f"{x}")\n', ""))
    assert len(read_groups(_sites(path, [3, 4], [40, 40]), [])) == 1
    assert read_groups(_sites(path, [3, 4], [40, 80]), []) == []  # one read runs twice as often


def _reads_report() -> Any:
    import nsync
    from nsync.load.calibration import read_calibration

    trace = LAB / "reads/w_reads_degraded.sqlite.xz"
    calibration = read_calibration(LAB / "reads/w_reads_degraded.calibration.json")
    return nsync.analyze(trace, calibration=calibration, source_dirs=[LAB])


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    reason="1.41 ms predicted (-17 %): the calibration run took 4.62 ms a step where the timing run's degraded "
    "blocks took 5.10, and the saving follows the calibration sample (its 80 % range, 0.89-2.04, holds 1.697)",
)
def test_the_reads_together_are_priced_within_10_percent_of_the_measured_saving_on_the_h200() -> None:
    (group,) = _reads_report().read_together
    assert group.predicted_saving_ms_per_step == pytest.approx(1.697, rel=0.1)


@pytest.mark.slow
def test_the_reads_together_are_one_group_whose_range_holds_the_measured_saving_on_the_h200(tmp_path: Path) -> None:
    """The degraded capture of w_reads (fixtures/h200/reads, calibrated): one group of the three reads, named
    by the verdict; the measured saving (degraded minus grouped, unprofiled, median of 7 pairs of blocks in one
    process: timings.log, 1.697 ms) lies in its likely range."""
    import nsync

    report = _reads_report()
    (group,) = report.read_together
    assert group.lines == [23, 26, 29] and group.function == "degraded"
    low, high = group.saving_range_ms
    assert low is not None and high is not None and low <= 1.697 <= high
    assert report.verdict is not None and "w_reads.py:23,26,29 (their reads together)" in report.verdict.text
    saved = nsync.write(report, tmp_path / "r.json")
    assert nsync.Analysis.load(saved) == report  # the advice and the group read back as they were written
    healthy = nsync.analyze(LAB / "reads/w_reads_healthy.sqlite.xz", calibration=None, source_dirs=[LAB])
    assert healthy.read_together == []
    patch = tmp_path / "fix.patch"
    shutil.copy(LAB / "w_reads.py", tmp_path)
    nsync.write(report, patch, options=nsync.RenderOptions(source_dirs=(tmp_path,)))
    subprocess.run(["patch", "-p1", "-s", "-i", str(patch)], cwd=tmp_path, check=True)
    fixed = ast.parse((tmp_path / "w_reads.py").read_text())
    bodies = {f.name: [ast.dump(s) for s in f.body] for f in fixed.body if isinstance(f, ast.FunctionDef)}
    assert bodies["degraded"] == bodies["grouped"]  # the patched step is the grouped twin, statement for statement


@pytest.mark.slow
@pytest.mark.parametrize("program", ["compiled_train", "timm_gradnorm"])
def test_the_patches_nsync_writes_for_the_real_programs_are_the_ones_run_on_the_h200(
    program: str, tmp_path: Path
) -> None:
    """fixtures/real/fixes: the patches whose programs ran on the H200 (fixtures/real/README.md)."""
    real = ROOT / "fixtures/real"
    shutil.copy(real / f"{program}.py", tmp_path)
    patch = tmp_path / "fix.patch"
    command = [sys.executable, "-m", "nsync", "analyze", str(real / f"{program}.sqlite.xz"), "--suggest-patch",
               str(patch), "-q"]  # fmt: skip
    subprocess.run(command, cwd=tmp_path, check=True, capture_output=True)
    assert patch.read_text() == (real / "fixes" / f"{program}.patch").read_text()
    subprocess.run(["git", "apply", "--check", str(patch)], cwd=tmp_path, check=True)


@pytest.mark.slow
def test_the_database_holds_each_call_sites_fix(tmp_path: Path) -> None:
    """--db: the call sites' table carries the fix written for each (the lab's w_item, its source found with
    source_dirs): its one call site, the comprehension of norm reads, one torch._foreach_norm."""
    import sqlite3

    import nsync

    analysis = nsync.analyze(LAB / "cal/w_item_degraded.sqlite.xz", calibration=None, source_dirs=[LAB])
    nsync.write(analysis, tmp_path / "r.db")
    with sqlite3.connect(tmp_path / "r.db") as db:
        rows = db.execute("SELECT line, fix_pattern, fix_dependency, fix_rewrite, fix_setup FROM callsites").fetchall()
    rewrite = "        norms_log.append(torch.stack(torch._foreach_norm([p for p in params])))"
    assert rows == [(17, "value read", "false", rewrite, "")]


def test_a_readable_line_no_pattern_fits_says_so_and_gives_the_kinds_advice(tmp_path: Path) -> None:
    """A stream sync issued by a line whose text and function show no pattern: the advice says so and carries
    the hint of its sync kind (nsync.stages.callsites.HINTS), not a guess."""
    from nsync.load import Frame
    from nsync.stages.advice import advise_callsites
    from nsync.stages.callsites import HINTS
    from nsync.stages.detect import SyncKind

    path = tmp_path / "train.py"
    path.write_text("def step(model, batch):\n    return model(batch)\n")
    short, hint = HINTS[SyncKind.STREAM]
    sites = pd.DataFrame([{"file": str(path), "line": 2, "sync_file": str(path), "sync_line": 2,
                           "sync_function": "step", "stack": (Frame("step", str(path), 2),), "short_hint": short,
                           "hint": hint, "kinds": [SyncKind.STREAM], "copy_directions": []}])  # fmt: skip
    (advice,) = advise_callsites(sites, [])["advice"]
    assert (advice.pattern, advice.basis, advice.rewrite, advice.caveat, advice.short) == (
        "no known pattern",
        "kind",
        None,
        hint,
        short,
    )
    assert advice.why.startswith("no pattern nsync knows fits this line")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("trace", "sites", "loop"),
    [
        ("fresh/timm_perclass", {34, 35}, "the loop `for c in range(classes):` (line 32)"),
        ("real/timm_gradnorm", {30}, "the loop `for n, p in model.named_parameters()` (line 30)"),
        ("fresh7/hf_bert_tokacc", {37, 38, 39}, "the loop `for tag in range(tags):` (line 35)"),
    ],
)
def test_a_read_in_a_loop_over_items_is_told_to_do_the_loop_at_once_naming_the_loop(trace, sites, loop):
    """The programs' own loops (by construction: fixtures/fresh/*.py, fixtures/real/timm_gradnorm.py); the
    comprehension over the parameters is a loop too."""
    path = ROOT / "fixtures" / f"{trace}.sqlite.xz"
    a = run_stages(path, calibration=None, source_dirs=[ROOT / "fixtures/fresh", ROOT / "fixtures/real"])
    in_loop = a.callsites.loc[a.callsites["loop_saving_ns_per_step"].notna()]
    assert set(in_loop["line"]) == sites
    for advice in in_loop["advice"]:
        assert advice.short == "do the whole loop at once"
        assert advice.caveat.startswith(f"It runs in {loop}, whose reads sync ")
        assert "do the loop's work for all items at once on the GPU" in advice.caveat


@pytest.mark.parametrize(
    ("program", "line", "header"),
    [
        ("for step in range(9):\n    for c in range(4):\n        n = t[c].item()\n", 3, (2, "for c in range(4):")),
        ("def log(ts):\n    for t in ts:\n        out.append(t.item())\n", 3, (2, "for t in ts:")),
        ("for step in range(9):\n    xs = [t.item() for t in ts]\n", 2, (2, "for t in ts")),
        ("for step in range(9):\n    n = t.item()\n", 2, None),  # a script's one loop is its step loop
    ],
    ids=["a loop in the step loop", "a loop in a function", "a comprehension", "the step loop alone"],
)
def test_the_loop_a_read_is_in_is_the_innermost_inside_the_step(tmp_path: Path, program: str, line: int, header):
    from nsync.stages.advice.loops import loop_header

    path = tmp_path / "train.py"
    path.write_text(program)
    code = read_code(str(path), line)
    assert code is not None and loop_header(code) == header


@pytest.mark.parametrize(
    ("line_text", "copy", "short"),
    [
        ("loss = ctc(log_probs, targets, input_lengths, target_lengths)", "DtoH", "a copy inside the call"),
        ("ids = best.tolist()", "DtoH", None),  # the line's own copy: its pattern's advice
        ("batch = model(inputs)", "HtoD", "pin the host buffer"),  # the kind's advice (no torch frame: CUDA's)
    ],
    ids=["a library's copy to the host", "the line's own .tolist()", "a copy to the GPU"],
)
def test_a_copy_to_pageable_memory_the_line_does_not_write_is_made_inside_the_call(
    tmp_path: Path, line_text: str, copy: str, short: str | None
) -> None:
    """A readable line whose sync is a blocking copy to pageable host memory but which writes no copy (torch's
    ctc_loss copies its CUDA lengths so, fixtures/fresh7): pinning, the kind's advice, cannot reach it."""
    from tests.tracebuilder import DEVICE, DTOH, HTOD, PAGEABLE, TraceBuilder

    source = tmp_path / "src" / "train.py"
    source.parent.mkdir()
    source.write_text("import torch\n" * 9 + line_text + "\n")  # line 10
    b = TraceBuilder()
    b.kernel(1, 0, 5, 800, name="K")
    kind, src, dst = (DTOH, DEVICE, PAGEABLE) if copy == "DtoH" else (HTOD, PAGEABLE, DEVICE)
    b.python_stack(
        1, b.memcpy(1, "cudaMemcpyAsync_v3020", 20, 820, 805, 815, kind, src, dst), [("f", "/u/train.py", 10)]
    )
    a = run_stages(b.write(tmp_path / "t.sqlite"), source_dirs=[source.parent])
    (advice,) = a.callsites["advice"]
    assert "pageable-copy" in a.callsites.iloc[0]["kinds"]
    if short is None:
        assert advice.pattern != "no known pattern"
    else:
        assert advice.short == short
        assert advice.caveat.startswith("pinning does not reach") == (copy == "DtoH")


def test_a_rewrite_that_makes_both_branches_alike_drops_the_condition(tmp_path: Path) -> None:
    """issue 47: fixtures/real/compiled_train's switched line was told to become
    `losses.append(loss.detach() if timer.degraded() else loss.detach())`."""
    path = tmp_path / "train.py"
    path.write_text("for step in range(3):\n    losses.append(loss.item() if timer.degraded() else loss.detach())\n")
    code = read_code(str(path), 2)
    assert code is not None
    advice = advise_code(code, str(path))
    assert advice.rewrite == "    losses.append(loss.detach())"


def test_a_tolist_whose_numbers_the_code_goes_on_to_use_is_not_rewritten_to_a_tensor(tmp_path: Path) -> None:
    """torchvision's draw_bounding_boxes reads its boxes with .tolist() to draw them with PIL, and torchmetrics
    reads split sizes for torch.split (fixtures/syncs/held-out-3.json): kept as tensors, neither would run. A
    .tolist() only kept in a list is still rewritten."""
    program = (
        "import torch\n\n\n"
        "def draw(boxes, draw_rectangle):\n"
        "    img_boxes = boxes.to(torch.int64).tolist()\n"
        "    for bbox in img_boxes:\n"
        "        draw_rectangle(bbox)\n\n\n"
        "def split(preds, counts):\n"
        "    split_sizes = counts.detach().cpu().tolist()\n"
        "    return torch.split(preds, split_sizes, dim=0)\n\n\n"
        "def keep(history, values):\n"
        "    history.append(values.tolist())\n"
    )
    for line in (5, 11):
        advice = _advice(tmp_path, program, line)
        assert (advice.pattern, advice.dependency, advice.rewrite) == ("value read", "true", None), line
    kept = _advice(tmp_path, program, 16)
    assert kept.rewrite is not None and "tolist" not in kept.rewrite


# Lines whose pattern only their statement or function tells (held-out-4's misses, tuned on): what each does in
# PyTorch is known by construction (a Python bool() of a tensor, a size given as a tensor, a CPU tensor copied).
FUNCTION_TOLD = [
    ("import torch\ndef f(box, d):\n    m = (\n        torch.tensor(\n            box,\n            device=d,\n"
     "        )\n        .T\n    )\n    return m\n", 4, "host-to-device copy of a Python value",
     "build the tensor once"),
    ("from torch import tensor\ndef f(x):\n    n = tensor(x.numel(), device=x.device)\n    return n\n", 3,
     "host-to-device copy of a Python value", "build the tensor once"),
    ("def f(scores, counts):\n    k = counts.sum(dim=1).max()\n    _, top = scores.topk(k=k)\n    return top\n", 3,
     "value read", "use a bound the host knows"),
    ("def f(seqs, mask, start):\n    n = start + mask.sum(dim=1).max()\n    return seqs[:, :n]\n", 3,
     "value read", "use a bound the host knows"),
    ("def f(image, permutation: list[int]):\n    return image[:, permutation]\n", 2,
     "index from a Python tuple or list", "index with a CUDA tensor"),
    ("import torch\ndef f(image, v: torch.Tensor):\n    image[..., 0:4, 2:6] = v\n    return image\n", 3,
     "copy between host and device", "move it to the GPU first"),
    ("import torch\ndef f(ps):\n    return torch.nn.utils.clip_grad_norm_(\n        ps, 1.0, error_if_nonfinite=True\n"
     "    )\n", 3, "control flow on a GPU value", "check the norm on the GPU"),
    ("def f(self, x):\n    done = not self.unfinished(x)\n    return done\n", 2, "control flow on a GPU value",
     "decide on the GPU (torch.where)"),
    ("def f(x, level, seen):\n    seen = seen or (x.mean() >= level)\n    return seen\n", 2,
     "control flow on a GPU value", "decide on the GPU (torch.where)"),
    ("import torch\ndef f(a, b):\n    same = torch.equal(a, b)\n    return same\n", 3, "value read",
     "keep the value on the GPU"),
    ("def f(mask, index):\n    mask[index] = True\n    return mask\n", 2, "host-to-device copy of a Python value",
     "build the tensor once"),
    ("import torch\ndef f(state, buffer):\n    torch.save(state, buffer)\n", 3, "copy between host and device",
     "copy it after the loop"),
    ("def f(b, d, n):\n    m = float(((b + 1).log() * d).sum()) / n\n    return m\n", 2, "value read",
     "keep the value on the GPU"),  # the math of .log(), not a logging call
    ("def f(d, x, p):\n    v = float((d.logcdf(x) - p).sum())\n    return v\n", 2, "value read",
     "keep the value on the GPU"),  # a distribution's logcdf (botorch, held-out-8), not a logging call
    ("def f(labels):\n    if labels.ne(0).logical_and(labels.ne(1)).any().item():\n        return 1\n", 2,
     "control flow on a GPU value", "decide on the GPU (torch.where)"),
    ("def f(self, val):\n    self.top = val if self.top.to(val.device) < val else self.top\n", 2,
     "control flow on a GPU value", "decide on the GPU (torch.where)"),  # the comparison syncs, not the .to()
    ("def f(x, d):\n    y = x.to(d) if x.numel() > 0 else x\n    return y\n", 2, "copy between host and device",
     "pin it and copy non_blocking, or move it once"),  # a Python size compared: the .to() is the copy
    # held-out-6's misses, tuned on
    ("def f(ps, rs, m):\n    best = max(\n        (p, r) for p, r in zip(ps, rs) if r >= m\n    )\n    return best\n",
     3, "control flow on a GPU value", "decide on the GPU (torch.where)"),  # the filter takes bool() of each r >= m
    ("def f(ps, rs, m):\n    best = max(\n        (p, r) for p, r in zip(ps, rs) if r >= m\n    )\n    return best\n",
     2, "Python builtin on tensors", "use the torch op"),  # the line of max( compares the tuples' tensors
    ("import torch\ndef f(q, d):\n    return {\n        f\"k_{q}\": torch.tensor(\n            [q], device=d\n"
     "        )\n    }\n", 4, "host-to-device copy of a Python value", "build the tensor once"),  # not the f-string
    ("import torch\ndef f(r):\n    i = torch.argmin(r)\n    return {\n        f\"at_{i}\": (\n            r[i]\n"
     "        )\n    }\n", 6, "value read", "keep the value on the GPU"),  # the f-string above has its own line
    ("def f(nodes, i):\n    decorated = [(n.data[i], n) for n in nodes]\n    decorated.sort()\n    return decorated\n",
     3, "Python builtin on tensors", "use the torch op"),  # a list's sort compares the tensors
    ("import torch\ndef f(tkwargs):\n    return torch.tensor(0.0, **tkwargs)\n", 3,
     "host-to-device copy of a Python value", "build the tensor once"),
    ("def f(n, x):\n    for _ in range(n.long()):\n        x = x / 2\n    return x\n", 2, "value read",
     "keep the value on the GPU"),  # range() takes the tensor's value as an int
    ("def f(y, ref):\n    keep = (y <= ref).all(dim=-1)\n    return y[keep]\n", 3,
     "dynamic shape (a mask or nonzero)", "keep the shape fixed"),
    # the mask's last binding in the source, and a row of it
    ("import torch\ndef f(y, ref, b, m):\n    if m is None:\n        m = torch.ones(b)\n"
     "    m = m & (y > ref).all(dim=-1)\n    for i in range(b):\n        row = y[i, m[i]]\n    return row\n", 7,
     "dynamic shape (a mask or nonzero)", "keep the shape fixed"),
    # held-out-7's misses, tuned on
    ("import torch\ndef f(x, m):\n    r = torch.unique(x[m]).float()\n    return r\n", 3,
     "dynamic shape (a mask or nonzero)", "keep the shape fixed"),  # a tensor's .float(), not Python's float()
    ("import torch\ndef f(a):\n    v, i = torch.max(a.sum(dim=0), 0)\n    return a[:, i]\n", 4, "value read",
     "keep the value on the GPU"),  # the max's index of a 1-D tensor is 0-dim: read to index
    ("def f(args, nans):\n    return [a[~nans] for a in args]\n", 2, "dynamic shape (a mask or nonzero)",
     "keep the shape fixed"),
    ("def f(cluster, pairs):\n    i = 0\n    for s, t in pairs:\n        cluster[s] = i\n        i += 1\n"
     "    return i\n", 4, "host-to-device copy of a Python value",
     "build the tensor once"),  # a Python int copied each time
    ("from typing import List\ndef f(score):\n    kept: List[int] = []\n    kept.append(0)\n"
     "    return score[kept]\n", 5, "index from a Python tuple or list", "index with a CUDA tensor"),
    ("import torch\ndef f(s, r, c):\n    s[\n        r, c\n    ] = torch.finfo(s.dtype).min\n    return s\n", 3,
     "host-to-device copy of a Python value", "build the tensor once"),
    ("def f(m):\n    g = m.flatten().any().item()\n    return g\n", 2, "value read", "keep the value on the GPU"),
    ("import pickle\ndef f(kwargs):\n    return pickle.dumps(kwargs)\n", 3, "copy between host and device",
     "copy it after the loop"),  # pickling a CUDA tensor copies it to the host
    ("import torch\ndef f(n, like):\n    return torch.randperm(n).type_as(like)\n", 3,
     "host-to-device copy of a Python value", "make it on the GPU"),
    ("def f(attn, n_global):\n    return attn.narrow(-1, 0, n_global).contiguous()\n", 2, "value read",
     "use a bound the host knows"),  # narrow never syncs by itself: the size it is given is a GPU value
]  # fmt: skip


@pytest.mark.parametrize(("program", "line", "pattern", "short"), FUNCTION_TOLD)
def test_a_line_whose_statement_or_function_tells_its_pattern_gets_that_pattern(
    tmp_path: Path, program: str, line: int, pattern: str, short: str
) -> None:
    advice = _advice(tmp_path, program, line)
    assert (advice.pattern, advice.short) == (pattern, short)
    if advice.rewrite is not None:
        ast.parse(textwrap.dedent(advice.rewrite))
    assert "\n" not in advice.why  # a statement of several lines is said as one


LONGFORMER_LIKE = (
    "import torch\n\n\nclass Attention(torch.nn.Module):\n"
    "    def _count(self, is_global):\n"
    "        per_row = is_global.long().sum(dim=1)\n"
    "        most = per_row.max()\n"
    "        return most, per_row\n\n"
    "    def forward(self, x, is_global):\n"
    "        most, per_row = self._count(is_global)\n"
    "        return self._only_global(x, {given})\n\n"
    "    def _only_global(self, x, n_global):\n"
    "        return x[:, :n_global] + 1\n"
)


@pytest.mark.parametrize(
    ("given", "pattern"),
    [("most", "value read"), ("n_global=most", "value read"), ("x.size(1)", "no known pattern")],
)
def test_a_gpu_count_made_in_one_method_and_passed_to_another_is_read_where_it_bounds_a_slice(
    tmp_path: Path, given: str, pattern: str
) -> None:
    """Longformer's shape, by construction: ``_count`` returns a whole ``.max()`` (a one-element GPU tensor),
    ``forward`` unpacks it and passes it on, ``_only_global`` slices with it, which reads it to the host. Passed a
    Python size instead, the slice is no GPU value's."""
    advice = _advice(tmp_path, LONGFORMER_LIKE.format(given=given), 15)
    assert advice.pattern == pattern
    if pattern == "value read":
        assert advice.short == "use a bound the host knows"


def test_a_parameter_annotated_int_given_as_a_size_is_not_taken_for_a_gpu_value(tmp_path: Path) -> None:
    assert _advice(tmp_path, "def f(x, n: int):\n    return x.view(n, -1)\n", 2).pattern == "no known pattern"


def test_an_assert_comparing_python_lists_is_not_rewritten_to_assert_async(tmp_path: Path) -> None:
    """``list(x.size()) == [b, n]`` is a Python bool, made on the host, whatever ``n`` holds: torch._assert_async of
    it raised a TypeError on the H100 (Longformer, held-out-7), where the rewrite of a tensor test runs."""
    program = "import torch\ndef f(x, b, n):\n    assert list(x.size()) == [b, n]\n    assert (x > n).all()\n"
    assert _advice(tmp_path, program, 3).rewrite is None
    assert _advice(tmp_path, program, 4).rewrite == "    torch._assert_async((x > n).all())"


@pytest.mark.parametrize(
    "program",
    [
        "def f(func, args, kwargs):\n    return func(*args, **(kwargs or dict()))\n",  # a dict's truth
        "def f(x, y):\n    z = x if not isinstance(y, list) else y\n    return z\n",  # a Python function's
        "def f(x, y):\n    return x[y] if y is not None and y in x else x\n",  # is / in tests
    ],
)
def test_the_truth_of_python_values_is_not_taken_for_a_tensor_s(tmp_path: Path, program: str) -> None:
    assert _advice(tmp_path, program, 2).pattern == "no known pattern"


def test_a_bare_tensor_imported_from_torch_is_copied_from_pinned_memory_with_its_own_name(tmp_path: Path) -> None:
    program = "from torch import tensor\ndef f(x, v):\n    n = tensor(v, device=x.device)\n    return x * n\n"
    advice = _advice(tmp_path, program, 3)
    assert advice.rewrite == "    n = tensor(v, pin_memory=True).to(x.device, non_blocking=True)"


@pytest.mark.parametrize(
    ("line", "rewritten"),
    [
        ("s = torch.cat((torch.zeros(1).to(s.device), s.view(-1)), dim=0)",
         "s = torch.cat((torch.zeros(1, device=s.device), s.view(-1)), dim=0)"),
        ("eye = torch.eye(c).type_as(x)", "eye = torch.eye(c, dtype=x.dtype, device=x.device)"),
        ("p = torch.full((b, n), -100).to(labels.device)", "p = torch.full((b, n), -100, device=labels.device)"),
        ("z = torch.ones(3).cuda()", 'z = torch.ones(3, device="cuda")'),
        ("w = torch.hann_window(n).to(x.device)", "w = torch.hann_window(n, device=x.device)"),  # held-out-8's HDemucs
        ("s = x[:, torch.arange(x.shape[1]), c]", "s = x[:, torch.arange(x.shape[1], device=x.device), c]"),
    ],
)  # fmt: skip
def test_a_factory_tensor_made_on_the_host_and_moved_is_made_on_the_device(
    tmp_path: Path, line: str, rewritten: str
) -> None:
    """``torch.zeros(1).to(d)`` fills a tensor on the host and copies it from pageable memory (held-out-5's
    sentence-transformers, peft and torch_geometric lines): made with ``device=`` it is never copied."""
    advice = _advice(tmp_path, f"import torch\ndef f(s, c, x, b, n, labels):\n    {line}\n    return 0\n", 3)
    assert (advice.pattern, advice.short) == ("host-to-device copy of a Python value", "make it on the GPU")
    assert advice.rewrite == f"    {rewritten}"


def test_a_factory_tensor_moved_to_what_may_be_a_tensor_is_not_rewritten(tmp_path: Path) -> None:
    """``.to(attn_mask)`` takes a tensor's dtype and device, or a device: ``device=attn_mask`` broke XLNet's call on
    the H100 (held-out-8's rewrite check, 2026-12-07), and the name does not say which it is."""
    program = "import torch\ndef f(qlen, attn_mask):\n    m = -torch.eye(qlen).to(attn_mask)\n    return m\n"
    assert _advice(tmp_path, program, 3).rewrite is None


def test_a_cast_of_a_factory_tensor_made_on_the_device_is_no_copy(tmp_path: Path) -> None:
    program = "import torch\ndef f(d):\n    z = torch.zeros(3, device=d).to(torch.float16)\n    return z\n"
    assert _advice(tmp_path, program, 3).rewrite is None


def test_a_read_whose_value_then_sizes_a_tensor_is_the_host_s_use_and_not_rewritten(tmp_path: Path) -> None:
    """Dropping the ``.item()`` would only move the sync to ``torch.empty``, which reads a tensor size to the host
    (seen on the H100: botorch's max_n_pareto, torchdiffeq's niters)."""
    program = "import torch\ndef f(mask, y):\n    n = mask.sum(dim=-1).max().item()\n    return torch.empty(2, n)\n"
    advice = _advice(tmp_path, program, 3)
    assert (advice.pattern, advice.rewrite, advice.dependency) == ("value read", None, "true")
