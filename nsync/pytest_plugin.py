"""nsync's pytest plugin: ``@pytest.mark.sync_free(allow=[...])`` runs the test under nsync.testing.sync_free,
which fails it with every CUDA sync it made (the line, its pattern, the fix). Loaded by pytest through the
``pytest11`` entry point; it imports neither torch nor nsync's analysis until a marked test runs."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "sync_free(allow=()): fail the test when it makes the GPU sync (nsync.testing.sync_free)"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    marker = item.get_closest_marker("sync_free")
    if marker is None:
        return (yield)
    from nsync.testing import sync_free

    with sync_free(*marker.args, **marker.kwargs):
        return (yield)
