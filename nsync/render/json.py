"""The JSON of any result: its facts, under its schema (``nsync.analysis/2``, ``nsync.diff/1``, ``nsync.ranks/2``,
``nsync.measure/1``); what ``--json`` writes and ``--from`` reads back."""

from __future__ import annotations

import json

from nsync.render.options import RenderOptions
from nsync.report import Result


def render_json(result: Result, options: RenderOptions = RenderOptions()) -> str:
    return json.dumps(result.to_dict(), indent=2, allow_nan=False) + "\n"
