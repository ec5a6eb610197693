"""Training on backend "coll": DDP against Gloo, FSDP2 and tensor parallel against one process,
a two-stage pipeline, and torchrun."""

import os
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn

from dist_util import free_port, run_ranks

STEPS = 20


def mlp(seed, width=32, depth=3):
    torch.manual_seed(seed)
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.GELU()]
    layers.append(nn.Linear(width, 4))
    return nn.Sequential(*layers)


def batch(step, rank, n=8, width=32):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(n, width, generator=g), torch.randint(0, 4, (n,), generator=g)


def ddp_vs_gloo(rank, world):
    from torch.nn.parallel import DistributedDataParallel as DDP

    gloo = dist.new_group(backend="gloo")
    models = {
        "coll": DDP(mlp(0), bucket_cap_mb=0.01),  # small buckets: several all-reduces per step, overlapped
        "gloo": DDP(mlp(0), process_group=gloo, bucket_cap_mb=0.01),
    }
    losses = {k: [] for k in models}
    for name, model in models.items():
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        for step in range(STEPS):
            x, y = batch(step, rank)
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses[name].append(loss.item())
    diffs = [(p1 - p2).abs().max().item() for p1, p2 in zip(models["coll"].parameters(), models["gloo"].parameters())]
    # Parameters must also agree across ranks.
    flat = torch.cat([p.detach().flatten() for p in models["coll"].parameters()])
    ref = flat.clone()
    dist.broadcast(ref, src=0)
    return {"max_diff": max(diffs), "rank_diff": (flat - ref).abs().max().item(), "losses": losses}


@pytest.mark.parametrize("world", [2, 3])
def test_ddp_matches_gloo(world):
    res = run_ranks(world, ddp_vs_gloo)
    for r in res:
        assert r["rank_diff"] == 0.0
        if world == 2:
            # Two ranks: a sum of two numbers is the same in any order, so the runs are bit for bit equal.
            assert r["max_diff"] == 0.0, r["max_diff"]
            assert r["losses"]["coll"] == r["losses"]["gloo"]
        else:
            # Three ranks: coll and Gloo may add the three gradients in different orders (float32).
            assert r["max_diff"] < 1e-5, r["max_diff"]


def reference_losses(seed, steps, world, width=32):
    """Single-process training on the concatenation of every rank's batch."""
    model = mlp(seed, width)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    out = []
    for step in range(steps):
        xs, ys = zip(*[batch(step, r, width=width) for r in range(world)])
        loss = nn.functional.cross_entropy(model(torch.cat(xs)), torch.cat(ys))
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss.item())
    return out


def fsdp2(rank, world):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (world,))
    model = mlp(0)
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for step in range(STEPS):
        x, y = batch(step, rank)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        # The global loss: the mean over ranks, as the single process sees it.
        g = loss.detach().clone()
        dist.all_reduce(g, op=dist.ReduceOp.AVG)
        losses.append(g.item())
    return losses


def test_fsdp2_matches_single_process():
    world = 2
    res = run_ranks(world, fsdp2)
    ref = reference_losses(0, STEPS, world)
    for losses in res:
        assert losses == pytest.approx(ref, rel=1e-4, abs=1e-5)


class TPBlock(nn.Module):
    def __init__(self, seed, width=32):
        super().__init__()
        torch.manual_seed(seed)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)
        self.head = nn.Linear(width, 4)

    def forward(self, x):
        return self.head(self.down(nn.functional.gelu(self.up(x))))


def tensor_parallel(rank, world):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh("cpu", (world,))
    model = parallelize_module(TPBlock(0), mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for step in range(STEPS):
        # Tensor parallel: every rank sees the same batch (that of "rank 0").
        x, y = batch(step, 0, n=16)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_tensor_parallel_matches_single_process():
    world = 2
    res = run_ranks(world, tensor_parallel)
    model = TPBlock(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    ref = []
    for step in range(STEPS):
        x, y = batch(step, 0, n=16)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        ref.append(loss.item())
    for losses in res:
        assert losses == pytest.approx(ref, rel=1e-4, abs=1e-5)


def pipeline(rank, world):
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe, Schedule1F1B

    full = mlp(0, depth=4)
    stage_layers = [full[:4], full[4:]][rank]
    results = {}
    for name, Schedule in (("gpipe", ScheduleGPipe), ("1f1b", Schedule1F1B)):
        model = mlp(0, depth=4)
        part = [model[:4], model[4:]][rank]
        stage = PipelineStage(part, rank, world, torch.device("cpu"))
        sched = Schedule(stage, n_microbatches=4, loss_fn=nn.functional.cross_entropy)
        opt = torch.optim.SGD(part.parameters(), lr=0.05)
        losses = []
        for step in range(5):
            x, y = batch(step, 0, n=16)
            opt.zero_grad()
            if rank == 0:
                sched.step(x)
            else:
                out = []
                sched.step(target=y, losses=out)
                losses.append(torch.stack(out).mean().item())
            opt.step()
        results[name] = losses
    del stage_layers
    return results


def test_two_stage_pipeline_matches_single_process():
    res = run_ranks(2, pipeline)
    model = mlp(0, depth=4)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    ref = []
    for step in range(5):
        x, y = batch(step, 0, n=16)
        # Four micro-batches; the schedules scale the summed gradients by 1/4 (scale_grads).
        opt.zero_grad()
        ls = []
        for xm, ym in zip(x.chunk(4), y.chunk(4)):
            loss = nn.functional.cross_entropy(model(xm), ym)
            (loss / 4).backward()
            ls.append(loss.item())
        opt.step()
        ref.append(sum(ls) / 4)
    for name in ("gpipe", "1f1b"):
        assert res[1][name] == pytest.approx(ref, rel=1e-4, abs=1e-5), name


TORCHRUN_SCRIPT = r"""
import torch, torch.distributed as dist, coll_torch
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("coll")
torch.manual_seed(0)
model = DDP(torch.nn.Linear(16, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(5):
    torch.manual_seed(step * 10 + dist.get_rank())
    loss = model(torch.randn(8, 16)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
w = torch.cat([p.detach().flatten() for p in model.parameters()])
ref = w.clone(); dist.broadcast(ref, 0)
assert torch.equal(w, ref)
print(f"rank {dist.get_rank()} of {dist.get_world_size()} ok, backend {dist.get_backend()}")
dist.destroy_process_group()
"""


def test_torchrun(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TORCHRUN_SCRIPT)
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([torchrun, "--nproc-per-node", "2", f"--master-port={free_port()}", str(script)],
                         capture_output=True, text=True, timeout=180, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "rank 0 of 2 ok, backend coll" in out.stdout and "rank 1 of 2 ok, backend coll" in out.stdout


def test_readme_train_example():
    """The README's train.py (examples/train.py), run as shown: torchrun, 2 ranks."""
    script = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "train.py")
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([torchrun, "--nproc-per-node", "2", f"--master-port={free_port()}", script],
                         capture_output=True, text=True, timeout=180, env=env)
    assert out.returncode == 0, out.stdout + out.stderr


def small_allreduce(rank, world):
    t = torch.full((3,), float(rank))
    dist.all_reduce(t)
    return t.tolist()


@pytest.mark.parametrize("init", ["env", "file"])
def test_init_methods(init):
    res = run_ranks(2, small_allreduce, init=init)
    assert res == [[1.0] * 3, [1.0] * 3]


def split_new_group(rank, world):
    """With the default group bound to a device, new_group splits it (members and non-members)."""
    g = dist.new_group([0, 2])
    out = None
    if rank in (0, 2):
        t = torch.full((4,), float(rank + 1))
        dist.all_reduce(t, group=g)
        out = t.tolist()
    return out, type(dist.group.WORLD._get_backend(torch.device("cpu"))).__name__


def test_new_group_splits_a_bound_group():
    res = run_ranks(3, split_new_group, bind_cpu=True)
    assert [r[0] for r in res] == [[4.0] * 4, None, [4.0] * 4]
    assert res[0][1] == "CollBackend"
