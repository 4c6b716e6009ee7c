"""Stage 5: renderers. Each takes an :class:`nsync.analysis.Analysis` and returns text."""
