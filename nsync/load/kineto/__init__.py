"""A torch.profiler (Kineto) Chrome trace read into the same :class:`Trace` as an nsys export: decode.py reads
the JSON into typed records, stacks.py rebuilds each call's Python stack from the ``python_function`` events,
trace.py fills the columns."""

from nsync.load.kineto.trace import load_kineto

__all__ = ["load_kineto"]
