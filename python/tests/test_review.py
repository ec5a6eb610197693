"""The second review of the backend, item by item: each test fails without its fix.

Futures' callbacks that wait on the same group (DDP's PowerSGD hook), abort while another thread
is blocked in an operation, an exception inside a coalescing block, a prompt shutdown with a slow
or gone peer, copies kept in queue order, and the operations added (sparse all-reduce,
all_gather_coalesced, gather_into_tensor), compared with Gloo in the same run where Gloo has them.
"""

import datetime
import os
import threading
import time
import warnings

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn

from dist_util import run_ranks


def chained_callbacks(rank, world):
    """A callback issues operations of the same group and waits for them, by work and by future."""
    x = torch.full((1000,), float(rank + 1))

    def cb(f):
        y = f.value()[0] * 2
        dist.all_reduce(y, async_op=True).wait()
        z = y.clone()
        dist.all_reduce(z, async_op=True).get_future().wait()
        return z

    fut = dist.all_reduce(x, async_op=True).get_future().then(cb)
    out = fut.wait()
    s = world * (world + 1) // 2
    # wait(timeout) completes by itself, whatever the watcher does.
    w = dist.all_reduce(torch.ones(10), async_op=True)
    w.wait(timeout=datetime.timedelta(seconds=30))
    return bool(torch.equal(out, torch.full((1000,), float(2 * s * world * world)))) and bool(torch.equal(x, torch.full((1000,), float(s))))


@pytest.mark.parametrize("world", [2, 3])
def test_callbacks_may_wait_on_the_same_group(world):
    assert all(run_ranks(world, chained_callbacks, join_s=120))


def powersgd(rank, world):
    """DDP with the PowerSGD hook on coll and on Gloo: the same parameters, bit for bit."""
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as P
    from torch.nn.parallel import DistributedDataParallel as DDP

    gloo = dist.new_group(backend="gloo")
    params = {}
    for name, group in (("coll", dist.group.WORLD), ("gloo", gloo)):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8))
        ddp = DDP(model, process_group=group)
        state = P.PowerSGDState(process_group=group, matrix_approximation_rank=2, start_powerSGD_iter=2,
                                min_compression_rate=0.5, random_seed=0)
        ddp.register_comm_hook(state, P.powerSGD_hook)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
        g = torch.Generator().manual_seed(100 + rank)
        for _ in range(8):
            loss = ddp(torch.randn(16, 32, generator=g)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        params[name] = [p.detach().clone() for p in model.parameters()]
    return all(torch.equal(a, b) for a, b in zip(params["coll"], params["gloo"]))


def test_ddp_powersgd_hook_matches_gloo():
    # Two ranks: a sum of two floats is the same in either order, so the runs agree bit for bit.
    assert all(run_ranks(2, powersgd, join_s=180))


def abort_blocked(rank, world):
    if rank == 1:
        time.sleep(6)  # never joins the all-reduce
        return None
    t = torch.ones(10)

    def aborter():
        time.sleep(1)
        dist.distributed_c10d._abort_process_group()

    th = threading.Thread(target=aborter)
    start = time.monotonic()
    th.start()
    try:
        dist.all_reduce(t)
        res = "completed"
    except RuntimeError as e:
        res = str(e).splitlines()[0]
    th.join()
    return time.monotonic() - start, res


def test_abort_interrupts_a_blocked_collective():
    # The group's timeout is 60 s: abort must end the blocked call long before it.
    res = run_ranks(2, abort_blocked, timeout_s=60, join_s=120)
    elapsed, message = res[0]
    assert elapsed < 10, res
    assert message != "completed", res


def coalescing_exception(rank, world):
    cpu = torch.device("cpu")
    world_group = dist.group.WORLD
    out = {}

    def leave_torch_state():
        # torch's own leftover after an exception in its coalescing manager (not the backend's)
        dist.distributed_c10d._world.pg_coalesce_state.pop(world_group, None)

    t = torch.full((4,), float(rank))
    try:
        with dist._coalescing_manager(device=cpu):
            dist.broadcast(t, src=0, async_op=True)
            raise KeyError("boom")
    except KeyError:
        pass
    leave_torch_state()
    # A blocking call now joins the unfinished batch: its wait raises at once instead of hanging.
    start = time.monotonic()
    try:
        dist.broadcast(torch.full((3,), float(rank)), src=0)
        out["blocking"] = "no error"
    except RuntimeError as e:
        out["blocking"] = str(e).splitlines()[0]
    out["blocking_s"] = time.monotonic() - start
    # The batch was dropped: the group runs the next operation.
    v = torch.full((3,), float(rank) + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dist.broadcast(v, src=1)
    out["after"] = v.tolist()
    # Another thread's operation while this one coalesces: a clear error, not a share of the batch.
    world_group._start_coalescing(cpu)
    errors = []

    def other():
        try:
            dist.broadcast(torch.zeros(1), src=0)
            errors.append("no error")
        except RuntimeError as e:
            errors.append(str(e).splitlines()[0])

    th = threading.Thread(target=other)
    th.start()
    th.join()
    world_group._end_coalescing(cpu).wait()
    out["other_thread"] = errors[0]
    # An async operation of a batch that never ends: its future fails by the group's timeout.
    w = None
    try:
        with dist._coalescing_manager(device=cpu):
            w = dist.broadcast(torch.zeros(2), src=0, async_op=True)
            raise KeyError("boom")
    except KeyError:
        pass
    leave_torch_state()
    start = time.monotonic()
    try:
        w.get_future().wait()
        out["future"] = "no error"
    except RuntimeError as e:
        out["future"] = str(e).splitlines()[0]
    out["future_s"] = time.monotonic() - start
    x = torch.ones(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dist.all_reduce(x)
    out["all_reduce"] = x.tolist()
    return out


def test_exception_inside_coalescing_leaves_no_hang():
    res = run_ranks(2, coalescing_exception, timeout_s=5, join_s=120)
    for r in res:
        assert "between start_coalescing and end_coalescing" in r["blocking"], r
        assert r["blocking_s"] < 1, r
        assert r["after"] == [2.0, 2.0, 2.0], r
        assert "another thread of this process is between start_coalescing" in r["other_thread"], r
        assert "were dropped: end_coalescing did not come within the group's timeout" in r["future"], r
        assert r["future_s"] < 8, r  # the group's timeout is 5 s
        assert r["all_reduce"] == [2.0, 2.0], r


def slow_peer_shutdown(rank, world, how):
    os.environ["COLL_TORCH_SHUTDOWN_TIMEOUT_MS"] = "2000"
    t = torch.ones(4)
    dist.all_reduce(t)
    if rank == 1:
        if how == "gone":
            # Its communicator goes away without a finalize, as when the process dies.
            dist.distributed_c10d._abort_process_group()
            return None
        time.sleep(12)
    # The backend's warning goes to the process's stderr (c10's log): catch it there.
    import tempfile
    with tempfile.TemporaryFile() as err:
        saved = os.dup(2)
        os.dup2(err.fileno(), 2)
        try:
            start = time.monotonic()
            dist.destroy_process_group()
            elapsed = time.monotonic() - start
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        err.seek(0)
        return elapsed, err.read().decode(errors="replace")


def test_shutdown_is_prompt_with_a_slow_peer():
    res = run_ranks(2, slow_peer_shutdown, "slow", join_s=120)
    (t0, w0), (t1, w1) = res
    assert t0 < 6, res  # not the 12 s rank 1 took to arrive
    assert t1 < 6, res
    assert "not every peer finalized within 2000 ms" in w0, res
    assert "finalize failed, the communicator was aborted instead" in w1 and "rank 0" in w1, res


def test_shutdown_is_prompt_with_a_gone_peer():
    res = run_ranks(2, slow_peer_shutdown, "gone", join_s=60)
    t0, w0 = res[0]
    assert t0 < 6, res
    assert "finalize failed, the communicator was aborted instead" in w0 or "not every peer finalized" in w0, res


def ordering(rank, world):
    n = 1 << 22
    x = torch.ones(n)
    works = [dist.all_reduce(x, async_op=True)]  # x := world (16 MB: still running below)
    y = x.view(n // 2, 2).t()  # not contiguous: staged in queue order, copied back after
    works.append(dist.all_reduce(y, async_op=True))  # x := world^2
    works.append(dist.all_reduce(x, async_op=True))  # reads what the copy back wrote: world^3
    src = torch.full((world * 5,), float(rank))
    works.append(dist.all_reduce(src, async_op=True))  # src := sum of ranks
    out = torch.full((world * 5,), -1.0)
    works.append(dist.all_to_all_single(out, src, [5] * world, [5] * world, async_op=True))
    for w in works:
        w.wait()
    # A blocking call with a staging copy right after an async one.
    a = torch.ones(n)
    wa = dist.all_reduce(a, async_op=True)
    dist.all_reduce(a.view(n // 2, 2).t())
    wa.wait()
    s = float(sum(range(world)))
    return (bool(torch.equal(x, torch.full((n,), float(world ** 3)))),
            bool(torch.equal(out, torch.full((world * 5,), s))),
            bool(torch.equal(a, torch.full((n,), float(world ** 2)))))


@pytest.mark.parametrize("world", [2, 3])
def test_copies_run_in_queue_order(world):
    for r in run_ranks(world, ordering, join_s=180):
        assert r == (True, True, True), r


def new_ops(rank, world):
    gloo = dist.new_group(backend="gloo")
    out = {}
    # gather_into_tensor / gather_single
    g = torch.full((world * 3,), -1.0) if rank == 1 else None
    dist.gather_into_tensor(torch.arange(3, dtype=torch.float32) + 10 * rank, g, dst=1)
    if rank == 1:
        out["gather"] = bool(torch.equal(g, torch.cat([torch.arange(3, dtype=torch.float32) + 10 * r for r in range(world)])))
    # all_gather_coalesced (deprecated in torch, still called), in torch's layout: lists[r][i] is
    # rank r's input i (test_all_gather_coalesced_layout checks other world sizes against Gloo).
    lists = [[torch.full((3,), -1.0), torch.zeros(2)] for _ in range(world)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dist.all_gather_coalesced(lists, [torch.full((3,), float(rank)), torch.full((2,), rank + 7.0)])
    out["all_gather_coalesced"] = all(
        torch.equal(lists[r][0], torch.full((3,), float(r))) and torch.equal(lists[r][1], torch.full((2,), r + 7.0))
        for r in range(world))
    # Sparse all-reduce, against Gloo and against the dense sum.
    i = torch.tensor([[0, 2, rank % 4], [1, 0, 2]])
    v = torch.tensor([1.0, 2.0, rank + 1.0])
    s = torch.sparse_coo_tensor(i, v, (4, 3))
    a, b = s.clone(), s.clone()
    dist.all_reduce(a)
    dist.all_reduce(b, group=gloo)
    dense = sum(torch.sparse_coo_tensor(torch.tensor([[0, 2, r % 4], [1, 0, 2]]), torch.tensor([1.0, 2.0, r + 1.0]),
                                        (4, 3)).to_dense() for r in range(world))
    out["sparse_vs_gloo"] = bool(torch.equal(a.to_dense(), b.to_dense()))
    out["sparse_exact"] = bool(torch.equal(a.to_dense(), dense))
    # DDP with a sparse embedding: the same parameters as on Gloo.
    from torch.nn.parallel import DistributedDataParallel as DDP
    params = {}
    for name, group in (("coll", dist.group.WORLD), ("gloo", gloo)):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Embedding(50, 8, sparse=True), nn.Flatten(), nn.Linear(32, 2))
        ddp = DDP(model, process_group=group)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
        gen = torch.Generator().manual_seed(7 + rank)
        for _ in range(5):
            idx = torch.randint(0, 50, (6, 4), generator=gen)
            loss = ddp(idx).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        params[name] = [p.detach().clone() for p in model.parameters()]
    out["ddp_sparse_vs_gloo"] = all(torch.equal(x, y) for x, y in zip(params["coll"], params["gloo"]))
    return out


@pytest.mark.parametrize("world", [2, 3])
def test_added_operations(world):
    res = run_ranks(world, new_ops, join_s=180)
    assert res[1]["gather"], res
    for r in res:
        assert r["all_gather_coalesced"], r
        assert r["sparse_exact"] and r["sparse_vs_gloo"], r
        if world == 2:  # two-rank sums agree bit for bit in any order
            assert r["ddp_sparse_vs_gloo"], r


def coalesced_layout(rank, world):
    """all_gather_coalesced with three inputs of different shapes, so that the number of inputs
    differs from the world size: torch's layout is output_tensor_lists[rank][i]; compared with
    Gloo's result and with the expected values."""
    gloo = dist.new_group(backend="gloo")

    def inputs(r):
        return [torch.full((3,), float(r)), torch.arange(5, dtype=torch.float32) * (r + 1),
                torch.full((2, 2), r + 7.0)]

    def run(group):
        lists = [[torch.full_like(t, -1.0) for t in inputs(rank)] for _ in range(world)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dist.all_gather_coalesced(lists, inputs(rank), group=group)
        return lists

    mine, theirs = run(None), run(gloo)
    want = [inputs(r) for r in range(world)]
    ok_expected = all(torch.equal(mine[r][i], want[r][i]) for r in range(world) for i in range(3))
    ok_gloo = all(torch.equal(mine[r][i], theirs[r][i]) for r in range(world) for i in range(3))
    # The transposed layout (one list per input) is refused with a sentence, before anything is sent.
    err = None
    try:
        dist.all_gather_coalesced([[torch.zeros(3)] * world, [torch.zeros(5)] * world, [torch.zeros(2, 2)] * world]
                                  if world != 3 else [[torch.zeros(3)] * 2] * 3, inputs(rank))
    except (RuntimeError, ValueError) as e:
        err = str(e).splitlines()[0]
    dist.barrier()
    return {"expected": ok_expected, "gloo": ok_gloo, "refused": err}


@pytest.mark.parametrize("world", [2, 3, 4])
def test_all_gather_coalesced_layout(world):
    res = run_ranks(world, coalesced_layout, join_s=180)
    for r in res:
        assert r["expected"] and r["gloo"], r
        assert r["refused"] and "all_gather_coalesced" in r["refused"], r
