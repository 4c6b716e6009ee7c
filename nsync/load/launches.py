"""Each GPU op joined to the CUDA call that launched it: the same in both formats, whose ops and calls share a
process and a correlation id."""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsync.keys import match_rows_and_repeats, take_matched


def with_launches(ops: dict[str, np.ndarray], api: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """The GPU ops joined to the calls that launched them (same process and correlationId): launch_start,
    launch_end and launch_tid; which calls launched some op (a mask over ``api``, for the loader's
    cross-check); and which calls repeat an earlier call's (process, correlationId) (written twice). An op
    whose call was not traced (nsys skips some APIs) gets its GPU start as launch time: it cannot have been
    launched later than that."""
    row, repeated = match_rows_and_repeats(
        ops["global_pid"], ops["correlation_id"], api["global_pid"].to_numpy(), api["correlation_id"].to_numpy()
    )
    ops["launch_start"] = take_matched(api["start"].to_numpy(), row, ops["start"])
    ops["launch_end"] = take_matched(api["end"].to_numpy(), row, ops["start"])
    ops["launch_tid"] = take_matched(api["global_tid"].to_numpy(), row)
    launched_op = np.zeros(len(api), bool)
    launched_op[row[row >= 0]] = True
    return pd.DataFrame(ops, copy=False), launched_op, repeated
