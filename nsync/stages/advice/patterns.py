"""The patterns of syncing lines, from the articles nsync grew from, and the classifier of a line's text."""

from __future__ import annotations

import re
from typing import NamedTuple

UNKNOWN = "no known pattern"


class Pattern(NamedTuple):
    """One pattern's entry: a pattern may have several (a copy to the host is not fixed like one to the device)."""

    name: str
    dependency: str  # whether the host truly needs the value
    expression: re.Pattern[str] | None  # on the line's text (None: found in the line's function)
    fix: str
    short: str  # the fix in a few words (a rewriter may say it more precisely)


# The patterns' entries, first match wins. Tuned on fixtures/syncs/tuning.json (56 lines of six libraries) and
# the lab scenarios; scored on fixtures/syncs/held-out-2.json, which it was not tuned on (tests/test_sync_free.py).
# A line whose text fits none is read in its function (_from_function).
# a call's parentheses with no top-level comma (commas inside brackets and nested calls allowed)
_ONE_ARGUMENT = r"\((?:[^(),\[\]]|\[[^\]]*\]|\((?:[^()]|\([^()]*\))*\))*\)"
# a .to() whose only argument is a dtype (``.to(x.dtype)``, ``.to(torch.float32)``, ``.to(result_dtype)``): a cast,
# not a copy
_NOT_A_DTYPE = (
    r"(?!\s*(?:dtype\s*=\s*)?(?:[\w.]*\.dtype|\w*dtype|torch\.(?:u?int\d*|float\d*|half|bfloat16|double|long|bool"
    r"|complex\d*))\s*\))"
)


_READ = (
    "keep the value on the GPU (accumulate it there) and read it every N steps or after the loop (read once a step, "
    "it still syncs once a step); several reads: torch.stack them and copy once"
)
# a logging call (``log(...)``, ``self.log_dict(...)``), not the math of ``x.log()``, ``torch.log``, ``logsumexp``,
# a distribution's ``logcdf``...
_LOG_CALL = (
    r"(?<!torch\.)\blog(?!ical_|sumexp|_?softmax|1p|2\b|10\b|addexp|det|cumsumexp|it\b|_prob|_normal|sigmoid"
    r"|cdf|pdf|pmf|sf\b|gamma|space)\w*"
    r"\s*\((?!\s*\))"
)
# a factory's tensor made on the host (no device=) and moved: ``torch.zeros(1).to(d)``, ``torch.eye(c).type_as(x)``
FACTORIES = (
    *("zeros", "ones", "full", "eye", "empty", "arange", "linspace", "logspace", "randperm"),
    *(f"{name}_window" for name in ("hann", "hamming", "blackman", "bartlett", "kaiser")),
)
_MADE_THEN_MOVED = (
    r"\btorch\.(?:" + "|".join(FACTORIES) + r")\s*\((?:(?!device)[^()]|\((?:(?!device)[^()])*\))*\)\s*"
    r"\.(?:to|type_as|cuda)\s*\("
)
_PRINT_LATER = "log it every N steps, or keep the values on the GPU and print them once after the loop"
_DECIDE_ON_GPU = "compute both outcomes and select on the GPU (torch.where), or move the check out of the step"
_BUILD_ONCE = "build the tensor once, before the loop (or from pinned memory with non_blocking=True)"
_TO_HOST = (
    "a result copied to the host each step: keep it on the GPU and copy it every N steps or after the loop, or "
    "copy it into pinned memory with non_blocking=True and wait on an event only where it is used"
)


# a ``.to()`` / ``.cuda()``: a copy where the value is elsewhere, nothing where it is already there
MOVED = Pattern(
    "copy between host and device",
    "false",
    re.compile(r"\.(to|cuda)\s*\(" + _NOT_A_DTYPE + r"|super\(\)\.cpu\s*\("),
    "a batch copied each step: pin it (DataLoader(pin_memory=True), or .pin_memory()) and copy with "
    "non_blocking=True; a model, a metric's state or a constant: move it once, before the loop",
    "pin it and copy non_blocking, or move it once",
)


# an f-string formats a CUDA tensor only where it holds one: a certain copy on its line (or its statement's
# lines below) comes first
FORMATTED = Pattern("print of a CUDA tensor", "false", re.compile(r"\bf[\"']"), _PRINT_LATER, "print after the loop")


PATTERNS: list[Pattern] = [
    Pattern(
        "explicit synchronize",
        "false",
        re.compile(r"\bsynchronize\s*\("),
        "delete it, or wait on an event recorded after the work you need (event.synchronize()) only where the "
        "host must know that work is done",
        "delete the synchronize",
    ),
    Pattern(
        "print of a CUDA tensor",
        "false",
        re.compile(r"\bprint\s*\(|" + _LOG_CALL),
        _PRINT_LATER,
        "print after the loop",
    ),
    Pattern(
        "control flow on a GPU value",
        "true",
        # a statement's test, a reduction's truth, or a comprehension's filter by a comparison (``... if r >= m``)
        re.compile(
            r"^\s*(if|elif|while|assert)\b|\.(any|all)\s*\(\s*\)(?!\s*\.item)|\bfor\b.+\bin\b.+\bif\b.*(?:[<>]=?|[=!]=)"
        ),
        _DECIDE_ON_GPU,
        "decide on the GPU (torch.where)",
    ),
    Pattern(
        "control flow on a GPU value",
        "false",
        re.compile(r"\bclip_grad_norm_?\s*\("),  # it syncs only to check the norm: error_if_nonfinite=True
        "clip_grad_norm_(error_if_nonfinite=True) reads the norm to the host each step: leave the flag False and "
        "check torch.isfinite(norm) on the GPU, read every N steps",
        "check the norm on the GPU",
    ),
    Pattern(
        "host-to-device copy of a Python value",
        "false",
        # torch.tensor(...), a bare tensor(...) (``from torch import tensor``), torch.zeros(1).to(d), or a tensor's
        # new_tensor([...]) (made where the tensor is); a device= may come in unpacked keywords
        # (``torch.tensor(0.0, **tkwargs)``)
        re.compile(
            r"(?:\btorch\.|(?<![.\w]))(tensor|as_tensor)\s*\((.*device|.*\*\*\w|[^()]*\)\.to\s*\()|"
            r"\.new_tensor\s*\(|" + _MADE_THEN_MOVED
        ),
        _BUILD_ONCE,
        "build the tensor once",
    ),
    FORMATTED,
    Pattern(
        "index from a Python tuple or list",
        "false",
        re.compile(r"\[[^\]]*[(\[]\s*-?\d+\s*,"),
        "make the index a CUDA tensor once, before the loop (torch.tensor(..., device=x.device)), and index with it",
        "index with a CUDA tensor",
    ),
    Pattern(
        "copy from pageable memory",
        "false",
        re.compile(r"\.(to|cuda)\s*\(.*non_blocking\s*=\s*True"),
        "pin the host tensor once (.pin_memory(), or DataLoader(pin_memory=True)): non_blocking is then asynchronous",
        "pin the host tensor",
    ),
    Pattern(
        "value read",
        "false",
        # torch.equal gives a Python bool; range() reads a tensor's value as an int (``range(n.long())``)
        re.compile(
            r"\.(item|tolist)\s*\(|\btorch\.equal\s*\(|\brange\s*\((?:[^()]|\([^()]*\))*\.(?:long|int)\s*\(\s*\)"
        ),
        _READ,
        "keep the value on the GPU",
    ),
    MOVED,
    Pattern(
        "dynamic shape (a mask or nonzero)",
        "true",
        re.compile(
            r"\.nonzero\s*\(|\bnonzero\s*\(|masked_select|\.unique\s*\(|\bunique\s*\(|repeat_interleave|bincount"
            r"|\[[^\]]*(==|!=|<=|>=|<|>)|\[[^\]]*\b\w*mask\s*\]|torch\.where\s*" + _ONE_ARGUMENT
        ),
        "keep the shape fixed: torch.where(mask, x, 0) or a multiply by the mask; pass output_size= to "
        "repeat_interleave",
        "keep the shape fixed",
    ),
    Pattern(
        "host-to-device copy of a Python value",
        "false",
        # x[i] = 0, x[m] = torch.finfo(x.dtype).min: the Python value is copied to the GPU
        re.compile(
            r"\]\s*=\s*(-?[\d.]+|True|False|-?torch\.finfo\([^()]*\)\.\w+|-?math\.inf|float\([\"']-?inf[\"']\))\s*$"
        ),
        _BUILD_ONCE,
        "build the tensor once",
    ),
    Pattern(
        "value read",
        "false",
        re.compile(r"(?<![.\w])(float|int|bool)\s*\("),  # Python's, not a tensor's ``.float()``
        _READ,
        "keep the value on the GPU",
    ),
    Pattern(
        "copy between host and device",
        "false",
        re.compile(r"\.(cpu|numpy)\s*\(|\btorch\.save\s*\(|\bpickle\.dumps?\s*\("),  # they copy CUDA tensors
        _TO_HOST,
        "copy it after the loop",
    ),
    Pattern(
        "copy between host and device",
        "false",
        re.compile(r"\bload_state_dict\s*\("),  # each tensor of the state copied into the module's, from the host
        "a state loaded copies each of its tensors into the module's: load it once, outside the loop, and a "
        "checkpoint read straight to the GPU (torch.load(..., map_location=device)) copies nothing from the host",
        "load the state once",
    ),
    Pattern(
        "Python builtin on tensors",
        "false",
        # (a list's ``.sort()`` as a statement: a tensor's returns its values, and syncs not)
        re.compile(r"(?<![.\w])(max|min|sum|any|all|abs|sorted)\s*\(|^\s*[\w.]+\.sort\s*\(\s*\)\s*$"),
        "use the torch op (torch.maximum, torch.sum, ...), which stays on the GPU",
        "use the torch op",
    ),
]


PRINT = "print of a CUDA tensor"


INDEX = "index from a Python tuple or list"


UNKNOWN_PATTERN = Pattern(
    UNKNOWN,
    "unknown",
    None,
    "find what this line reads from the GPU and keep it there (nsync profile prices it)",
    "keep the value on the GPU",
)


def entry(name: str) -> Pattern:
    """A pattern's first entry (its general fix)."""
    return next(p for p in PATTERNS if p.name == name)


def recognise(code: str) -> Pattern:
    """The entry that fits a syncing source line's text (less a trailing comment); UNKNOWN_PATTERN when none does."""
    statement = re.split(r"\s#", code, maxsplit=1)[0]
    return next((p for p in PATTERNS if p.expression and p.expression.search(statement)), UNKNOWN_PATTERN)


def classify(code: str) -> tuple[str, str, str]:
    """(pattern, dependency, fix) of a syncing source line, from its text; a general answer when none fits."""
    found = recognise(code)
    return found.name, found.dependency, found.fix
