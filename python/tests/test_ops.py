"""Every operation x dtype x reduce op on backend "coll", compared in the same run with Gloo's result
and with the result computed locally from every rank's (deterministic) input.

Inputs are small integers, so every result is exact in every dtype and any reduction order:
comparisons are torch.equal, never a tolerance. Outputs are poisoned before each operation.
"""

import pytest
import torch
import torch.distributed as dist

from dist_util import run_ranks

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int16,
          torch.uint16, torch.int32, torch.int64, torch.bool]
FLOATS = {torch.float32, torch.float64, torch.float16, torch.bfloat16}
SIZES = [0, 1, 7, 4099]
R = dist.ReduceOp


def make(rank, n, dtype, salt=0):
    """Rank's input: values in [-3, 3] (signed), [0, 3] (unsigned), or a bool pattern."""
    i = torch.arange(n, dtype=torch.int64) * 7 + rank * 3 + salt
    if dtype == torch.bool:
        return (i % 3 == 0)
    if dtype in (torch.uint8, torch.uint16):
        return (i % 4).to(dtype)
    return (i % 7 - 3).to(dtype)


def poison(t):
    if t.dtype == torch.bool:
        t.fill_(True)
    elif t.dtype.is_floating_point:
        t.fill_(float("nan"))
    else:
        t.fill_(111 if t.dtype in (torch.int8, torch.uint8, torch.uint16) else -12345)
    return t


def expected_reduce(world, n, dtype, op, salt=0):
    xs = [make(r, n, dtype, salt) for r in range(world)]
    if dtype == torch.bool:
        u = torch.stack([x.to(torch.uint8) for x in xs])
        out = {"SUM": u.amax(0), "PRODUCT": u.amin(0), "MIN": u.amin(0), "MAX": u.amax(0)}.get(op)
        if out is None:
            out = u[0].clone()
            for x in u[1:]:
                out = {"BAND": out & x, "BOR": out | x, "BXOR": out ^ x}[op]
        return out.to(torch.bool)
    wide = torch.stack([x.to(torch.int64) for x in xs])  # exact: small integers
    if op in ("SUM", "AVG", "PREMUL_SUM"):
        s = wide.sum(0)
        if op == "PREMUL_SUM":
            return (s * 2).to(dtype)
        if op == "AVG":
            if dtype in FLOATS:
                return s.to(dtype) / world  # coll divides the exact sum in the dtype, as torch does
            return torch.div(s, world, rounding_mode="trunc").to(dtype)
        return s.to(dtype)
    if op == "PRODUCT":
        return wide.prod(0).to(dtype)
    if op == "MIN":
        return wide.amin(0).to(dtype)
    if op == "MAX":
        return wide.amax(0).to(dtype)
    out = wide[0].clone()
    for x in wide[1:]:
        out = {"BAND": out & x, "BOR": out | x, "BXOR": out ^ x}[op]
    return out.to(dtype)


def ops_for(dtype):
    if dtype == torch.bool:
        return ["SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"]
    if dtype in FLOATS:
        return ["SUM", "AVG", "PRODUCT", "MIN", "MAX", "PREMUL_SUM"]
    return ["SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"]


def redop(name):
    if name == "PREMUL_SUM":
        return dist._make_nccl_premul_sum(2.0)
    return getattr(R, name)


class Checker:
    def __init__(self, rank):
        self.rank = rank
        self.failures = []
        self.gloo_refused = set()
        self.gloo_compared = 0

    def same(self, what, got, want):
        if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
            self.failures.append(f"rank {self.rank}: {what}: got {got.flatten()[:8].tolist()} "
                                 f"want {want.flatten()[:8].tolist()}")

    def vs_gloo(self, what, got, run_gloo):
        """run_gloo() returns Gloo's result or raises when Gloo does not do it."""
        try:
            ref = run_gloo()
        except (RuntimeError, ValueError) as e:
            self.gloo_refused.add(f"{what.split('[')[0]}: {str(e).splitlines()[0][:80]}")
            return
        self.gloo_compared += 1
        self.same(what + " vs gloo", got, ref)


def reductions(rank, world):
    gloo = dist.new_group(backend="gloo")
    c = Checker(rank)
    for dtype in DTYPES:
        for op in ops_for(dtype):
            for n in SIZES:
                what = f"all_reduce[{dtype},{op},n={n}]"
                t = make(rank, n, dtype)
                dist.all_reduce(t, op=redop(op))
                c.same(what, t, expected_reduce(world, n, dtype, op))
                if op not in ("AVG", "PREMUL_SUM"):  # Gloo has neither
                    def g():
                        x = make(rank, n, dtype)
                        dist.all_reduce(x, op=redop(op), group=gloo)
                        return x
                    c.vs_gloo(what, t, g)
            # Asynchronous, through the future.
            n = 1001
            t = make(rank, n, dtype)
            work = dist.all_reduce(t, op=redop(op), async_op=True)
            fut = work.get_future().then(lambda f: f.value()[0])
            got = fut.wait()
            assert work.is_completed() and work.exception() is None
            c.same(f"async all_reduce[{dtype},{op}]", got, expected_reduce(world, n, dtype, op))
        # reduce (root = last rank) and reduce_scatter: SUM and MAX for every dtype.
        for op in ("SUM", "MAX"):
            n = 333
            t = make(rank, n, dtype)
            dist.reduce(t, dst=world - 1, op=redop(op))
            if rank == world - 1:
                c.same(f"reduce[{dtype},{op}]", t, expected_reduce(world, n, dtype, op))
            chunk = 37
            full = make(rank, chunk * world, dtype)
            out = poison(torch.empty(chunk, dtype=dtype))
            dist.reduce_scatter_tensor(out, full, op=redop(op))
            want = expected_reduce(world, chunk * world, dtype, op)[rank * chunk:(rank + 1) * chunk]
            c.same(f"reduce_scatter_tensor[{dtype},{op}]", out, want)

            def g():
                o = poison(torch.empty(chunk, dtype=dtype))
                dist.reduce_scatter_tensor(o, make(rank, chunk * world, dtype), op=redop(op), group=gloo)
                return o
            c.vs_gloo(f"reduce_scatter_tensor[{dtype},{op}]", out, g)
            out2 = poison(torch.empty(chunk, dtype=dtype))
            dist.reduce_scatter(out2, list(full.chunk(world)), op=redop(op))
            c.same(f"reduce_scatter[{dtype},{op}]", out2, want)
    dist.barrier()
    return {"failures": c.failures, "gloo_refused": sorted(c.gloo_refused), "gloo_compared": c.gloo_compared}


def movement(rank, world):
    gloo = dist.new_group(backend="gloo")
    c = Checker(rank)
    def value(r, n, dtype):
        if dtype == torch.complex64:
            return torch.complex(make(r, n, torch.float32), make(r + 1, n, torch.float32))
        return make(r, n, dtype)

    for dtype in DTYPES + [torch.complex64]:
        for n in (0, 1, 7, 4099):
            root = 1 % world
            t = value(rank, n, dtype)
            b = t.clone() if rank == root else poison(torch.empty_like(t))
            dist.broadcast(b, src=root)
            c.same(f"broadcast[{dtype},n={n}]", b, value(root, n, dtype))

            def g_bcast():
                x = t.clone() if rank == root else poison(torch.empty_like(t))
                dist.broadcast(x, src=root, group=gloo)
                return x
            c.vs_gloo(f"broadcast[{dtype},n={n}]", b, g_bcast)

            outs = [poison(torch.empty(n, dtype=dtype)) for _ in range(world)]
            dist.all_gather(outs, t)
            for r in range(world):
                c.same(f"all_gather[{dtype},n={n}] part {r}", outs[r], value(r, n, dtype))

            def g_gather():
                gl = [poison(torch.empty(n, dtype=dtype)) for _ in range(world)]
                dist.all_gather(gl, t, group=gloo)
                return torch.cat(gl)
            c.vs_gloo(f"all_gather[{dtype},n={n}]", torch.cat(outs), g_gather)
            flat = poison(torch.empty(n * world, dtype=dtype))
            dist.all_gather_into_tensor(flat, t)
            c.same(f"all_gather_into_tensor[{dtype},n={n}]", flat, torch.cat([value(r, n, dtype) for r in range(world)]))
    # all_to_all_single, even and uneven (rank r sends r+p+1 rows to p), 3 columns of int64.
    for uneven in (False, True):
        if uneven:
            send_splits = [rank + p + 1 for p in range(world)]
            recv_splits = [p + rank + 1 for p in range(world)]
        else:
            send_splits = recv_splits = [5] * world
        inp = torch.arange(sum(send_splits) * 3, dtype=torch.int64).reshape(-1, 3) + 1000 * rank
        out = torch.full((sum(recv_splits), 3), -1, dtype=torch.int64)
        ref = out.clone()
        kw = dict(output_split_sizes=recv_splits, input_split_sizes=send_splits) if uneven else {}
        dist.all_to_all_single(out, inp, **kw)
        dist.all_to_all_single(ref, inp, group=gloo, **kw)
        c.same(f"all_to_all_single[uneven={uneven}] vs gloo", out, ref)
    # all_to_all with a list: rank r sends p a tensor of r+p+1 elements.
    ins = [torch.full((rank + p + 1,), rank * 10 + p, dtype=torch.float32) for p in range(world)]
    outs = [torch.full((p + rank + 1,), -1.0) for p in range(world)]
    dist.all_to_all(outs, ins)
    for p in range(world):
        c.same(f"all_to_all from {p}", outs[p], torch.full((p + rank + 1,), float(p * 10 + rank)))
    # gather / scatter to a root that is not 0.
    root = world - 1
    g_in = make(rank, 9, torch.int32)
    g_out = [torch.full((9,), -7, dtype=torch.int32) for _ in range(world)] if rank == root else None
    dist.gather(g_in, g_out, dst=root)
    if rank == root:
        for r in range(world):
            c.same(f"gather part {r}", g_out[r], make(r, 9, torch.int32))
    s_out = torch.full((6,), -7.0)
    s_in = [torch.full((6,), float(r) + 0.5) for r in range(world)] if rank == root else None
    dist.scatter(s_out, s_in, src=root)
    c.same("scatter", s_out, torch.full((6,), rank + 0.5))
    # send/recv around a ring, blocking and with isend/irecv and batch_isend_irecv.
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    if world > 1:
        if rank % 2 == 0:
            dist.send(make(rank, 50, torch.float64), dst=nxt, tag=3)
            r_ = torch.zeros(50, dtype=torch.float64)
            dist.recv(r_, src=prv, tag=3)
        else:
            r_ = torch.zeros(50, dtype=torch.float64)
            dist.recv(r_, src=prv, tag=3)
            dist.send(make(rank, 50, torch.float64), dst=nxt, tag=3)
        c.same("send/recv ring", r_, make(prv, 50, torch.float64))
        r2 = torch.zeros(64, dtype=torch.bfloat16)
        works = [dist.isend(make(rank, 64, torch.bfloat16), dst=nxt), dist.irecv(r2, src=prv)]
        for w in works:
            w.wait()
        c.same("isend/irecv", r2, make(prv, 64, torch.bfloat16))
        r3 = torch.zeros(4097, dtype=torch.int64)
        r4 = torch.zeros(3, dtype=torch.int64)
        ops = [dist.P2POp(dist.irecv, r3, prv), dist.P2POp(dist.isend, make(rank, 4097, torch.int64), nxt),
               dist.P2POp(dist.isend, make(rank, 3, torch.int64, 1), prv), dist.P2POp(dist.irecv, r4, nxt)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        c.same("batch_isend_irecv 1", r3, make(prv, 4097, torch.int64))
        c.same("batch_isend_irecv 2", r4, make(nxt, 3, torch.int64, 1))
    dist.barrier()
    dist.monitored_barrier()
    return {"failures": c.failures, "gloo_refused": sorted(c.gloo_refused), "gloo_compared": c.gloo_compared}


def shapes_and_groups(rank, world):
    """Non-contiguous tensors, coalescing, several groups at once, splits, clear errors."""
    c = Checker(rank)
    # Non-contiguous in-place and outputs.
    base = make(rank, 12 * 5, torch.float32).reshape(12, 5)
    view = base.t()  # not contiguous
    dist.all_reduce(view)
    c.same("all_reduce non-contiguous", base, expected_reduce(world, 60, torch.float32, "SUM").reshape(12, 5))
    big = torch.zeros(world, 8, 2)
    outs = [big[r, :, 0] for r in range(world)]  # strided views
    dist.all_gather(outs, make(rank, 8, torch.float32))
    for r in range(world):
        c.same(f"all_gather into strided view {r}", big[r, :, 0], make(r, 8, torch.float32))
    # Coalescing manager: all_reduce, all_gather_into_tensor, reduce_scatter_tensor fast paths.
    a, b = make(rank, 10, torch.float32), make(rank, 3, torch.float32, 1)
    with dist._coalescing_manager(async_ops=True) as cm:
        dist.all_reduce(a)
        dist.all_reduce(b)
    cm.wait()
    c.same("coalesced all_reduce a", a, expected_reduce(world, 10, torch.float32, "SUM"))
    c.same("coalesced all_reduce b", b, expected_reduce(world, 3, torch.float32, "SUM", 1))
    o1, o2 = torch.zeros(4 * world), torch.zeros(2 * world, dtype=torch.int64)
    with dist._coalescing_manager():
        dist.all_gather_into_tensor(o1, make(rank, 4, torch.float32))
        dist.all_gather_into_tensor(o2, make(rank, 2, torch.int64))
    c.same("coalesced all_gather 1", o1, torch.cat([make(r, 4, torch.float32) for r in range(world)]))
    c.same("coalesced all_gather 2", o2, torch.cat([make(r, 2, torch.int64) for r in range(world)]))
    r1 = torch.zeros(5)
    with dist._coalescing_manager():
        dist.reduce_scatter_tensor(r1, make(rank, 5 * world, torch.float32))
    c.same("coalesced reduce_scatter", r1, expected_reduce(world, 5 * world, torch.float32, "SUM")[rank * 5:rank * 5 + 5])
    # Several groups used concurrently: the world, a subgroup of the even ranks, a split.
    evens = [r for r in range(world) if r % 2 == 0]
    sub = dist.new_group(evens)
    halves = [list(range(0, (world + 1) // 2)), list(range((world + 1) // 2, world))]
    halves = [h for h in halves if h]
    split = dist.split_group(split_ranks=halves)
    works = []
    x = make(rank, 5000, torch.float32)
    works.append(dist.all_reduce(x, async_op=True))
    y = make(rank, 700, torch.int64)
    if rank in evens:
        works.append(dist.all_reduce(y, group=sub, async_op=True))
    z = make(rank, 300, torch.float64)
    works.append(dist.all_reduce(z, group=split, async_op=True))
    for w in works:
        w.wait()
    c.same("concurrent: world", x, expected_reduce(world, 5000, torch.float32, "SUM"))
    if rank in evens:
        want = torch.stack([make(r, 700, torch.int64) for r in evens]).sum(0)
        c.same("concurrent: even ranks", y, want)
    mine = next(h for h in halves if rank in h)
    c.same("concurrent: split half", z, torch.stack([make(r, 300, torch.float64) for r in mine]).sum(0))
    # Clear errors, no hang: each refused on every rank before anything is sent.
    errors = {}
    for name, fn in {
        "bitwise on float": lambda: dist.all_reduce(torch.ones(3), op=R.BAND),
        "wrong output size": lambda: dist.all_gather_into_tensor(torch.zeros(world * 3 + 1), torch.ones(3)),
        "sparse product": lambda: dist.all_reduce(torch.ones(3).to_sparse(), op=R.PRODUCT),
        "recv from self": lambda: dist.recv(torch.zeros(1), src=rank),
    }.items():
        try:
            fn()
            errors[name] = None
        except (RuntimeError, ValueError) as e:
            errors[name] = str(e).splitlines()[0]
    # The group still works after refused calls.
    v = torch.ones(2)
    dist.all_reduce(v)
    c.same("after refused calls", v, torch.full((2,), float(world)))
    return {"failures": c.failures, "errors": errors}


@pytest.mark.parametrize("world", [2, 3, 4])
def test_reductions_match_gloo_and_exact(world):
    results = run_ranks(world, reductions)
    failures = [f for r in results for f in r["failures"]]
    assert not failures, "\n".join(failures[:40])
    print(results[0]["gloo_refused"]); assert results[0]["gloo_compared"] > 200  # most cases really were compared with Gloo
    print(f"{world} ranks: {results[0]['gloo_compared']} results compared with gloo; gloo refused:",
          results[0]["gloo_refused"])


@pytest.mark.parametrize("world", [2, 3, 4])
def test_data_movement_matches_gloo(world):
    results = run_ranks(world, movement)
    failures = [f for r in results for f in r["failures"]]
    assert not failures, "\n".join(failures[:40])
    assert results[0]["gloo_compared"] > 60
    print(f"{world} ranks: {results[0]['gloo_compared']} results compared with gloo; gloo refused:",
          results[0]["gloo_refused"])


def float8(rank, world):
    """float8 e4m3fn and e5m2, which Gloo does not take: every op reduces them and the movement
    collectives carry their bits. Values -2..2 keep every partial result exact in both types (e5m2
    is exact to 8), so the expected values are computed in float64 and converted once. Compared as
    bytes: torch has no equality on float8 tensors."""
    failures = []

    def same(what, got, want):
        if got.dtype != want.dtype or not torch.equal(got.view(torch.uint8), want.view(torch.uint8)):
            failures.append(f"rank {rank}: {what}: got {got.float().flatten()[:8].tolist()} "
                            f"want {want.float().flatten()[:8].tolist()}")

    def small(r, n):
        return (torch.arange(n, dtype=torch.int64) * 7 + r * 3) % 5 - 2

    for dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        for n in SIZES:
            wide = torch.stack([small(r, n) for r in range(world)]).double()
            for op in ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "PREMUL_SUM"):
                t = small(rank, n).float().to(dtype)
                dist.all_reduce(t, op=redop(op))
                want = {"SUM": wide.sum(0), "AVG": wide.sum(0).float() / world, "PRODUCT": wide.prod(0),
                        "MIN": wide.amin(0), "MAX": wide.amax(0), "PREMUL_SUM": (wide * 2).sum(0)}[op]
                same(f"all_reduce[{dtype},{op},n={n}]", t, want.float().to(dtype))
            mine = small(rank, n).float().to(dtype)
            flat = torch.empty(n * world, dtype=dtype).view(torch.uint8).fill_(0x7f).view(dtype)
            dist.all_gather_into_tensor(flat, mine)
            same(f"all_gather_into_tensor[{dtype},n={n}]", flat,
                 torch.cat([small(r, n).float().to(dtype) for r in range(world)]))
            b = mine.clone() if rank == 0 else torch.empty(n, dtype=dtype).view(torch.uint8).fill_(0x7f).view(dtype)
            dist.broadcast(b, src=0)
            same(f"broadcast[{dtype},n={n}]", b, small(0, n).float().to(dtype))
        chunk = 37
        full = small(rank, chunk * world).float().to(dtype)
        out = torch.empty(chunk, dtype=dtype)
        dist.reduce_scatter_tensor(out, full)
        wide = torch.stack([small(r, chunk * world) for r in range(world)]).double().sum(0)
        same(f"reduce_scatter_tensor[{dtype}]", out, wide[rank * chunk:(rank + 1) * chunk].float().to(dtype))
    dist.barrier()
    return {"failures": failures}


@pytest.mark.parametrize("world", [2, 3])
def test_float8_reduces_and_moves(world):
    results = run_ranks(world, float8)
    failures = [f for r in results for f in r["failures"]]
    assert not failures, "\n".join(failures[:40])


@pytest.mark.parametrize("world", [3, 4])
def test_shapes_coalescing_groups_and_errors(world):
    results = run_ranks(world, shapes_and_groups)
    failures = [f for r in results for f in r["failures"]]
    assert not failures, "\n".join(failures[:40])
    errors = results[0]["errors"]
    assert "BAND is not defined for Float" in (errors["bitwise on float"] or ""), errors
    assert "not 3 x the input" in (errors["wrong output size"] or "") or "elements, not" in (
        errors["wrong output size"] or ""), errors
    assert "only ReduceOp.SUM is defined for sparse" in (errors["sparse product"] or ""), errors
    assert errors["recv from self"], errors


def monitored(rank, world):
    import datetime
    import time

    if rank == world - 1:
        time.sleep(4)  # never arrives within the others' 1 s
        return None
    try:
        dist.monitored_barrier(timeout=datetime.timedelta(seconds=1), wait_all_ranks=True)
        return "passed"
    except RuntimeError as e:
        return str(e).splitlines()[0]


def test_monitored_barrier_names_missing_ranks():
    res = run_ranks(3, monitored)
    assert "rank 2 failed to pass the monitored barrier in 1000 ms" in res[0], res
    assert "rank 0 did not release the monitored barrier" in res[1], res


def _tagged(rank, world):
    """send/recv as torch defines them on CPU: any source, tags matched in order, beside collectives."""
    out = {}
    # recv(src=None) from whichever rank sends first; returns the sender.
    if rank == 0:
        got = {}
        for _ in range(world - 1):
            t = torch.zeros(7)
            src = dist.recv(t, tag=5)
            got[src] = t.tolist()
        out["any"] = got
    else:
        dist.send(torch.full((7,), float(rank)), dst=0, tag=5)
    # Tags matched per (source, tag), in sending order: 1, 2, 1 received as 2, 1, 1.
    if rank == 0:
        works = [dist.isend(torch.tensor([float(v)]), dst=1, tag=tag) for v, tag in ((10, 1), (20, 2), (30, 1))]
        for w in works:
            w.wait()
    elif rank == 1:
        bufs = [torch.zeros(1) for _ in range(3)]
        works = [dist.irecv(bufs[0], src=0, tag=2), dist.irecv(bufs[1], src=0, tag=1), dist.irecv(bufs[2], src=0, tag=1)]
        for w in works:
            w.wait()
        out["tags"] = [b.item() for b in bufs]
    # An any-source receive posted before the group's collectives does not hold them up.
    work = None
    t = torch.zeros(3)
    if rank == 0:
        work = dist.irecv(t, tag=9)  # src None: any source
    x = torch.ones(4)
    for _ in range(3):
        dist.all_reduce(x)
    out["allreduce"] = x.tolist()
    if rank == world - 1:
        dist.send(torch.full((3,), 42.0), dst=0, tag=9)
    if rank == 0:
        work.wait()
        out["beside"] = (work._source_rank(), t.tolist())
    dist.barrier()
    return out


@pytest.mark.parametrize("world", [2, 3])
def test_recv_any_source_and_tags(world):
    results = run_ranks(world, _tagged)
    r0 = results[0]
    assert r0["any"] == {s: [float(s)] * 7 for s in range(1, world)}, r0
    assert results[1]["tags"] == [20.0, 10.0, 30.0], results[1]
    for r in results:
        assert r["allreduce"] == [float(world ** 3)] * 4, r
    assert r0["beside"] == (world - 1, [42.0] * 3), r0
