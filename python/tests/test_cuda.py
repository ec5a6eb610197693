"""CUDA tensors on backend "coll": coll's device path, on the current stream, as NCCL's backend.

Every rank is a process on GPU 0 (the device machine has one GPU; coll connects ranks of one GPU
through CUDA IPC). Inputs are small integers, so results are exact in every dtype; outputs are
poisoned first. Skipped where torch sees no GPU (CI): there, nothing here has run.
Without pytest: python3 test_cuda.py runs the same checks and exits non-zero on a failure.
"""

import pytest
import torch
import torch.distributed as dist

from dist_util import run_ranks
from test_ops import expected_reduce, make, poison

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device")


def cuda_ops(rank, world):
    dev = torch.device("cuda", 0)
    R = dist.ReduceOp
    # Sizes: LL (small), Simple on one channel, and split across channels (default 256 KiB each).
    for dtype in (torch.float32, torch.bfloat16, torch.int32, torch.int8):
        for n in (1, 4099, 1 << 20):
            x = make(rank, n, dtype).to(dev)
            dist.all_reduce(x)
            assert torch.equal(x.cpu(), expected_reduce(world, n, dtype, "SUM")), (dtype, n, "all_reduce")

            y = make(rank, n, dtype).to(dev)
            dist.all_reduce(y, op=R.MAX, async_op=True).wait()
            assert torch.equal(y.cpu(), expected_reduce(world, n, dtype, "MAX")), (dtype, n, "async")

            out = poison(torch.empty(n * world, dtype=dtype, device=dev))
            dist.all_gather_into_tensor(out, make(rank, n, dtype).to(dev))
            want = torch.cat([make(r, n, dtype) for r in range(world)])
            assert torch.equal(out.cpu(), want), (dtype, n, "all_gather_into_tensor")

            inp = torch.cat([make(rank, n, dtype, salt=b) for b in range(world)]).to(dev)
            out = poison(torch.empty(n, dtype=dtype, device=dev))
            dist.reduce_scatter_tensor(out, inp)
            assert torch.equal(out.cpu(), expected_reduce(world, n, dtype, "SUM", salt=rank)), (dtype, n, "rs")

            b = make(rank, n, dtype).to(dev) if rank == 1 % world else poison(torch.empty(n, dtype=dtype, device=dev))
            dist.broadcast(b, src=1 % world)
            assert torch.equal(b.cpu(), make(1 % world, n, dtype)), (dtype, n, "broadcast")

            a2a_in = torch.cat([make(rank, n, dtype, salt=p) for p in range(world)]).to(dev)
            a2a_out = poison(torch.empty(n * world, dtype=dtype, device=dev))
            dist.all_to_all_single(a2a_out, a2a_in)
            want = torch.cat([make(p, n, dtype, salt=rank) for p in range(world)])
            assert torch.equal(a2a_out.cpu(), want), (dtype, n, "all_to_all_single")

    # A side stream: the operation is ordered on it, and its result there once it is synchronized.
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        z = make(rank, 1000, torch.float32).to(dev)
        dist.all_reduce(z)
    s.synchronize()
    assert torch.equal(z.cpu(), expected_reduce(world, 1000, torch.float32, "SUM")), "side stream"

    # A non-contiguous tensor: reduced in a contiguous copy, copied back on the stream.
    base = poison(torch.empty(64, 8, device=dev))
    view = base[:, ::2]
    view.copy_(make(rank, 64 * 4, torch.float32).view(64, 4).to(dev))
    dist.all_reduce(view)
    assert torch.equal(view.cpu(), expected_reduce(world, 256, torch.float32, "SUM").view(64, 4)), "strided"

    # Sends and receives around a ring, as one batch.
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    got = poison(torch.empty(5000, device=dev))
    ops = [dist.P2POp(dist.isend, make(rank, 5000, torch.float32).to(dev), nxt),
           dist.P2POp(dist.irecv, got, prv)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    assert torch.equal(got.cpu(), make(prv, 5000, torch.float32)), "ring"

    # A future's callback sees the result.
    f = dist.all_reduce(make(rank, 10, torch.float32).to(dev), async_op=True).get_future()
    val = f.then(lambda fut: fut.value()[0].sum().item()).wait()
    assert val == expected_reduce(world, 10, torch.float32, "SUM").sum().item(), "future"

    # Tensors of one operation on two devices: refused with the reason.
    try:
        dist.all_gather_into_tensor(torch.empty(2 * world, device=dev), torch.ones(2))
        raise AssertionError("a CPU input with a CUDA output was accepted")
    except RuntimeError as e:
        assert "on one device" in str(e), str(e)
    torch.cuda.synchronize()
    return True


def cuda_binding(rank, world, bound):
    """Binding (device_id at init, or the first CUDA collective), async_op on the internal stream,
    barrier after GPU work, a send that cannot bind an unbound group."""
    dev = torch.device("cuda", 0)
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    if not bound:
        # Unbound: a send cannot bind the group (the other ranks are not all there).
        try:
            dist.send(torch.ones(2, device=dev), dst=nxt)
            raise AssertionError("a send bound an unbound group")
        except RuntimeError as e:
            assert "not bound to a CUDA device yet" in str(e), str(e)
        torch.cuda.set_device(0)  # after init: the first collective binds the group to it
        x = make(rank, 100, torch.float32).to(dev)
        dist.all_reduce(x)
        assert torch.equal(x.cpu(), expected_reduce(world, 100, torch.float32, "SUM")), "lazy binding"
    # Bound (or bound since): sends and receives directly.
    got = poison(torch.empty(300, device=dev))
    reqs = [dist.isend(make(rank, 300, torch.float32).to(dev), dst=nxt), dist.irecv(got, src=prv)]
    for r in reqs:
        r.wait()
    assert torch.equal(got.cpu(), make(prv, 300, torch.float32)), "p2p"
    # async_op: the internal stream waits for the current one's producer, then wait() orders back.
    y = torch.zeros(1 << 20, device=dev)
    y.add_(make(rank, 1 << 20, torch.float32).to(dev))  # on the current stream, just before
    w = dist.all_reduce(y, async_op=True)
    w.wait()
    z = y * 1  # on the current stream, after wait()
    assert torch.equal(z.cpu(), expected_reduce(world, 1 << 20, torch.float32, "SUM")), "async_op stream order"
    # barrier returns after this rank's GPU collectives.
    v = make(rank, 1 << 20, torch.float32).to(dev)
    wv = dist.all_reduce(v, async_op=True)
    dist.barrier()
    assert wv.is_completed(), "barrier returned before an earlier GPU collective"
    torch.cuda.synchronize()
    assert torch.equal(v.cpu(), expected_reduce(world, 1 << 20, torch.float32, "SUM")), "barrier"
    return True


@needs_gpu
@pytest.mark.parametrize("bound", [False, True])
def test_cuda_binding_and_streams(bound):
    assert run_ranks(2, cuda_binding, bound, timeout_s=120, join_s=600,
                     device="cuda:0" if bound else None) == [True, True]


@needs_gpu
@pytest.mark.parametrize("world", [2, 3])
def test_cuda_tensors_on_one_gpu(world):
    assert run_ranks(world, cuda_ops, timeout_s=120, join_s=600) == [True] * world


if __name__ == "__main__":
    if not torch.cuda.is_available():
        raise SystemExit("test_cuda: torch sees no CUDA device")
    for world in (2, 3):
        assert run_ranks(world, cuda_ops, timeout_s=120, join_s=600) == [True] * world
        print(f"test_cuda: {world} ranks on one GPU: passed")
    for bound in (False, True):
        assert run_ranks(2, cuda_binding, bound, timeout_s=120, join_s=600,
                         device="cuda:0" if bound else None) == [True, True]
        print(f"test_cuda: binding (device_id at init: {bound}): passed")
