"""Library knowledge (nsync.knowledge): one table, read once, that both the advice and the step finder ask."""

from __future__ import annotations

import pandas as pd

from nsync.knowledge import generate_reads, library_sync
from nsync.knowledge.libraries import known

SITE = "/venv/lib/python3.11/site-packages/"


def test_a_library_sync_is_known_by_its_package_file_and_function() -> None:
    found = library_sync("transformers", f"{SITE}transformers/trainer.py", "_maybe_log_save_evaluate")
    assert found is not None and found.switch.startswith("TrainingArguments(..., logging_steps=N)")
    # the same file, a function the table does not name; the same function in another package
    assert library_sync("transformers", f"{SITE}transformers/trainer.py", "evaluate") is None
    assert library_sync("mylib", f"{SITE}mylib/trainer.py", "_maybe_log_save_evaluate") is None


def test_an_entry_with_two_places_matches_either_and_a_function_alone_matches_any_file() -> None:
    logged = [library_sync("lightning", f"{SITE}lightning/{f}", fn) for f, fn in (
        ("fabric/utilities/apply_func.py", "to_item"),
        ("pytorch/trainer/connectors/logger_connector/result.py", "update"),
        ("fabric/utilities/apply_func.py", "move_data_to_device"),
    )]  # fmt: skip
    assert [e.name if e else None for e in logged] == ["logged-values", "logged-values", None]
    checked = library_sync("torchmetrics", f"{SITE}torchmetrics/functional/x.py", "_multiclass_stat_scores_validation")
    assert checked is not None and checked.switch.startswith("Metric(..., validate_args=False)")


def test_generate_s_reads_are_told_by_the_same_entry_the_advice_reads() -> None:
    files = pd.Series([
        f"{SITE}transformers/generation/utils.py",
        f"{SITE}transformers/generation/stopping_criteria.py",
        f"{SITE}transformers/trainer.py",
        "/home/me/generation/utils.py",
    ])  # fmt: skip
    assert generate_reads(files).tolist() == [True, True, False, False]
    entry = library_sync("transformers", files[0], "_sample")
    assert entry is not None and entry.name == "generate" and entry.switch == ""


def test_every_entry_names_its_package_a_place_and_why() -> None:
    entries = known()
    assert len({e.name for e in entries}) == len(entries) >= 10
    assert all(e.package and e.where and e.why and e.caveat for e in entries)
