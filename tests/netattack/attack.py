#!/usr/bin/env python3
"""Hostile connections against a running job's network listeners (issue: networks, second pass).

Each attack runs against coll-perf ranks started directly (the launcher contract's variables),
every byte over the network under test (COLL_SHM_DISABLE=1), and each job must finish with every
result checked (exit 0, rank 0's "0 OK") and destroy cleanly (every rank exits by itself):

  ucx-payloads   COLL_NET=ucx UCX_TLS=tcp, 2 ranks: the 16-byte (ff x8, 00 x8) and 64-byte (zeros)
                 payloads that aborted a rank in UCX's connection-request parser when coll opened a
                 ucp_listener, plus 4 KiB of garbage, sent to every TCP port each rank listens on
                 (its bootstrap inbox and UCX's own tcp transport), again and again while it runs.
  ucx-halfopen   COLL_NET=ucx UCX_TLS=tcp, 2 ranks each under ulimit -n 1024 (prlimit): 1,500
                 half-open connections on each rank's listeners while it runs. UCX 1.13.1 aborted
                 a rank in 8 runs of 200 ("failed to set active message handler": an interface
                 deactivated once its last endpoint closed is queried, and the query's socket
                 fails with every descriptor taken), until coll turned UCX's adaptive progress
                 off for plain transports (0 in 200 since).
  tcp-silent     COLL_NET=tcp, 2 ranks: 1,200 silent connections on each rank's TCP data
                 listener during a 1 MiB all-reduce loop, each opened again as soon as the rank
                 closes it. The rows printed once the flood is in
                 place are compared with the rows before it, in the same run: the flooded median
                 time must stay within --max-ratio (1.2) of the quiet one. That check is a timing
                 check: --no-timing (CI) reports the ratio without judging it.

A zero-byte flood of a rank's bootstrap inbox (with the secret) is a test of coll_thread_tests
("a flood of empty bootstrap messages ...").

usage: attack.py BIN_DIR [--only NAME[,NAME]] [--trials N] [--no-timing] [--max-ratio R] [--out FILE]
"""
import argparse
import re
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from listeners import connect_to, listening_addresses  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("bin")
ap.add_argument("--only", default="ucx-payloads,ucx-halfopen,tcp-silent")
ap.add_argument("--trials", type=int, default=1)
ap.add_argument("--no-timing", action="store_true")
ap.add_argument("--max-ratio", type=float, default=1.2)
ap.add_argument("--out", default="")
args = ap.parse_args()
PERF = os.path.join(args.bin, "coll-perf")
UCX = {"COLL_NET": "ucx", "UCX_TLS": "tcp"}
TCP = {"COLL_NET": "tcp"}


def free_port():
    # Below the ephemeral range: a port from bind(0) can be taken by anyone's next connection.
    import random
    lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    for _ in range(100):
        port = random.randrange(20000, lo)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise RuntimeError("no free port")


class Job:
    """n coll-perf ranks; rank 0's stdout is read line by line with arrival times."""

    def __init__(self, n, net_env, perf_args, nofile=None):
        port = free_port()
        self.procs, self.files, self.lines = [], [], []
        for r in range(n):
            # INFO for NET: the ranks name their TCP data listeners (data_listeners()).
            env = dict(os.environ, COLL_RANK=str(r), COLL_WORLD_SIZE=str(n), COLL_LOCAL_RANK=str(r),
                       COLL_LOCAL_SIZE=str(n), COLL_MASTER_ADDR="127.0.0.1", COLL_MASTER_PORT=str(port),
                       COLL_SHM_DISABLE="1", COLL_TIMEOUT_MS="30000", COLL_DEBUG="INFO", COLL_DEBUG_SUBSYS="NET")
            env.update(net_env)
            argv = [PERF] + perf_args
            if nofile:
                argv = ["prlimit", f"--nofile={nofile}", "--"] + argv
            err = tempfile.TemporaryFile(mode="w+")
            out = subprocess.PIPE if r == 0 else tempfile.TemporaryFile(mode="w+")
            p = subprocess.Popen(argv, env=env, stdout=out, stderr=err, text=True)
            self.procs.append(p)
            self.files.append((out, err))
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.procs[0].stdout:
            self.lines.append((time.monotonic(), line))

    def data_listeners(self):
        """(address, port) of every rank's TCP data listener, from the ranks' INFO lines."""
        import re
        out = set()
        for _, err in self.files:
            err.seek(0)
            for m in re.finditer(r"tcp data listener on \[?([0-9a-fA-F.:]+?)\]?:(\d+)\n", err.read()):
                out.add((m.group(1), int(m.group(2))))
        return sorted(out)

    def pids(self):
        """The coll-perf processes (under prlimit, the same pid: prlimit execs the command)."""
        return [p.pid for p in self.procs]

    def rows(self, since=0.0):
        """Out-of-place times (us) of result rows printed after `since`."""
        out = []
        for t, line in self.lines:
            f = line.split()
            if t >= since and len(f) >= 9 and f[0].isdigit():
                out.append(float(f[5]))
        return out

    def wait_rows(self, count, timeout=60):
        end = time.monotonic() + timeout
        while len(self.rows()) < count and time.monotonic() < end and self.procs[0].poll() is None:
            time.sleep(0.05)
        return len(self.rows()) >= count

    def finish(self, timeout=180):
        """The reasons the job did not finish cleanly (empty: it did)."""
        why = []
        for r, p in enumerate(self.procs):
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                why.append(f"rank {r} did not finish within {timeout} s")
                continue
            err = self.files[r][1]
            err.seek(0)
            text = err.read()
            if p.returncode != 0:
                key = [l for l in text.splitlines() if re.search(r"Assert|signal|ucs_|uct_|ucp_|FAIL", l)]
                why.append(f"rank {r} exited {p.returncode}: " + "\n".join(key[:12]) + "\n" + text[-600:])
        self.reader.join(timeout=5)
        text = "".join(line for _, line in self.lines)
        if "Out of bounds values : 0 OK" not in text:
            why.append("rank 0 did not report every result checked: " + text[-600:])
        return why


DELIVERED = [0]  # payloads sent whole (the connection was accepted by the kernel)


def connect_many(targets, per_target, payload=None):
    """Opens per_target connections to each (address, port); sends payload on each when given
    (counted in DELIVERED when it went out whole)."""
    socks = []
    for target in targets:
        for _ in range(per_target):
            try:
                s = connect_to(target)
                socks.append(s)
            except OSError:
                break
            if payload:
                try:
                    s.setblocking(True)
                    s.settimeout(0.5)
                    s.sendall(payload)
                    DELIVERED[0] += 1
                except OSError:
                    pass
    return socks


class Flood:
    """Keeps per_port silent connections open to each port: a connection the rank closes (its
    handshake window ended, or a newer one replaced it) is opened again at once, as an attacker
    would, so that the rank always has that many to deal with."""

    def __init__(self, targets, per_target):
        import selectors
        self.sel = selectors.DefaultSelector()
        self.stop = threading.Event()
        self.opened = 0
        for target in targets:
            for _ in range(per_target):
                self._open(target)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _open(self, target):
        import selectors
        try:
            s = connect_to(target)
            self.sel.register(s, selectors.EVENT_READ, target)
            self.opened += 1
        except OSError:
            pass

    def _run(self):
        while not self.stop.is_set():
            for key, _ in self.sel.select(timeout=0.05):
                s = key.fileobj
                try:
                    data = s.recv(64)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:  # closed by the rank: open another
                    self.sel.unregister(s)
                    s.close()
                    self._open(key.data)

    def close(self):
        self.stop.set()
        self.thread.join()
        for key in list(self.sel.get_map().values()):
            key.fileobj.close()


def raise_own_fd_limit():
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def ucx_payloads():
    job = Job(2, UCX, ["all_reduce", "-b", "8", "-e", "1M", "-f", "16", "-n", "50", "-w", "2", "-N", "20"])
    if not job.wait_rows(2):
        return {"ok": False, "why": ["the job printed no rows"] + job.finish(30)}
    payloads = [b"\xff" * 8 + b"\x00" * 8, b"\x00" * 64, b"x" * 4096]
    sent, ports_seen = 0, set()
    while job.procs[0].poll() is None and sent < 20:
        for pid in job.pids():
            ports = listening_addresses(pid)
            ports_seen.update((pid, p) for p in ports)
            for payload in payloads:
                for s in connect_many(ports, 1, payload):
                    s.close()
        sent += 1
        time.sleep(0.2)
    why = job.finish()
    if DELIVERED[0] == 0:
        why.append("no payload reached a listener")
    return {"ok": not why, "why": why, "ports": len(ports_seen), "rounds": sent, "delivered": DELIVERED[0]}


def ucx_halfopen():
    raise_own_fd_limit()
    job = Job(2, UCX, ["all_reduce", "-b", "8", "-e", "1M", "-f", "16", "-n", "50", "-w", "2", "-N", "10"],
              nofile=1024)
    if not job.wait_rows(2):
        return {"ok": False, "why": ["the job printed no rows"] + job.finish(30)}
    flood = []
    for pid in job.pids():
        ports = listening_addresses(pid)
        per_port = (1500 + len(ports) - 1) // max(1, len(ports))
        flood += connect_many(ports, per_port)
    time.sleep(0.5)
    established = sum(1 for s in flood if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0)
    why = job.finish()
    for s in flood:
        s.close()
    return {"ok": not why, "why": why, "connections": len(flood), "not_refused": established}


def tcp_silent():
    raise_own_fd_limit()
    job = Job(2, TCP, ["all_reduce", "-b", "1M", "-e", "1M", "-n", "40", "-w", "5", "-N", "60"])
    if not job.wait_rows(12):
        return {"ok": False, "why": ["the job printed no rows"] + job.finish(30)}
    quiet = job.rows()
    ports = job.data_listeners()
    if len(ports) != 2:
        return {"ok": False, "why": [f"found {len(ports)} data listeners, not one per rank"] + job.finish(60)}
    flood = Flood(ports, 1200)
    flooded_since = time.monotonic()
    why = job.finish()
    flooded = job.rows(since=flooded_since)
    flood.close()
    res = {"ports": len(ports), "connections": flood.opened, "quiet_us": statistics.median(quiet) if quiet else None,
           "flooded_us": statistics.median(flooded) if flooded else None, "flooded_rows": len(flooded)}
    if not flooded:
        why.append("no row was printed after the flood was in place")
    else:
        res["ratio"] = res["flooded_us"] / res["quiet_us"]
        if not args.no_timing and res["ratio"] > args.max_ratio:
            why.append(f"1 MiB all-reduce took {res['ratio']:.2f}x its quiet time under the flood "
                       f"(limit {args.max_ratio}x)")
    res.update({"ok": not why, "why": why})
    return res


ATTACKS = {"ucx-payloads": ucx_payloads, "ucx-halfopen": ucx_halfopen, "tcp-silent": tcp_silent}
report, failed = [], 0
for name in args.only.split(","):
    for trial in range(args.trials):
        res = ATTACKS[name]()
        line = f"{name} #{trial + 1}: {'ok' if res['ok'] else 'FAILED'} " + \
            ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                      for k, v in res.items() if k not in ("ok", "why"))
        print(line, flush=True)
        for w in res["why"]:
            print("   ", w, flush=True)
        report.append(line)
        failed += not res["ok"]
if args.out:
    with open(args.out, "w") as f:
        f.write("\n".join(report) + "\n")
print("attack.py:", "all attacks survived" if not failed else f"{failed} failed")
sys.exit(1 if failed else 0)
