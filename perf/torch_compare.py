"""torch.distributed on backend "coll" against Gloo, in one run on this machine.

  python perf/torch_compare.py allreduce --world 2 [--min-bytes 8 --max-bytes 256M --factor 4]
  python perf/torch_compare.py ddp --world 2 [--hidden 2048 --layers 16 --batch 8 --steps 10]
                                    [--threads N] [--busy K]
  python perf/torch_compare.py overhead

allreduce: dist.all_reduce (float32, blocking) on the default "coll" group and on a Gloo group of
the same ranks, alternating per size and round (--rounds); each figure is the median over rounds
of a round's mean time per call, the slowest rank's. Each size's result is checked exactly once
per backend. ddp: training steps of a communication-heavy MLP under DDP from the same initial
weights, round by round: coll, Gloo, DDP with a hook that communicates nothing (DDP's own floor),
and no DDP; each figure is the median over rounds of a round's median step time (the slowest
rank's); the coll and Gloo models must end equal. --threads: torch threads per rank (default: the
cores shared out); --busy K: K processes that spin for the whole run beside the ranks (a busy
machine). overhead: the
8 B all_reduce through torch (1 and 2 ranks) next to coll-perf's time for the same call, which is
the cost of the Python/C++ binding per call.
Writes --json (machine, versions, command, figures) and prints markdown.
"""

import argparse
import datetime
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_bytes(s):
    s = str(s).upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(s[:-1]) * mult[s[-1]]) if s[-1] in mult else int(s)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def machine():
    model = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import coll_torch

    return {
        "date": datetime.datetime.utcnow().isoformat() + "Z",
        "host": platform.node(),
        "kernel": platform.release(),
        "cpu": model,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "coll": coll_torch.version(),
        "command": " ".join([f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("COLL_")]
                            + ["python", os.path.relpath(sys.argv[0], REPO)] + sys.argv[1:]),
    }


def slowest(seconds, gloo):
    t = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=gloo)
    return t.item()


def time_allreduce(buf, group, iters, warmup, async_op):
    for _ in range(warmup):
        w = dist.all_reduce(buf, group=group, async_op=async_op)
        if async_op:
            w.wait()
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(iters):
        w = dist.all_reduce(buf, group=group, async_op=async_op)
        if async_op:
            w.wait()
    return (time.perf_counter() - start) / iters


def allreduce_worker(rank, world, port, args, queue):
    import coll_torch  # noqa: F401

    dist.init_process_group("coll", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    groups = {"coll": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    gloo = groups["gloo"]
    rows = []
    # min, every power of factor in between, and max: 8 B, 16 B, 64 B, ..., 64 KiB, ..., 16 MiB, 256 MiB.
    sizes, p = {args.min_bytes, args.max_bytes}, 1
    while p < args.max_bytes:
        if p > args.min_bytes:
            sizes.add(p)
        p *= args.factor
    for size in sorted(sizes):
        n = max(1, size // 4)
        # Exact check: sum of rank+1 over ranks.
        for name, g in groups.items():
            t = torch.full((n,), float(rank + 1))
            dist.all_reduce(t, group=g)
            want = float(world * (world + 1) // 2)
            if not torch.equal(t, torch.full((n,), want)):
                raise SystemExit(f"{name}: wrong all_reduce result at {size} B")
        buf = torch.zeros(n)  # zeros stay zeros: no overflow over many iterations
        # Iterations from one timed call (the slowest backend's), capped in time per size.
        est = slowest(time_allreduce(buf, gloo, 1, 1, False), gloo)
        iters = int(max(3, min(args.iters, args.seconds / max(est, 1e-7))))
        warmup = max(1, min(args.warmup, iters // 5))
        per = {"coll": [], "gloo": [], "coll_async": []}
        for _ in range(args.rounds):
            for name in ("coll", "gloo", "coll_async"):
                g = groups["gloo" if name == "gloo" else "coll"]
                per[name].append(slowest(time_allreduce(buf, g, iters, warmup, name == "coll_async"), gloo))
        med = {k: statistics.median(v) for k, v in per.items()}
        bus = lambda t: size / t * 2 * (world - 1) / world / 1e9 if world > 1 else 0.0  # noqa: E731
        rows.append({
            "bytes": size, "iters": iters,
            "coll_us": med["coll"] * 1e6, "gloo_us": med["gloo"] * 1e6, "coll_async_us": med["coll_async"] * 1e6,
            "coll_busbw": bus(med["coll"]), "gloo_busbw": bus(med["gloo"]),
            "busbw_ratio": med["gloo"] / med["coll"], "rounds": per,
        })
    if rank == 0:
        queue.put(rows)
    dist.destroy_process_group()


def mlp(hidden, layers):
    torch.manual_seed(0)
    mods = []
    for _ in range(layers):
        mods += [torch.nn.Linear(hidden, hidden), torch.nn.ReLU()]
    return torch.nn.Sequential(*mods)


def no_comm_hook(state, bucket):
    """A DDP communication hook that communicates nothing: DDP's own cost (buckets, hooks)."""
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


def ddp_worker(rank, world, port, args, queue):
    import coll_torch  # noqa: F401
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(args.threads or max(1, (os.cpu_count() or 1) // world))
    dist.init_process_group("coll", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    gloo = dist.new_group(backend="gloo")
    result, final = {}, {}
    # Backends alternate round by round, so that a slow spell of this shared machine falls on all.
    for _ in range(args.rounds):
        for name in args.order:
            if name == "none":  # the same step with no DDP and no communication at all
                model = mlp(args.hidden, args.layers)
            else:
                model = DDP(mlp(args.hidden, args.layers), process_group=gloo if name == "gloo" else None)
                if name == "ddp_no_comm":  # DDP's bucketing with the all-reduce left out: the floor of DDP
                    model.register_comm_hook(None, no_comm_hook)
            opt = torch.optim.SGD(model.parameters(), lr=1e-4)
            times = []
            for step in range(args.warmup_steps + args.steps):
                g = torch.Generator().manual_seed(step * 100 + rank)
                x = torch.randn(args.batch, args.hidden, generator=g)
                dist.barrier(group=gloo)
                start = time.perf_counter()
                loss = model(x).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                elapsed = slowest(time.perf_counter() - start, gloo)
                if step >= args.warmup_steps:
                    times.append(elapsed)
            result.setdefault(name, []).append(statistics.median(times))
            final[name] = torch.cat([p.detach().flatten() for p in model.parameters()])
            del model, opt
    params = final["coll"].numel()
    diff = (final["coll"] - final["gloo"]).abs().max().item()
    if rank == 0:
        queue.put({"params": params, "round_medians": result, "max_param_diff": diff})
    dist.destroy_process_group()


def busy_loop(stop):
    """Holds a core until stop is set: the load of another job on a shared machine."""
    x = 0
    while not stop.is_set():
        for _ in range(100000):
            x += 1


def spawn(world, target, args):
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = free_port()
    stop = ctx.Event()
    busy = [ctx.Process(target=busy_loop, args=(stop,)) for _ in range(getattr(args, "busy", 0) or 0)]
    for p in busy:
        p.start()
    procs = [ctx.Process(target=target, args=(r, world, port, args, queue)) for r in range(world)]
    for p in procs:
        p.start()
    try:
        out = queue.get()
        for p in procs:
            p.join()
            if p.exitcode != 0:
                raise SystemExit(f"a rank exited with {p.exitcode}")
    finally:
        stop.set()
        for p in busy:
            p.join()
    return out


def coll_perf_time(world, nbytes, iters=5000):
    """coll-perf's out-of-place time (us) for one all-reduce size on `world` local ranks."""
    build = os.environ.get("COLL_BUILD_DIR", os.path.join(REPO, "build"))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import coll_json  # the -J file, not the text table
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "coll-perf.json")
        cmd = [os.path.join(build, "bin", "coll-run"), "-n", str(world), os.path.join(build, "bin", "coll-perf"),
               "-b", str(nbytes), "-e", str(nbytes), "-n", str(iters), "-w", "200", "-J", path]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        rows = coll_json.rows(path) if os.path.exists(path) else {}
    if nbytes not in rows:
        raise SystemExit("no coll-perf result for %d B in:\n%s" % (nbytes, out))
    return rows[nbytes]["time"]


def overhead_worker(rank, world, port, args, queue):
    import coll_torch  # noqa: F401

    dist.init_process_group("coll", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    buf = torch.zeros(2)
    times = {"blocking": [], "async_wait": []}
    for _ in range(args.rounds):
        times["blocking"].append(time_allreduce(buf, None, 5000, 200, False))
        times["async_wait"].append(time_allreduce(buf, None, 5000, 200, True))
    if rank == 0:
        queue.put({k: statistics.median(v) * 1e6 for k, v in times.items()})
    dist.destroy_process_group()


def fake_worker(rank, world, port, args, queue):
    """torch's own cost per call: the same loop on torch's "fake" backend, whose ops do nothing."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=1)
    buf = torch.zeros(2)
    queue.put(statistics.median(time_allreduce(buf, None, 5000, 200, False) for _ in range(args.rounds)) * 1e6)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["allreduce", "ddp", "overhead"])
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--min-bytes", type=parse_bytes, default=8)
    ap.add_argument("--max-bytes", type=parse_bytes, default=256 << 20)
    ap.add_argument("--factor", type=int, default=4)
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=0.4, help="timed seconds per size, backend and round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup-steps", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0, help="ddp: torch threads per rank (0: cores / world)")
    ap.add_argument("--busy", type=int, default=0, help="ddp: processes that spin beside the ranks")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    info = machine()
    if args.mode == "allreduce":
        rows = spawn(args.world, allreduce_worker, args)
        print(f"\nall_reduce float32, {args.world} ranks, {info['cpu']} ({info['cores']} cores), torch {info['torch']}")
        print("| bytes | coll us | gloo us | coll async+wait us | coll busbw GB/s | gloo busbw GB/s | coll/gloo busbw |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            print(f"| {r['bytes']} | {r['coll_us']:.1f} | {r['gloo_us']:.1f} | {r['coll_async_us']:.1f} | "
                  f"{r['coll_busbw']:.3f} | {r['gloo_busbw']:.3f} | {r['busbw_ratio']:.2f}x |")
        result = {"machine": info, "world": args.world, "rows": rows}
    elif args.mode == "ddp":
        args.order = ["coll", "gloo", "ddp_no_comm", "none"]
        res = spawn(args.world, ddp_worker, args)
        med = {k: statistics.median(v) for k, v in res["round_medians"].items()}
        print(f"\nDDP step, {args.world} ranks, {args.threads or 'cores/world'} torch threads per rank, "
              f"{args.busy} busy loops beside, MLP {args.layers}x{args.hidden} ({res['params'] / 1e6:.1f} M params), "
              f"batch {args.batch}: coll {med['coll'] * 1e3:.1f} ms, gloo {med['gloo'] * 1e3:.1f} ms, "
              f"coll/gloo {med['coll'] / med['gloo']:.2f}x; DDP with no communication {med['ddp_no_comm'] * 1e3:.1f} ms, "
              f"no DDP {med['none'] * 1e3:.1f} ms (medians over {args.rounds} rounds); "
              f"max |coll - gloo| parameter {res['max_param_diff']:.2e}")
        if not res["max_param_diff"] <= 1e-5:
            raise SystemExit("coll and gloo models diverged")
        result = {"machine": info, "world": args.world, "batch": args.batch, "threads": args.threads, "busy": args.busy,
                  "params": res["params"], "median_s": med,
                  **res}
    else:
        out = {"torch_fake_backend_us": spawn(1, fake_worker, args)}
        print(f"8 B all_reduce on torch's fake backend (torch's own cost per call): {out['torch_fake_backend_us']:.2f} us")
        for world in (1, 2):
            t = spawn(world, overhead_worker, args)
            t["coll_perf"] = coll_perf_time(world, 8)
            out[world] = t
            print(f"8 B all_reduce, {world} rank(s): torch blocking {t['blocking']:.2f} us, "
                  f"async+wait {t['async_wait']:.2f} us, coll-perf {t['coll_perf']:.2f} us: binding adds "
                  f"{t['blocking'] - t['coll_perf']:.2f} us (blocking), {t['async_wait'] - t['coll_perf']:.2f} us (async); "
                  f"coll_torch's own part (blocking - coll-perf - fake backend): "
                  f"{t['blocking'] - t['coll_perf'] - out['torch_fake_backend_us']:.2f} us")
        result = {"machine": info, "per_world": out}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
