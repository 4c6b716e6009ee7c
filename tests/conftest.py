"""Shared fixtures: real H200 traces (decompressed once per session) and the synthetic trace builder."""

from __future__ import annotations

import hashlib
import lzma
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from nsync import AnalysisConfig, analyze
from nsync.analysis import Analysis
from tests.tracebuilder import TraceBuilder

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="session", autouse=True)
def committed_fixtures_are_left_alone() -> Iterator[None]:
    """nsync opens user files read-only: the suite must leave every fixture byte-identical."""
    before = _digest(FIXTURES)
    yield
    assert _digest(FIXTURES) == before


@pytest.fixture(scope="session")
def h200(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """Path of a real H200 export (fixtures/h200/NAME.sqlite.xz), decompressed once per session."""
    folder = tmp_path_factory.mktemp("h200")

    def get(name: str) -> Path:
        target = folder / f"{name}.sqlite"
        if not target.exists():
            with lzma.open(FIXTURES / "h200" / f"{name}.sqlite.xz") as src, target.open("wb") as dst:
                shutil.copyfileobj(src, dst)
        return target

    return get


@pytest.fixture(scope="session")
def h200_analysis(h200: Callable[[str], Path]) -> Callable[[str], Analysis]:
    cache: dict[str, Analysis] = {}

    def get(name: str) -> Analysis:
        if name not in cache:
            cache[name] = analyze(h200(name))
        return cache[name]

    return get


@pytest.fixture
def build(tmp_path: Path) -> Callable[..., Analysis]:
    """Write a TraceBuilder to disk and analyse it."""

    def run(builder: TraceBuilder, **config: object) -> Analysis:
        path = builder.write(tmp_path / f"synthetic-{len(list(tmp_path.iterdir()))}.sqlite")
        return analyze(path, AnalysisConfig(**config))  # type: ignore[arg-type]

    return run
