"""coll as a torch.distributed backend.

``import torch`` registers the backend ``"coll"`` (torch's autoload of out-of-tree backends, the
"torch.backends" entry point; ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` turns it off, and ``import
coll_torch`` then registers it); then::

    torch.distributed.init_process_group(backend="coll")

works with torchrun, ``env://``, ``tcp://`` and ``file://`` rendezvous: the group's rank 0 puts
coll's unique id in the store torch passes, the other ranks read it. The ``timeout`` given to
``init_process_group`` (or ``new_group``) becomes the communicator's deadline for the bootstrap and
for data transfers that stop making progress. CUDA tensors go through coll's device path: on the
current stream, or with ``async_op=True`` on an internal stream that waits for the current one (as
with NCCL). The group is bound to a GPU at init with ``init_process_group(device_id=...)``;
without it, its first CUDA collective binds it to the device of that collective's tensors, so
``torch.cuda.set_device(local_rank)`` may come after init. That path has not run on a GPU yet.
"""

from datetime import timedelta

import torch
import torch.distributed as dist

from . import _C

__all__ = ["CollBackend", "version"]

CollBackend = _C.CollBackend
version = _C.version


def _timeout_ms(timeout) -> int:
    if timeout is None:
        timeout = timedelta(minutes=30)
    if isinstance(timeout, timedelta):
        return max(1, int(timeout.total_seconds() * 1000))
    return max(1, int(timeout))


def _bound_cuda(opts) -> int:
    """The CUDA device index the group is bound to (init_process_group's device_id), else -1."""
    pg = getattr(opts, "process_group", None)
    device = getattr(pg, "bound_device_id", None) if pg is not None else None
    if device is None or device.type != "cuda":
        return -1
    return device.index if device.index is not None else torch.cuda.current_device()


def _create(opts, backend_options):
    """torch.distributed's creator (extended API): a new group, or a split of an existing one."""
    split_from = getattr(opts, "split_from", None)
    if split_from is not None and isinstance(split_from, CollBackend):
        # new_group on a group bound to a device: members split the parent (non-members take part
        # through perform_nocolor_split, called by torch).
        return split_from.split(
            opts.store, list(opts.global_ranks_in_group), opts.group_id, _timeout_ms(opts.timeout)
        )
    return CollBackend(
        opts.store, opts.group_rank, opts.group_size, _timeout_ms(opts.timeout), opts.group_id, _bound_cuda(opts)
    )


if "coll" not in dist.Backend.backend_list:
    dist.Backend.register_backend("coll", _create, extended_api=True, devices=["cpu", "cuda"])
