"""Code that ``nsync profile`` puts on the profiled program's ``PYTHONPATH``: a ``sitecustomize`` that marks
each optimizer step with an NVTX range, so that steps are known without editing the program.

Its folder is found with :func:`folder`; the range name is :data:`nsync.marks.STEP_MARK` (written again, as a literal,
in ``sitecustomize.py``, which must not import nsync inside the user's process).
"""

from __future__ import annotations

import os
from pathlib import Path

from nsync.marks import STEP_MARK, WINDOW_RANGE

__all__ = ["STEP_MARK", "WINDOW_RANGE", "folder", "pythonpath"]


def folder() -> Path:
    """The folder holding ``sitecustomize.py`` (a real folder: wheels and editable installs unpack it)."""
    return Path(__file__).resolve().parent


def pythonpath(existing: str | None) -> str:
    """A program's PYTHONPATH with this folder first (its own entries kept after it)."""
    return os.pathsep.join(p for p in (str(folder()), existing) if p)
