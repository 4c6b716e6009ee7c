"""The settings that messages tell the reader to change, named as the reader knows them.

A library message names the API (``AnalysisConfig.window_s``); the command line's user knows the flag
(``--window START:END``). Messages call :func:`setting` when they are written, and the command line says once,
before any work, which names its users read (:func:`name_settings`): no message is rewritten afterwards.
"""

from __future__ import annotations

from collections.abc import Mapping

_NAMES: dict[str, str] = {}


def setting(api_name: str) -> str:
    """``api_name`` (e.g. ``AnalysisConfig.window_s``) as this process's reader knows it."""
    return _NAMES.get(api_name, api_name)


def name_settings(names: Mapping[str, str]) -> None:
    """From now on, messages name each API setting of ``names`` by its value (the command line: its flag)."""
    _NAMES.update(names)
