"""Registers Gloo as an out-of-tree backend named "gloo_plugin" in every interpreter started with
this folder on PYTHONPATH (torch's spawned ranks too): the baseline run.sh compares coll with."""

try:
    import torch.distributed as dist

    if dist.is_available() and "gloo_plugin" not in dist.Backend.backend_list:

        def _gloo(store, rank, size, timeout):
            return dist.ProcessGroupGloo(store, rank, size, timeout)

        dist.Backend.register_backend("gloo_plugin", _gloo, devices=["cpu"])
except Exception as e:  # noqa: BLE001  never break an interpreter's start
    import warnings

    warnings.warn(f"gloo_plugin was not registered: {e}")
