#!/usr/bin/env python3
"""Chaos runs (nightly-style; not part of ctest: minutes of wall time).

Faults: jobs of 3 or 5 ranks run endless all-reduces or all-gathers (coll-perf -N 0) over shm or
TCP; after a random delay one random rank is killed (SIGKILL) or stopped (SIGSTOP, held past
COLL_TIMEOUT_MS). Ranks are started directly (the launcher contract's variables), not through
coll-run, which would stop the survivors itself. Every survivor must exit non-zero within the
deadline with an error that names a rank ("rank N"), nothing may be left in /dev/shm, and no
process of the job may remain.

Hostile traffic: while a job of 3 ranks runs (init included), connections to its bootstrap root
send random bytes, stay half-open, drip a byte per second, or send a header with the job's secret
that announces a 256 MiB message, and a stale rank arrives with the job's address after init; the
job must complete with every result checked (exit 0, no wrong element), rank 0's memory must stay
within 16 MB of where it was, and its descriptor count must return to what it was before.
Floods: a job of 4 ranks over TCP, each under ulimit -n 1024 (prlimit), runs while 1500 silent
connections are opened on every one of its listeners; it must complete with every result checked.

usage: chaos.py BIN_DIR [--trials N] [--hostile N] [--seed S] [--out FILE.md]
"""
import argparse
import os
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from listeners import connect_to, listening_addresses  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("bin")
ap.add_argument("--trials", type=int, default=60)
ap.add_argument("--hostile", type=int, default=10)
ap.add_argument("--seed", type=int, default=int(time.time()))
ap.add_argument("--out", default="")
args = ap.parse_args()
PERF = os.path.join(args.bin, "coll-perf")
rng = random.Random(args.seed)
TIMEOUT_MS = 2000          # COLL_TIMEOUT_MS of the jobs
DEADLINE_S = 15            # a survivor must be gone this long after the fault (kill: detection is
                           # immediate; stop: TIMEOUT_MS, then the chain of waits, about 1 s)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def shm_entries():
    try:
        return set(os.listdir("/dev/shm"))
    except OSError:
        return set()


def start_job(n, transport, perf_args, extra_env=None, stagger_s=0.0):
    port = free_port()
    procs = []
    for r in range(n):
        env = dict(os.environ, COLL_RANK=str(r), COLL_WORLD_SIZE=str(n), COLL_LOCAL_RANK=str(r),
                   COLL_LOCAL_SIZE=str(n), COLL_MASTER_ADDR="127.0.0.1", COLL_MASTER_PORT=str(port),
                   COLL_TIMEOUT_MS=str(TIMEOUT_MS), COLL_BOOTSTRAP_TIMEOUT_MS="20000", COLL_DEBUG="WARN",
                   COLL_SHM_DISABLE="1" if transport == "tcp" else "0")
        env.update(extra_env or {})
        out = tempfile.TemporaryFile(mode="w+")
        err = tempfile.TemporaryFile(mode="w+")
        procs.append((subprocess.Popen([PERF] + perf_args, env=env, stdout=out, stderr=err), (out, err)))
        if stagger_s and r == 0:
            time.sleep(stagger_s)
    return port, procs


def output(files):
    """stdout, then stderr (kept apart: coll-perf buffers its table but not its errors)."""
    text = ""
    for f in files:
        f.seek(0)
        text += f.read()
    return text


def finished_cleanly(procs, under):
    """Waits for coll-perf ranks started as (Popen, output files); the reasons any failed: no exit
    within 120 s (killed), a non-zero exit, or rank 0 without its "0 OK" check line."""
    why = []
    for r, (p, out) in enumerate(procs):
        try:
            p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            why.append(f"rank {r} did not finish under {under}")
            continue
        text = output(out)
        if p.returncode != 0 or (r == 0 and "Out of bounds values : 0 OK" not in text):
            why.append(f"rank {r} exit {p.returncode}: {text[-400:]}")
    return why


def errors(files):
    files[1].seek(0)
    return files[1].read()


def fault_trial(i):
    n = rng.choice([3, 5])
    transport = rng.choice(["shm", "tcp"])
    coll = rng.choice(["all_reduce", "all_gather"])
    action = rng.choice(["kill", "stop"])
    victim = rng.randrange(n)
    delay = rng.uniform(0.3, 3.0)
    before = shm_entries()
    _, procs = start_job(n, transport, [coll, "-b", "4K", "-e", "4M", "-f", "32", "-n", "20", "-w", "1",
                                        "-N", "0", "-c", "0"])
    time.sleep(delay)
    vp = procs[victim][0]
    early = vp.poll() is not None
    os.kill(vp.pid, signal.SIGKILL if action == "kill" else signal.SIGSTOP)
    t0 = time.time()
    res = {"trial": i, "n": n, "transport": transport, "coll": coll, "action": action, "victim": victim,
           "delay": round(delay, 2), "ok": True, "why": [], "exit_s": 0.0}
    if early:
        res["why"].append(f"victim had exited before the fault: {output(procs[victim][1])[-300:]}")
    for r, (p, out) in enumerate(procs):
        if r == victim:
            continue
        try:
            p.wait(timeout=max(0.1, DEADLINE_S - (time.time() - t0)))
        except subprocess.TimeoutExpired:
            res["why"].append(f"rank {r} still running {DEADLINE_S} s after the fault (hang)")
            continue
        res["exit_s"] = max(res["exit_s"], round(time.time() - t0, 2))
        text = errors(out)
        if p.returncode == 0:
            res["why"].append(f"rank {r} exited 0 after its peer's fault")
        elif not re.search(r"coll-perf: .*rank \d+", text):
            res["why"].append(f"rank {r} (exit {p.returncode}): the error names no rank: stderr {text[-400:]!r}, "
                              f"stdout {output(out)[-200:]!r}")
        res["survivors"] = res.get("survivors", 0) + 1
        # A stopped rank must be named as the cause (the chain of waits), not merely mentioned.
        named = (re.search(rf"rank {victim} \(pid \d+ on [^)]*\) stopped making progress", text) if action == "stop"
                 else re.search(rf"rank {victim}\b(?! of)", text))
        res["named_victim"] = res.get("named_victim", 0) + bool(named)
        if action == "stop" and not named:
            res["why"].append(f"rank {r}'s error does not name the stopped rank {victim} as the cause: {text[-300:]!r}")
        m = re.findall(r"(coll-perf: .*)", text)
        res.setdefault("errors", []).append(m[-1][:200] if m else text[-200:])
    if action == "stop":
        os.kill(vp.pid, signal.SIGKILL)
        os.kill(vp.pid, signal.SIGCONT)
    for p, _ in procs:
        if p.poll() is None:
            p.kill()
        p.wait()
    time.sleep(0.2)
    left = shm_entries() - before
    if left:
        res["why"].append(f"left in /dev/shm: {sorted(left)}")
    res["ok"] = not res["why"]
    return res


def fd_count(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


SECRET = 0xC4A05  # the hostile trials' COLL_BOOTSTRAP_SECRET: what an attacker who derived it would know


def huge_header():
    """A bootstrap message header (bootstrap_wire.h) with the job's secret announcing 256 MiB."""
    return struct.pack("<QQQQiI", 0x544f4f424c4c4f43, SECRET, (1 << 63) | 1, 256 << 20, 0, 1)


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


def hostile_trial(i):
    res = {"trial": i, "ok": True, "why": []}
    # Rank 0 starts first (it hosts the root); hostile connections arrive before and while the
    # others join, and keep coming while the job runs.
    port, procs = start_job(3, rng.choice(["shm", "tcp"]),
                            ["all_reduce", "-b", "8", "-e", "256K", "-f", "8", "-n", "50", "-w", "2", "-N", "40"],
                            extra_env={"COLL_BOOTSTRAP_SECRET": f"{SECRET:x}"}, stagger_s=0.3)
    p0 = procs[0][0]
    time.sleep(0.3)
    fd_before = fd_count(p0.pid)
    rss_before = rss_kib(p0.pid)
    rss_max = [rss_before]
    stop = threading.Event()
    socks = []

    def attack():
        while not stop.is_set():
            kind = rng.choice(["random", "halfopen", "slow", "huge"])
            target = rng.choice([("127.0.0.1", port)] + listening_addresses(p0.pid))
            try:
                s = connect_to(target, blocking=True, timeout=1)
            except OSError:
                time.sleep(0.05)
                continue
            try:
                if kind == "random":
                    s.sendall(os.urandom(rng.randrange(1, 4096)))
                    s.close()
                elif kind == "halfopen":
                    socks.append(s)
                elif kind == "huge":
                    s.sendall(huge_header() + os.urandom(4096))
                    socks.append(s)
                    rss_max[0] = max(rss_max[0], rss_kib(p0.pid))
                else:
                    for _ in range(3):
                        if stop.is_set():
                            break
                        s.sendall(os.urandom(1))
                        time.sleep(0.3)
                    s.close()
            except OSError:
                s.close()
            time.sleep(0.02)

    threads = [threading.Thread(target=attack) for _ in range(2)]
    for t in threads:
        t.start()
    # A stale rank: the job's address, after its init completed.
    time.sleep(1.0)
    stale_env = dict(os.environ, COLL_RANK="1", COLL_WORLD_SIZE="3", COLL_MASTER_ADDR="127.0.0.1",
                     COLL_MASTER_PORT=str(port), COLL_BOOTSTRAP_TIMEOUT_MS="4000")
    stale = subprocess.run([PERF, "-b", "8", "-e", "8", "-n", "1"], env=stale_env, capture_output=True, text=True,
                           timeout=60)
    if stale.returncode == 0:
        res["why"].append("a stale rank joined a running job")
    res["stale"] = (stale.stdout + stale.stderr).strip().splitlines()[-1][:200] if (stale.stdout + stale.stderr).strip() else ""
    res["why"] += finished_cleanly(procs, "hostile traffic")
    stop.set()
    for t in threads:
        t.join()
    for s in socks:
        s.close()
    res["fd_before"] = fd_before
    if rss_before > 0 and rss_max[0] - rss_before > 16384:
        res["why"].append(f"rank 0's RSS grew from {rss_before} to {rss_max[0]} KiB under huge announcements")
    res["rss"] = f"{rss_before}->{rss_max[0]} KiB"
    res["ok"] = not res["why"]
    return res


def flood_trial():
    """1500 silent connections on every listener of 4 TCP ranks under ulimit -n 1024."""
    import resource
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the flood's own sockets
    port = free_port()
    procs = []
    for r in range(4):
        env = dict(os.environ, COLL_RANK=str(r), COLL_WORLD_SIZE="4", COLL_MASTER_ADDR="127.0.0.1",
                   COLL_MASTER_PORT=str(port), COLL_BOOTSTRAP_SECRET="f100d", COLL_SHM_DISABLE="1",
                   COLL_DEBUG="NONE")
        out = tempfile.TemporaryFile(mode="w+")
        err = tempfile.TemporaryFile(mode="w+")
        procs.append((subprocess.Popen(["prlimit", "--nofile=1024", "--", PERF, "alltoall",
                                        "-b", "1K", "-e", "1M", "-f", "4", "-n", "200", "-w", "2", "-N", "2"],
                                       env=env, stdout=out, stderr=err), (out, err)))
    time.sleep(1.0)
    flood = []
    for p, _ in procs:
        for target in listening_addresses(p.pid):
            for _ in range(1500):
                try:
                    flood.append(connect_to(target))
                except OSError:
                    break
    res = {"connections": len(flood), "ok": True, "why": []}
    res["why"] += finished_cleanly(procs, "the flood")
    for s in flood:
        s.close()
    res["ok"] = not res["why"]
    return res


def fd_trial():
    """Descriptors of a live rank return to their count after hostile connections close."""
    # Endless (-N 0, killed below): a fixed count ran out before the check once small all-reduces
    # got faster.
    port, procs = start_job(2, "shm", ["all_reduce", "-b", "8", "-e", "8", "-n", "100000", "-w", "1", "-N", "0"])
    time.sleep(1.5)
    p0 = procs[0][0]  # running its all-reduces (init done)
    base = fd_count(p0.pid)
    targets = listening_addresses(p0.pid)
    socks = []
    for k in range(20):
        try:
            socks.append(connect_to(targets[k % len(targets)], blocking=True, timeout=1))
        except (OSError, ZeroDivisionError):
            pass
    during = fd_count(p0.pid)
    for s in socks:
        try:
            s.sendall(os.urandom(64))
        except OSError:
            pass
        s.close()
    time.sleep(2.0)
    after = fd_count(p0.pid)
    for p, _ in procs:
        p.kill()
        p.wait()
    return {"base": base, "during": during, "after": after, "listeners": targets, "connected": len(socks),
            "ok": base > 0 and after <= base}


lines = [f"# chaos.py, seed {args.seed}, {time.strftime('%Y-%m-%d %H:%M:%S')}", "",
         f"COLL_TIMEOUT_MS={TIMEOUT_MS}, deadline {DEADLINE_S} s after the fault", ""]
fails = 0
results = []
for i in range(args.trials):
    r = fault_trial(i)
    results.append(r)
    fails += not r["ok"]
    print(f"fault {i}: {r['action']} rank {r['victim']} of {r['n']} ({r['coll']}, {r['transport']}, after "
          f"{r['delay']} s): survivors out in {r['exit_s']} s {'ok' if r['ok'] else 'FAIL ' + '; '.join(r['why'])}",
          flush=True)
for kind in ("kill", "stop"):
    rs = [r for r in results if r["action"] == kind]
    if rs:
        ts = sorted(r["exit_s"] for r in rs)
        surv = sum(r.get("survivors", 0) for r in rs)
        named = sum(r.get("named_victim", 0) for r in rs)
        lines.append(f"- {kind}: {sum(r['ok'] for r in rs)}/{len(rs)} ok; survivors out after the fault in "
                     f"median {ts[len(ts) // 2]} s, max {ts[-1]} s; {named} of {surv} survivors' errors "
                     + ("name the stopped rank as the one that stopped making progress" if kind == "stop"
                        else "mention the killed rank"))
for r in results:
    if not r["ok"]:
        lines.append(f"  - FAIL trial {r['trial']}: {r}")
for i in range(args.hostile):
    r = hostile_trial(i)
    fails += not r["ok"]
    print(f"hostile {i}: {'ok' if r['ok'] else 'FAIL ' + '; '.join(r['why'])}; rank 0's RSS {r['rss']}; stale rank "
          f"said: {r['stale']}", flush=True)
    lines.append(f"- hostile {i}: {'ok' if r['ok'] else 'FAIL ' + '; '.join(r['why'])}; rank 0's RSS {r['rss']}; "
                 f"stale rank: {r['stale']}")
if args.hostile:
    fl = flood_trial()
    fails += not fl["ok"]
    print(f"flood: {fl['connections']} silent connections: {'ok' if fl['ok'] else 'FAIL ' + '; '.join(fl['why'])}",
          flush=True)
    lines.append(f"- flood: {fl['connections']} silent connections on every listener of 4 ranks under ulimit -n 1024: "
                 f"{'ok' if fl['ok'] else 'FAIL ' + '; '.join(fl['why'])}")
fd = fd_trial()
fails += not fd["ok"]
print(f"fds of rank 0: {fd}")
lines.append(f"- descriptors of rank 0 with {fd['connected']} hostile connections to its listeners {fd['listeners']}: "
             f"before {fd['base']}, during {fd['during']}, 2 s after they closed {fd['after']} "
             f"({'ok' if fd['ok'] else 'FAIL'})")
lines.append("")
lines.append(f"{fails} failure(s)")
if args.out:
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
print("\n".join(lines))
sys.exit(1 if fails else 0)
