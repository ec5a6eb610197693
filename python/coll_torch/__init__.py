"""coll as a torch.distributed backend.

``import coll_torch`` registers the backend ``"coll"``; then::

    torch.distributed.init_process_group(backend="coll")

works with torchrun, ``env://``, ``tcp://`` and ``file://`` rendezvous: the group's rank 0 puts
coll's unique id in the store torch passes, the other ranks read it. The ``timeout`` given to
``init_process_group`` (or ``new_group``) becomes the communicator's deadline for the bootstrap and
for data transfers that stop making progress. CUDA tensors go through coll's device path on the
current stream, with the communicator bound at init to the current CUDA device (as with NCCL);
that path has not run on a GPU yet.
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


def _create(opts, backend_options):
    """torch.distributed's creator (extended API): a new group, or a split of an existing one."""
    split_from = getattr(opts, "split_from", None)
    if split_from is not None and isinstance(split_from, CollBackend):
        # new_group on a group bound to a device: members split the parent (non-members take part
        # through perform_nocolor_split, called by torch).
        return split_from.split(
            opts.store, list(opts.global_ranks_in_group), opts.group_id, _timeout_ms(opts.timeout)
        )
    return CollBackend(opts.store, opts.group_rank, opts.group_size, _timeout_ms(opts.timeout), opts.group_id)


if "coll" not in dist.Backend.backend_list:
    dist.Backend.register_backend("coll", _create, extended_api=True, devices=["cpu", "cuda"])
