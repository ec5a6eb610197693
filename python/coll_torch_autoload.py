"""torch's autoload hook for out-of-tree backends (the "torch.backends" entry point group, read at
the end of ``import torch`` unless TORCH_DEVICE_BACKEND_AUTOLOAD=0): registers backend "coll", so
that ``init_process_group("coll")`` works without ``import coll_torch``.

A failure here must not break ``import torch`` for programs that never use coll (torch turns any
exception of a hook into an error of ``import torch`` itself): it becomes a warning, and ``import
coll_torch`` later raises the real error. That is why this module stands outside the package: the
entry point's module is imported before any code of it runs, and a module inside coll_torch would
first import coll_torch itself (a missing libcoll, say), where no handler of ours could catch it.
"""


def register() -> None:
    """The entry point: imports coll_torch, whose import registers the backend."""
    try:
        import torch.distributed as dist

        if not dist.is_available():
            return
        import coll_torch  # noqa: F401  registers "coll"
    except Exception as e:  # noqa: BLE001  never break `import torch`
        import warnings

        warnings.warn(f"coll_torch: backend 'coll' was not registered when torch was imported: {e}", stacklevel=2)
