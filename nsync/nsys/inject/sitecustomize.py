"""Put on PYTHONPATH by ``nsync profile``: marks every optimizer step with an NVTX range.

When ``torch.optim.optimizer`` is imported, global step hooks (PyTorch's
``register_optimizer_step_pre_hook`` / ``..._post_hook``, called for every optimizer) open and close an
NVTX range named ``nsync: optimizer step``. That costs about a microsecond a step and no GPU work; nsync
then times each step from one optimizer step's end to the next. Nothing else changes: the
``sitecustomize`` this one shadows (if any) is run after it, and no module is imported early.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_MARK = "nsync: optimizer step"
_TARGET = "torch.optim.optimizer"


def _install_hooks(optimizer_module):
    try:
        from torch.cuda import nvtx
    except Exception:  # no CUDA build: nothing to mark
        return

    def before_step(optimizer, args, kwargs):
        nvtx.range_push(_MARK)

    def after_step(optimizer, args, kwargs):
        nvtx.range_pop()

    optimizer_module.register_optimizer_step_pre_hook(before_step)
    optimizer_module.register_optimizer_step_post_hook(after_step)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the loader of ``torch.optim.optimizer`` to install the hooks once it ran."""

    def find_spec(self, name, path, target=None):
        if name != _TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run_module = spec.loader.exec_module

        def exec_module(module):
            run_module(module)
            try:
                _install_hooks(module)
            except Exception as err:  # never break the user's program
                print(f"nsync: could not mark optimizer steps ({err})", file=sys.stderr)

        spec.loader.exec_module = exec_module
        return spec


def _run_shadowed_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        sys.modules["sitecustomize"] = module
        spec.loader.exec_module(module)


sys.meta_path.insert(0, _AfterImport())
_run_shadowed_sitecustomize()
