"""Runs a test function on several local ranks, each its own process (spawn), and reports failures.

Each rank calls fn(rank, world, *args) after init_process_group(backend="coll", ...); what fn
returns is collected per rank. A rank that raises makes run_ranks raise with every rank's error.
"""

import os
import random
import socket
import tempfile
import traceback

import torch.multiprocessing as mp


def free_port() -> int:
    """A port that was free a moment ago, below the kernel's ephemeral range.

    A port from bind(0) is ephemeral: any process's next outgoing connection or listener (coll's
    own ranks, in tests running side by side) may take it before the store binds it. Ports below
    ip_local_port_range are only ever taken by an explicit bind, so the race is far rarer.
    """
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    rng = random.SystemRandom()
    for _ in range(64):
        port = rng.randrange(max(1024, low // 2), low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:  # the low range is crowded: fall back to an ephemeral port
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(rank, world, init, fn, args, queue, timeout_s, bind_cpu, device=None):
    import datetime

    import torch
    import torch.distributed as dist

    import coll_torch  # noqa: F401  registers "coll"

    try:
        if init.startswith("env://"):
            os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = init[len("env://") :].split(":")
            os.environ["RANK"], os.environ["WORLD_SIZE"] = str(rank), str(world)
            init = "env://"
        dist.init_process_group(
            "coll",
            init_method=init,
            rank=rank,
            world_size=world,
            timeout=datetime.timedelta(seconds=timeout_s),
            # Bound to a device, torch makes new groups by splitting the default one.
            device_id=torch.device(device) if device else (torch.device("cpu", 0) if bind_cpu else None),
        )
        result = fn(rank, world, *args)
        if dist.is_initialized():  # a test may have destroyed or aborted it itself
            dist.destroy_process_group()
        queue.put((rank, "ok", result))
    except BaseException:  # report everything, including assertion failures, to the parent
        queue.put((rank, "error", traceback.format_exc()))
        raise SystemExit(1)


def _launch(world, fn, args, init, timeout_s, join_s, bind_cpu, device=None):
    """One try of run_ranks; returns (results, errors, port_taken)."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    tmp = None
    if init == "tcp":
        init_method = f"tcp://127.0.0.1:{free_port()}"
    elif init == "env":
        init_method = f"env://127.0.0.1:{free_port()}"
    elif init == "file":
        tmp = tempfile.NamedTemporaryFile(prefix="coll-torch-store-", delete=False)
        tmp.close()
        os.unlink(tmp.name)
        init_method = f"file://{tmp.name}"
    else:
        raise ValueError(init)
    procs = [ctx.Process(target=_entry, args=(r, world, init_method, fn, args, queue, timeout_s, bind_cpu, device)) for r in range(world)]
    for p in procs:
        p.start()
    results, errors = {}, {}
    port_taken = False
    try:
        for _ in range(world):
            rank, status, value = queue.get(timeout=join_s)
            (results if status == "ok" else errors)[rank] = value
            # The port free_port() saw free was taken before rank 0's store bound it (tests
            # run concurrently under ctest -j): the other ranks would wait out their connect
            # timeout for nothing, so stop them now and let the caller try another port.
            if status != "ok" and "EADDRINUSE" in value:
                port_taken = True
                break
    except Exception as e:  # queue.Empty: a rank hung or died without a word
        errors[-1] = f"not every rank reported within {join_s} s: {e!r}"
    for p in procs:
        p.join(timeout=1 if port_taken else 30)
        if p.is_alive():
            p.kill()
            p.join()
            if not port_taken:
                errors.setdefault(-2, "a rank had to be killed")
    if tmp is not None and os.path.exists(tmp.name):
        os.unlink(tmp.name)
    return results, errors, port_taken


def run_ranks(world, fn, *args, init="tcp", timeout_s=60, join_s=240, bind_cpu=False, device=None):
    """Runs fn on `world` ranks; returns the list of their results (rank order).

    device: init_process_group's device_id (e.g. "cuda:0"); bind_cpu binds to the CPU instead.
    A store port lost to a race with another process is retried (twice) with a new port;
    every other failure is raised at once with each rank's error.
    """
    for attempt in range(3):
        results, errors, port_taken = _launch(world, fn, args, init, timeout_s, join_s, bind_cpu, device)
        if not port_taken or attempt == 2:
            break
    if errors:
        raise AssertionError("\n".join(f"--- rank {r}:\n{e}" for r, e in sorted(errors.items())))
    return [results[r] for r in range(world)]
