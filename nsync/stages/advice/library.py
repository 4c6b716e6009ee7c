"""Known libraries: a sync they issue is fixed by their own setting, where one exists."""

from __future__ import annotations

import re

from nsync.stages.advice.model import Advice

_LIBRARY_FIXES: list[tuple[str, re.Pattern[str], str, str, str, str]] = [
    # (package, path and function, pattern, why, the switch, caveat)
    (
        "transformers",
        re.compile(r"trainer\.py:(_run_epoch|_inner_training_loop|training_step)$"),
        "control flow on a GPU value",
        "the Trainer checks every step's loss for NaN or Inf on the host (torch.isnan(...) or torch.isinf(...))",
        "TrainingArguments(..., logging_nan_inf_filter=False)",
        "a NaN or Inf loss is then logged as it is instead of being replaced by the running average",
    ),
    (
        "transformers",
        re.compile(r"trainer\.py:_maybe_log_save_evaluate$"),
        "value read",
        "the Trainer reads the loss and the gradient norm on the host each time it logs",
        "TrainingArguments(..., logging_steps=N)  # a larger N: fewer reads",
        "the reads remain, once every logging_steps steps",
    ),
    (
        "transformers",
        re.compile(r"masking_utils\.py:_ignore_causal_mask_sdpa$"),
        "control flow on a GPU value",
        "the attention-mask check reads whether the padding mask is all ones, on the host, each forward",
        "model(input_ids, attention_mask=None)  # only for batches without padding",
        "with padding the mask is needed, and so is the check",
    ),
    (
        "transformers",
        re.compile(r"generation/(utils|stopping_criteria)\.py:"),
        "value read",
        "generate() reads on the host, each token, whether every sequence has finished",
        "",
        "no setting of generate removes this read: it is one sync per token, priced here; batch more prompts "
        "per call to spread it",
    ),
    (
        "torchvision",
        re.compile(r"(ops/boxes|ops/poolers|models/detection/\w+)\.py:"),
        "data-dependent shape",
        "the detection model keeps a number of boxes, proposals or matches known only on the GPU (non-maximum "
        "suppression, small-box removal, sampling), so the host reads it to size what follows",
        "",
        "no setting of torchvision removes these: they are how the model works, priced here so that the rest "
        "is weighed against them",
    ),
    (
        "accelerate",
        re.compile(r"operations\.py:send_to_device$"),
        "copy from pageable memory",
        "the batch is copied to the GPU from pageable memory, so the host waits for each copy",
        "DataLoader(..., pin_memory=True)  # Trainer: TrainingArguments(dataloader_pin_memory=True)",
        "pinned memory is page-locked RAM: fine for batches, not for whole datasets",
    ),
    (
        "torchmetrics",
        re.compile(r"utilities/data\.py:_bincount$"),
        "data-dependent shape",
        "the metric counts classes with torch.bincount, which reads the largest value on the host to size its output",
        "",
        "no setting of torchmetrics removes it (validate_args does not): update the metric every N steps on the "
        "batches kept on the GPU, or compute it after the loop",
    ),
    (
        "torchmetrics",
        re.compile(r":(_\w*validation|_check\w*|_input_format\w*)$"),
        "value read",
        "the metric checks its inputs on the host at each update",
        "Metric(..., validate_args=False)  # torchmetrics' classification metrics",
        "the inputs are then not checked: validate them once in a test",
    ),
    (
        "torch_geometric",
        re.compile(r"(num_nodes|_scatter|_to_dense_batch)\.py:"),
        "value read",
        "the number of nodes (or the batch size) is read from the GPU with .max() because it was not given",
        "pass it: num_nodes=... (dim_size=..., batch_size=..., max_num_nodes=...)",
        "the value passed must be right for every batch",
    ),
    (
        "lightning",
        re.compile(r"apply_func\.py:to_item$|logger_connector"),
        "value read",
        "Lightning reads each logged tensor on the host (self.log) when it logs a step",
        "Trainer(log_every_n_steps=N), or self.log(..., on_step=False, on_epoch=True)",
        "the values are read less often, not never",
    ),
]


def library_advice(package: str, file: str, function: str) -> Advice | None:
    """The switch of a known library for a sync it issues in ``file``'s ``function``, or None."""
    key = f"{file}:{function}"
    for name, where, pattern, why, switch, caveat in _LIBRARY_FIXES:
        if package.startswith(name) and where.search(key):
            return Advice(
                pattern=pattern,
                dependency="false" if switch else "true",
                short=f"a setting of {name}" if switch else f"inside {name}: no setting",
                why=f"{why} (inside {package}, not in your code).",
                rewrite=None,
                setup=switch,
                caveat=caveat,
                basis="library",
                file=file,
            )
    return None
