"""nsync.testing.sync_free on this CPU machine, with a stand-in for torch: no GPU exists here, so a stand-in
plays PyTorch's sync debug mode (in 'warn' mode its ``.item()`` warns "called a synchronizing CUDA
operation", as PyTorch does). What these tests check is nsync's side: every reported sync found at the
caller's line (known by construction: the lines of USER below), its pattern and fix, the allow-list, the
decorator and the pytest marker, the mode restored. Against real PyTorch on the H200: fixtures/h200/README.md
('sync_free on the lab scenarios')."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import unittest
import warnings
from pathlib import Path
from types import ModuleType

import pytest

from nsync.stages.advice import Advice, advise_code, read_code
from nsync.testing import SyncFound, classify, sync_free

STAND_IN = '''"""A stand-in for torch: CUDA 'available', the sync debug mode, and a tensor whose .item() syncs."""
import warnings


class _Cuda:
    available = True
    mode = 0

    def is_available(self):
        return self.available

    def get_sync_debug_mode(self):
        return self.mode

    def set_sync_debug_mode(self, mode):
        self.mode = {"default": 0, "warn": 1, "error": 2}.get(mode, mode)


cuda = _Cuda()


class Tensor:
    def __init__(self, value):
        self.value = value

    def item(self):
        if cuda.mode == 1:
            warnings.warn("called a synchronizing CUDA operation", UserWarning)
        return self.value
'''
USER = """from torch import Tensor
values = [Tensor(1.0), Tensor(2.0)]


def degraded():
    return [v.item() for v in values]  # line 6


def healthy():
    return values


def logs():
    print(values[0].item())  # line 14
"""


@pytest.fixture
def torch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    package = tmp_path / "stand-in" / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(STAND_IN)
    spec = importlib.util.spec_from_file_location("torch", package / "__init__.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "torch", module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def user(tmp_path: Path, torch: ModuleType, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    path = tmp_path / "train.py"
    path.write_text(USER)
    spec = importlib.util.spec_from_file_location("train", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_sync_is_named_at_the_callers_line_with_its_pattern_and_fix(user: ModuleType) -> None:
    with pytest.raises(SyncFound) as found, sync_free():
        user.degraded()
    syncs = found.value.syncs
    assert [(s.where, s.function, s.pattern, s.dependency) for s in syncs] == [
        ("train.py:6", "degraded", "value read", "false")
    ] * 2
    message = str(found.value)
    assert message.startswith("2 CUDA sync(s) in code that must not sync:\n  2 x train.py:6 in degraded(): return [v")
    assert "return [v.item() for v in values]  # line 6" in message
    # the rewrite, in the code's own names: the comprehension's reads stacked into one tensor, no read at all
    assert "fix: line 6 becomes:\n        return torch.stack([v for v in values])\n" in message


def test_a_print_of_a_read_is_deferred_with_a_list_made_once_before_the_function(user: ModuleType) -> None:
    """A print in a function called each step, with no loop counter to print every N steps: the value is kept
    in a list made once at the top level (before line 13, the function's definition) and printed later."""
    with pytest.raises(SyncFound) as found, sync_free():
        user.logs()
    (sync,) = found.value.syncs
    assert (sync.where, sync.pattern) == ("train.py:14", "print of a CUDA tensor")
    assert sync.rewrite.splitlines()[:4] == [
        "fix: line 14 becomes:",
        "  printed.append(values[0].detach())",
        "once, before line 13:",
        "  printed = []  # print them once, after the loop: print(torch.stack(printed).tolist())",
    ]


def test_code_that_does_not_sync_passes_and_the_debug_mode_is_restored(user: ModuleType, torch: ModuleType) -> None:
    torch.cuda.set_sync_debug_mode("error")
    with sync_free():
        user.healthy()
    assert torch.cuda.get_sync_debug_mode() == 2
    with pytest.raises(SyncFound), sync_free():
        user.degraded()
    assert torch.cuda.get_sync_debug_mode() == 2


def test_allowed_syncs_pass_by_line_file_or_function(user: ModuleType) -> None:
    for allow in (["train.py:6"], ["train.py"], [f"{os.path.dirname(user.__file__)}/train.py:6"]):
        with sync_free(allow=allow):
            user.degraded()
    with pytest.raises(SyncFound, match=r"train\.py:14"), sync_free(allow=["train.py:6"]):
        user.degraded()
        user.logs()
    with pytest.raises(SyncFound), sync_free(allow=["rain.py:6", "train.py:7"]):  # a whole name, the right line
        user.degraded()


def test_as_a_decorator_and_an_error_inside_is_not_masked(user: ModuleType) -> None:
    @sync_free()
    def check() -> None:
        user.logs()

    with pytest.raises(SyncFound, match=r"train.py:14 in logs\(\): print\(values\[0\].item\(\)\)"):
        check()

    with pytest.raises(ZeroDivisionError), sync_free():
        user.degraded()
        _ = 1 / 0


def test_other_warnings_are_not_swallowed(user: ModuleType) -> None:
    with warnings.catch_warnings(record=True) as seen, sync_free():
        warnings.simplefilter("always")
        warnings.warn("something else", UserWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == ["something else"]


def test_without_a_cuda_device_the_test_is_skipped_not_passed(torch: ModuleType) -> None:
    torch.cuda.available = False
    with pytest.raises(unittest.SkipTest, match="needs a CUDA device"), sync_free():
        pass


@pytest.mark.slow  # (nsync or pytest subprocesses)
def test_the_pytest_marker_fails_a_syncing_test_and_passes_a_clean_one(tmp_path: Path) -> None:
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(STAND_IN)
    (tmp_path / "train.py").write_text(USER)
    (tmp_path / "test_steps.py").write_text(
        "import pytest, train\n\n"
        "@pytest.mark.sync_free\ndef test_degraded():\n    train.degraded()\n\n"
        "@pytest.mark.sync_free(allow=['train.py:6'])\ndef test_allowed():\n    train.degraded()\n\n"
        "@pytest.mark.sync_free\ndef test_healthy():\n    train.healthy()\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_steps.py"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "1 failed, 2 passed" in done.stdout, done.stdout + done.stderr
    assert "SyncFound: 2 CUDA sync(s) in code that must not sync:" in done.stdout


@pytest.mark.parametrize(
    ("script", "line", "pattern"),
    [
        ("w_print.py", 19, "print of a CUDA tensor"),
        ("w_item.py", 17, "value read"),
        ("w_mask.py", 15, "dynamic shape (a mask or nonzero)"),
        ("w_tuple.py", 19, "index from a Python tuple or list"),
        ("w_list.py", 18, "host-to-device copy of a Python value"),
        ("w_list.py", 19, "copy from pageable memory"),
        ("w_two.py", 19, "value read"),
        ("w_two.py", 23, "dynamic shape (a mask or nonzero)"),
        ("w_param.py", 19, "value read"),
        ("w_hidden.py", 41, "value read"),
    ],
)
def test_the_lab_scenarios_syncing_lines_get_their_pattern(script: str, line: int, pattern: str) -> None:
    """The lines and what syncs in them, as each scenario's own comment says (fixtures/h200/)."""
    code = (Path(__file__).parent.parent / "fixtures/h200" / script).read_text().splitlines()[line - 1]
    assert "SYNC" in code
    assert classify(code.strip())[0] == pattern


def test_on_the_h200_every_degraded_scenario_failed_at_its_sync_lines_and_every_healthy_one_passed() -> None:
    """The run recorded in fixtures/h200/sync-free-h200.jsonl, against each scenario's own '# SYNC' comments:
    every commented line found, in the degraded mode only, except the one PyTorch's debug mode cannot see
    (w_list.py:19, a pageable copy: fixtures/h200/README.md)."""
    import json

    lab = Path(__file__).parent.parent / "fixtures/h200"
    results = [json.loads(line) for line in (lab / "sync-free-h200.jsonl").read_text().splitlines()]
    for result in results:
        script = lab / f"{result['scenario']}.py"
        lines = enumerate(script.read_text().splitlines(), 1)
        commented = {f"{script.name}:{n}" for n, code in lines if "# SYNC" in code}
        if result["mode"] == "healthy":
            assert result["passed"], result
        else:
            assert not result["passed"] and {where for where, _, _ in result["syncs"]} == commented - {"w_list.py:19"}


def _corpus(name: str, tmp_path: Path) -> list[tuple[dict, Advice]]:
    """Each line of a corpus with nsync's advice for it, read in its function as the library wrote it (the
    line alone where the harvest kept no function)."""
    import json

    lines = json.loads((Path(__file__).parent.parent / "fixtures/syncs" / name).read_text())["lines"]
    advised = []
    for k, line in enumerate(lines):
        code = None
        if line["context"]:
            path = tmp_path / f"{name}-{k}.py"
            path.write_text(line["context"])
            code = read_code(str(path), line["context_line"])
        if code is not None:
            advised.append((line, advise_code(code, str(path))))
        else:
            pattern, dependency, fix = classify(line["code"])
            advised.append((line, Advice(pattern, dependency, "", "", None, "", fix, "code")))
    return advised


def _accuracy(name: str, tmp_path: Path) -> float:
    advised = _corpus(name, tmp_path)
    return sum(advice.pattern == line["pattern"] for line, advice in advised) / len(advised)


def test_the_pattern_is_right_on_every_line_of_the_set_it_was_tuned_on(tmp_path: Path) -> None:
    """56 real syncing lines of six libraries, labelled by hand (fixtures/syncs/tuning.json): 52 from their text
    alone, the other four from their function (a mask made two lines above, a module's _apply)."""
    assert _accuracy("tuning.json", tmp_path) == 1.0


def test_the_pattern_is_right_on_nine_in_ten_lines_of_a_set_scored_before_it_was_tuned_on(tmp_path: Path) -> None:
    """fixtures/syncs/held-out-2.json: 82 lines of six libraries (two no earlier set used), harvested and
    labelled by hand after the classifier's last change, scored once: 74 right (90 %). Two of its misses
    (``torch.equal``, ``seen = seen or (m >= level)``) were tuned on with held-out-4's: 77 now."""
    assert _accuracy("held-out-2.json", tmp_path) >= 77 / 82


def test_the_pattern_is_right_on_nine_in_ten_lines_of_the_first_held_out_set(tmp_path: Path) -> None:
    """fixtures/syncs/held-out.json, looked at by an earlier session: 41 of 54 (76 %) then; slices bounded by GPU
    values, ``x[i] = True``, ``and``/``or``/``not`` of a tensor and torch.save were tuned on with held-out-4's
    misses: 49 now. Left: a mask made in another function (four lines), a size read inside ``torch.full``."""
    assert _accuracy("held-out.json", tmp_path) >= 49 / 54


def test_the_fourth_held_out_set_scored_once_then_tuned_on(tmp_path: Path) -> None:
    """fixtures/syncs/held-out-4.json: 64 lines of ten libraries' paths no earlier set ran, harvested on the H100
    after held-out-3 was tuned on and labelled by hand before scoring; scored once at 57 (89 %), each of the seven
    misses 'no known pattern'. Six were tuned on since: a statement whose copy is on the line below the syncing
    one, a bare ``tensor(..., device=)``, a GPU value passed as ``topk``'s k, a ``list[int]`` parameter as an
    index, a CPU tensor assigned into a GPU slice, clip_grad_norm_'s error_if_nonfinite check. Left: a mask made
    in another function (``inpt[params["valid"]]``). held-out-5.json is the set scored after that change."""
    advised = _corpus("held-out-4.json", tmp_path)
    missed = [line["code"].strip() for line, advice in advised if advice.pattern != line["pattern"]]
    assert missed == ['output = inpt[params["valid"]]']


def test_the_fifth_held_out_set_scored_once_after_the_fourth_was_tuned_on(tmp_path: Path) -> None:
    """fixtures/syncs/held-out-5.json: 62 lines of seven libraries' paths no earlier set ran (Keypoint R-CNN,
    Mixtral, Wav2Vec2 CTC, PyG pooling layers, torchmetrics wrappers, peft's AdaLoRA and prompt tuning,
    sentence-transformers' losses, lightning's AMP and SWA), harvested on the H100 after held-out-4 was tuned on
    and labelled by hand before scoring; scored once at 50 (81 %). Two of its misses were then mended:
    ``.log()``/``logical_and`` taken for a logging call (4 lines told 'print'), and a factory's tensor moved to the
    GPU (``torch.zeros(1).to(d)``, 3 lines): 56 (90 %); then ``v if m.to(d) < v else m`` is a comparison on the
    GPU, not a copy (2 of 3 lines): 58 (94 %) now. Left: a boolean mask assigned through (1), sparse conversions
    whose size depends on the values (2), ``x if n == 0 else y`` where only the value tells ``n`` is a tensor."""
    advised = _corpus("held-out-5.json", tmp_path)
    assert sum(advice.pattern == line["pattern"] for line, advice in advised) >= 58


def _checked_on_the_gpu() -> dict:
    import json

    return json.loads((Path(__file__).parent.parent / "fixtures/syncs/rewrites-h100.json").read_text())


def test_rewrites_written_into_the_libraries_left_no_sync_at_their_lines_but_two_that_shared_a_statement() -> None:
    """Measured on the H100 (scripts/h200/check-rewrites.py): nsync's 20 rewrites of held-out-3's and held-out-4's
    lines, 19 written into the installed libraries (one set aside as touching a statement another had changed),
    and each program run again under sync_free. Every program still ran; 17 left no sync at their lines. The two
    left: a torch.where with two copies, of which one was
    fixed (its other line's rewrite, touching the same statement, was set aside: mended since, below), and a
    value copied into a GPU tensor at a Python list index, whose index still syncs (once per generate() call)."""
    checked = _checked_on_the_gpu()
    assert all(p["error_after"] is None for p in checked["programs"].values())
    left = {(r["file"], r["line"]) for r in checked["rewrites"] if r["applied"] and r["syncs_left"]}
    assert left == {("transformers/generation/logits_process.py", 1313),
                    ("transformers/generation/logits_process.py", 1348)}  # fmt: skip
    assert len({(r["file"], r["line"]) for r in checked["rewrites"] if r["applied"] and not r["syncs_left"]}) == 17


def test_the_sixth_held_out_set_scored_once_after_the_fifth_was_mended_then_tuned_on(tmp_path: Path) -> None:
    """fixtures/syncs/held-out-6.json: 73 lines of seven libraries (torchaudio's alignment and biquads, PyG's
    utilities and norms, torchmetrics' fairness and fixed-recall metrics, botorch's hypervolumes, torchdiffeq's
    Adams and event solvers...), harvested on the H100 after held-out-5's mends and labelled by hand before
    scoring; scored once at 63 (86 %). One label was wrong (an assert against torchdiffeq's max_num_steps, a device
    tensor: control flow, as nsync said; ``relabelled`` in the line): 64 (88 %). Its nine misses were tuned on
    after (a factory's index made on the host, a comprehension's filter, ``range(n.long())``, a list's
    ``.sort()``, ``**tkwargs``, masks by ``.all(dim)`` and by a row, an f-string beside a copy): held-out-7 scores
    that tuning."""
    assert _accuracy("held-out-6.json", tmp_path) == 1.0


def test_held_out_6_s_rewrites_written_into_the_libraries_left_no_sync_at_their_lines(tmp_path: Path) -> None:
    """Measured on the H100 before held-out-6 was scored: 31 rewrites written, every program ran, none left a sync
    at its lines. Two dropped an ``.item()`` whose value then sized a tensor (``torch.empty(b, n)``,
    ``torch.arange(0, n)``), which only moves the sync there: nsync now tells those as the host's use, unrewritten;
    the others are the ones it writes now."""
    checked = _checked_on_the_gpu()["held_out_6"]
    assert all(not p["error_after"] for p in checked["programs"].values())
    assert len(checked["rewrites"]) == 31 and all(r["applied"] and r["syncs_left"] == 0 for r in checked["rewrites"])
    corpus = {(line["file"], line["line"]): advice for line, advice in _corpus("held-out-6.json", tmp_path)}
    moved = {("botorch/utils/multi_objective/box_decompositions/utils.py", 85), ("torchdiffeq/_impl/solvers.py", 91)}
    for rewrite in checked["rewrites"]:
        advice = corpus.get((rewrite["file"], rewrite["line"]))
        if advice is None:
            continue
        if (rewrite["file"], rewrite["line"]) in moved:
            assert advice.rewrite is None and advice.dependency == "true"
        else:
            assert [t.strip() for t in (advice.rewrite or "").splitlines()] == [
                t.strip() for t in rewrite["rewrite"].splitlines()
            ], rewrite["line"]


def test_the_seventh_held_out_set_scored_once_after_the_sixth_was_tuned_on_then_tuned_on(tmp_path: Path) -> None:
    """fixtures/syncs/held-out-7.json: 103 lines of nine libraries (timm's optimizers, torchvision's RAFT,
    torchmetrics' ranking and retrieval metrics, PyG's pooling and label propagation, Longformer's global attention,
    gpytorch's grid interpolation...), harvested on the H100 after held-out-6's misses were tuned on and labelled by
    hand before scoring; scored once at 80 (78 %). Its 23 misses were tuned on after: a ``.float()`` taken for
    Python's float(), a max's 0-dim indices, ``x[~m]``, a Python counter assigned into a tensor, a ``List[int]``
    index, ``torch.finfo(...).min`` assigned, ``.any().item()``, pickle, ``torch.randperm(n).type_as(x)``, and a
    parameter given as a size on a line that cannot sync otherwise (Longformer's GPU count, 10 lines)."""
    assert _accuracy("held-out-7.json", tmp_path) == 1.0


def test_the_eighth_held_out_set_scored_once_then_tuned_on(tmp_path: Path) -> None:
    """fixtures/syncs/held-out-8.json: 79 lines (transformers' object-detection loss, Funnel and XLNet, torchmetrics,
    torch_geometric, botorch, Lightning, torchaudio, peft) harvested on the H100 after held-out-7 was tuned on and
    labelled by hand before scoring: 65 right (82 %). Tuned on since (tests/test_advice_indices.py): ``N.logcdf(y)``
    no logging call, the window functions as factories, a matcher's CPU indices indexing GPU tensors (4),
    ``new_tensor([...])``, 0-dim GPU indices as slice bounds and row index (3), peft's lists of lists (2),
    ``load_state_dict``, and a ``torch.tensor([...])`` made on the host assigned into a slice: 78. Left: a mask
    inside an ``if torch.any(...)`` filter, read as the filter's truth (both sync; the label names the mask)."""
    assert _accuracy("held-out-8.json", tmp_path) >= 78 / 79


def test_the_ninth_held_out_set_scored_once_after_the_eighth_was_tuned_on(tmp_path: Path) -> None:
    """fixtures/syncs/held-out-9.json: 100 lines (transformers' Mask2Former and its matched loss, LED, generate()'s
    processors, torchmetrics' clustering, nominal, panoptic and segmentation metrics, torch_geometric's utilities,
    torchvision's v2 box transforms, torchaudio's effects, Lightning, peft) harvested on the H100 (2026-12-07)
    after held-out-8 was tuned on, labelled by hand before scoring: 93 right (93 %), issue 43's 90 % met. The
    misses: ``torch.allclose`` (2) and ``arr.new(values)`` not known, a mask index returned (``dis[preds]``, the
    mask a parameter), a tensor's truth in a conditional expression, and two assignments of ``torch.tensor(c,
    device=d)`` through a mask, taken for the copy (the mask's sync is the one the rewrite left: below)."""
    assert _accuracy("held-out-9.json", tmp_path) >= 0.95  # 93 scored once, then the masked assignments tuned on


def _rewrite_check(name: str) -> dict:
    """What scripts/h200/check-rewrites.py wrote on the H100 (its paths cut to site-packages/)."""
    import json
    import lzma

    return json.loads(lzma.decompress((Path(__file__).parent.parent / "fixtures/syncs" / name).read_bytes()))


def test_held_out_8_s_rewrites_checked_again_with_the_mended_rewriter_broke_nothing_and_left_no_sync() -> None:
    """scripts/h200/check-rewrites.py held-out-8 on the H100 (2026-12-07), after ``.to(x)`` was rewritten only where
    x is evidently a device: 31 rewrites in 17 files, every call that ran before ran after, none left a sync at
    its lines, and XLNet's ``torch.eye(qlen).to(attn_mask)`` (the call the first check broke) is not among them."""
    checked = _rewrite_check("rewrites-8-h100-recheck.json.xz")
    ran = {name: program for name, program in checked.items() if "error_before" not in program}
    assert set(checked) - set(ran) == {"timm_models_eighth"}  # its timm lacks timm.data.RandomErasing
    rewrites = [r for program in ran.values() for r in program["rewrites"]]
    assert len(rewrites) == 31 and len({r["file"] for r in rewrites}) == 17
    assert all(p["error_after"] is None and not p["calls_broken"] for p in ran.values())
    assert all(r["applied"] and r["left_after"] == 0 for r in rewrites)
    assert not [r for r in rewrites if r["file"].endswith("modeling_xlnet.py") and r["line"] == 1104]


def test_held_out_9_s_rewrites_broke_nothing_and_left_a_sync_only_where_another_sync_shares_the_line(
    tmp_path: Path,
) -> None:
    """check-rewrites.py held-out-9 on the H100 (2026-12-07), with the classifier scored above: 38 rewrites in 13
    files, no call broken. Three left a sync at their line, each a second sync the rewrite does not touch: a
    Python list index (generate()'s sequence bias, once per generate() call, as in held-out-4), and two of
    torchaudio's ``temp[mask] = torch.tensor(c, device=d)``, whose masks still sync once the copy is pinned. Those
    two are read as the mask's now, with no rewrite; every other rewrite that left no sync is the one nsync writes
    now."""
    corpus = {(line["file"], line["line"]): advice for line, advice in _corpus("held-out-9.json", tmp_path)}
    assert corpus[("torchaudio/functional/filtering.py", 1186)].rewrite is None
    assert corpus[("torchaudio/functional/filtering.py", 1190)].rewrite is None
    checked = _rewrite_check("rewrites-9-h100.json.xz")
    rewrites = [r for program in checked.values() for r in program["rewrites"]]
    assert len(rewrites) == 38 and len({r["file"] for r in rewrites}) == 13
    assert all(p["error_after"] is None and not p["calls_broken"] for p in checked.values())
    left = {(r["file"].split("site-packages/")[-1], r["line"]) for r in rewrites if r["left_after"]}
    assert left == {("transformers/generation/logits_process.py", 1348), ("torchaudio/functional/filtering.py", 1186),
                    ("torchaudio/functional/filtering.py", 1190)}  # fmt: skip
    compared = 0
    for rewrite in rewrites:
        advice = corpus.get((rewrite["file"].split("site-packages/")[-1], rewrite["line"]))
        if advice is not None and not rewrite["left_after"]:
            compared += 1
            assert [t.strip() for t in (advice.rewrite or "").splitlines()] == [
                t.strip() for t in rewrite["rewrite"].splitlines()
            ], rewrite["line"]
    assert compared >= 13  # (the others are lines of earlier sets)


def test_held_out_7_s_rewrites_run_on_the_gpu_and_the_four_that_broke_a_call_no_longer_written(
    tmp_path: Path,
) -> None:
    """Measured on the H100 before held-out-7 was scored: 39 rewrites written, no program failed, 38 left no sync
    at their lines. Longformer's two ``assert list(x.size()) == [b, n, s]`` (``n`` a GPU value), rewritten to
    ``torch._assert_async`` of a Python bool, raised a TypeError that the program's call runner passed over (the
    first still synced; the lines after it did not run). timm Adafactor's two ``torch.zeros(...).to(grad)``,
    rewritten with ``device=grad`` (a tensor: a TypeError, as XLNet's ``.to(attn_mask)`` broke in held-out-8's
    check), left no sync because their lines no longer ran. nsync no longer rewrites these four; each other rewrite
    is the one it writes now."""
    checked = _checked_on_the_gpu()["held_out_7"]
    assert all(not p["error_after"] for p in checked["programs"].values())
    assert len(checked["rewrites"]) == 39 and all(r["applied"] for r in checked["rewrites"])
    longformer = "transformers/models/longformer/modeling_longformer.py"
    assert {(r["file"], r["line"]) for r in checked["rewrites"] if r["syncs_left"]} == {(longformer, 1005)}
    broke = {(longformer, 1005), (longformer, 1043), ("timm/optim/adafactor.py", 166), ("timm/optim/adafactor.py", 167)}
    corpus = {(line["file"], line["line"]): advice for line, advice in _corpus("held-out-7.json", tmp_path)}
    compared = 0
    for rewrite in checked["rewrites"]:
        advice = corpus.get((rewrite["file"], rewrite["line"]))
        if advice is None:
            continue
        if (rewrite["file"], rewrite["line"]) in broke:
            assert advice.rewrite is None
        elif advice.rewrite is not None or "= tensor(" not in rewrite["rewrite"]:  # (a bare ``tensor`` needs the
            compared += 1  # file's ``from torch import tensor``, which the corpus, keeping the function, lacks)
            assert [t.strip() for t in (advice.rewrite or "").splitlines()] == [
                t.strip() for t in rewrite["rewrite"].splitlines()
            ], rewrite["line"]
    assert compared >= 14  # (the others are lines of earlier sets)


def test_held_out_5_s_rewrites_written_into_the_libraries_left_no_sync_and_are_the_ones_nsync_writes(
    tmp_path: Path,
) -> None:
    """Measured on the H100 (scripts/h200/check-rewrites.py held-out-5, after held-out-5's misses were mended): 18
    rewrites written, every program still ran, none left a sync at its lines; each is the one nsync writes now."""
    checked = _checked_on_the_gpu()["held_out_5"]
    assert all(p["error_after"] is None for p in checked["programs"].values())
    assert len(checked["rewrites"]) == 18
    assert all(r["applied"] and r["syncs_left"] == 0 for r in checked["rewrites"])
    corpus = {(line["file"], line["line"]): advice for line, advice in _corpus("held-out-5.json", tmp_path)}
    for rewrite in checked["rewrites"]:
        advice = corpus.get((rewrite["file"], rewrite["line"]))
        if advice is not None:  # (a line of an earlier set is checked there)
            assert [t.strip() for t in (advice.rewrite or "").splitlines()] == [
                t.strip() for t in rewrite["rewrite"].splitlines()
            ], rewrite["line"]


def test_the_rewrites_checked_on_the_gpu_are_the_ones_nsync_writes_now(tmp_path: Path) -> None:
    """So that the measurement above stands for the code as it is: each rewrite that left no sync is the one
    nsync writes for that line today (read in its function from the corpora); the torch.where statement's two
    lines now get one rewrite of both copies, with no copy from pageable memory left in it."""
    corpus = {
        (line["file"], line["line"]): (line, advice)
        for name in ["tuning.json", "held-out.json", "held-out-3.json", "held-out-4.json"]
        for line, advice in _corpus(name, tmp_path)
    }

    def stripped(text: str | None) -> list[str]:
        return [part.strip() for part in (text or "").splitlines()]

    for checked in _checked_on_the_gpu()["rewrites"]:
        _line, advice = corpus[(checked["file"], checked["line"])]
        if checked["applied"] and not checked["syncs_left"]:
            assert stripped(advice.rewrite) == stripped(checked["rewrite"]), (checked["file"], checked["line"])
    where = [corpus[("transformers/generation/logits_process.py", n)][1] for n in (1313, 1314)]
    assert where[0].rewrite == where[1].rewrite and "device=" not in (where[0].rewrite or "x device=")
    # and written so, on the H100 again: no sync left at either line
    rechecked = {r["line"]: r for r in _checked_on_the_gpu()["rechecked"]["rewrites"]}
    assert stripped(rechecked[1313]["rewrite"]) == stripped(where[0].rewrite)
    assert [(rechecked[n]["applied"], rechecked[n]["syncs_left"]) for n in (1313, 1314)] == [(True, 0), (True, 0)]


def test_the_third_held_out_set_once_scored_is_now_tuned_on(tmp_path: Path) -> None:
    """fixtures/syncs/held-out-3.json: 50 lines of per-batch copies, per-step reads and checks in seven libraries,
    labelled before scoring, scored once at 38 (76 %); its twelve misses were then tuned on (a copy to the host,
    a passed-on non_blocking, masks negated or mixed by name, 0-dim GPU indices, a list built at run time), so
    it is a tuning set now: held-out-4.json is the set scored after that change."""
    assert _accuracy("held-out-3.json", tmp_path) == 1.0


@pytest.mark.parametrize(
    "name",
    [
        "tuning.json",
        "held-out.json",
        "held-out-2.json",
        "held-out-3.json",
        "held-out-4.json",
        "held-out-5.json",
        "held-out-6.json",
        "held-out-7.json",
        "held-out-8.json",
        "held-out-9.json",
    ],
)
def test_every_rewrite_of_a_corpus_line_parses_and_none_contradicts_its_label(name: str, tmp_path: Path) -> None:
    """A rewrite is only ever written for the pattern nsync recognised: on a line it got wrong, a rewrite would
    fix the wrong thing. None is written there, and each one written parses in its function."""
    import ast

    written = 0
    for line, advice in _corpus(name, tmp_path):
        if advice.rewrite is None and not advice.setup:
            continue
        assert advice.pattern == line["pattern"], (line["file"], line["line"], advice.pattern)
        lines = line["context"].splitlines()
        if advice.rewrite is not None:
            lines[advice.first_line - 1 : advice.last_line] = advice.rewrite.splitlines()
            written += 1
        if advice.setup_line:
            lines[advice.setup_line - 1 : advice.setup_line - 1] = advice.setup.splitlines()
        ast.parse("\n".join(lines))
    assert written > 0


def test_a_labelling_sheet_keeps_only_new_lines_and_never_shows_nsync_s_answer(tmp_path: Path) -> None:
    """scripts/label_sheet.py as a subprocess on a harvest built by construction: two lines an earlier set holds
    (one by file and line, one by file and code at a moved line), a harvest program's own line, a program that
    failed, and one new line whose harvest-time answer must not reach the sheet, so labels stay blind."""
    import json
    import subprocess
    import sys

    known = json.loads((Path(__file__).parent.parent / "fixtures/syncs/held-out-7.json").read_text())["lines"][:2]
    new = {"file": "lib/new.py", "line": 3, "function": "f", "code": "if t:", "pattern": "ANSWER-AT-HARVEST",
           "count": 2, "context": "def f(t):\n    if t:\n        pass\n", "context_line": 2}  # fmt: skip
    harvest = {
        "p": [
            dict(known[0], count=1),
            dict(known[1], line=known[1]["line"] + 40, count=1),
            new,
            {**new, "file": "/root/nsync/scripts/h200/harvest_each.py", "code": "x.item()"},
        ],
        "broken": {"error": "RuntimeError: no GPU"},
    }
    (tmp_path / "harvest.json").write_text(json.dumps(harvest))
    script = Path(__file__).parent.parent / "scripts/label_sheet.py"
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "harvest.json")],
                          capture_output=True, text=True, check=True)  # fmt: skip
    lines = json.loads(done.stdout)["lines"]
    kept = [(line["file"], line["line"], line["pattern"], line["syncs"]) for line in lines]
    assert kept == [("lib/new.py", 3, "", 2)]
    assert "ANSWER-AT-HARVEST" not in done.stdout
    assert "left out: {'earlier set': 2, 'harvest script': 1, 'program failed': 1}" in done.stderr
