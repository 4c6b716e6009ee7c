"""Everything that runs the user's program: under nsys (nsys/) or torch.profiler (torch_profiler.py), unprofiled to
calibrate or to measure (calibrate.py), in a notebook's own process (notebook.py), and ``nsync profile`` over them
(options.py, profile.py). One launcher (run.py) builds the environment of nsync's code injected into the program
(inject/, which runs inside the user's interpreter and imports nothing of nsync). Nothing here is imported by
``import nsync``: ab.py (``nsync.fixed()``, ``nsync.step()``) is loaded by measured programs."""
