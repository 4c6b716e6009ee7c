"""The analysis's stages, in the order nsync.analysis runs them on a loaded trace (nsync.load):

1. ``detect``: which CUDA calls blocked the host (the syncs), and their kind.
2. ``steps``: the steps (NVTX ranges, optimizer-step marks, or the kernel period), warm-up left out.
3. ``attribute``: each sync's host wait, the lead before it, the GPU idle it exposed.
4. ``callsites``: each sync's user frame and sync frame, grouped into call sites.
5. ``replay``: the what-if, what fixing each call site would save per step; ``advice``: how to fix each one,
   written from its code.
6. ``phases`` and ``excerpt``: start-up, main loop and evaluation; the timeline excerpt the HTML draws.

``timeline`` holds the interval arithmetic they share. Each stage declares the columns it adds
(``SYNC_COLUMNS``, ``ATTRIBUTED_COLUMNS``, ...), which tests/test_stage_contracts.py checks.
"""
