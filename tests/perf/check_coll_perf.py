#!/usr/bin/env python3
"""End-to-end checks of coll-perf (ctest entry `coll_perf`).

Every collective, every type and op, 1..8 ranks, over shm and over TCP (COLL_SHM_DISABLE=1),
started with -np: each run must exit 0, report no wrong element, and print rows that parse with
the regular expression nccl-tests' users parse all_reduce_perf output with, one row per size,
type, op and root. Then: busbw = algbw x nccl-tests' factor in the printed rows; a deliberately
corrupted result (COLL_FAULT_INJECT=corrupt) is counted and fails the run; bad flags give a usage
error (exit 2); -J / -F / --compare work together.

usage: check_coll_perf.py BIN_DIR
"""
import json
import os
import re
import subprocess
import sys
import tempfile

BIN = sys.argv[1]
PERF = os.path.join(BIN, "coll-perf")
# The row format of nccl-tests (size count type redop root, then time algbw busbw #wrong twice).
ROW = re.compile(r"^\s+(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)"
                 r"\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+|N/A)"
                 r"\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+|N/A)\s*$")
COLLS = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "alltoall", "sendrecv"]
REDUCING = {"all_reduce", "reduce", "reduce_scatter"}
FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
          "reduce_scatter": lambda n: (n - 1) / n, "alltoall": lambda n: (n - 1) / n,
          "broadcast": lambda n: 1, "reduce": lambda n: 1, "sendrecv": lambda n: 1}
failures = []


def run(args, env=None, expect_rc=0):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([PERF] + args, capture_output=True, text=True, env=e, timeout=300)
    if expect_rc is not None and p.returncode != expect_rc:
        failures.append(f"coll-perf {' '.join(args)} {env or ''}: exit {p.returncode}, wanted {expect_rc}\n"
                        f"{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return p


def rows_of(text):
    return [m.groups() for m in map(ROW.match, text.splitlines()) if m]


SIZES = ["-b", "8", "-e", "64K", "-f", "64"]  # 8 B, 512 B, 32 KiB, 64 KiB
NSIZES = 4
for transport, env in (("shm", {"COLL_SHM_DISABLE": "0"}), ("tcp", {"COLL_SHM_DISABLE": "1"})):
    for n in range(1, 9):
        for c in COLLS:
            roots = ["-r", "all"] if n <= 3 else ["-r", str(n - 1)]
            p = run([c, "-np", str(n)] + SIZES + ["-n", "1", "-w", "0", "-d", "all", "-o", "all"] + roots, env)
            rows = rows_of(p.stdout)
            nroots = (n if n <= 3 else 1) if c in ("broadcast", "reduce") else 1
            want = 10 * (5 if c in REDUCING else 1) * nroots * NSIZES
            where = f"{c} on {n} ranks over {transport}"
            if len(rows) != want:
                failures.append(f"{where}: {len(rows)} rows parse, wanted {want}")
            if "# Out of bounds values : 0 OK" not in p.stdout:
                failures.append(f"{where}: no clean 'Out of bounds values' footer")
            if any(r[8] != "0" or r[12] != "0" for r in rows):
                failures.append(f"{where}: a row has wrong elements")
            if not re.search(r"^# Avg bus bandwidth\s+: [\d.e+-]+", p.stdout, re.M):
                failures.append(f"{where}: no 'Avg bus bandwidth' footer")

# busbw = algbw x factor, as printed (2 decimals), on a size large enough to read it.
for c in COLLS:
    p = run([c, "-np", "4", "-b", "1M", "-e", "1M", "-n", "3", "-w", "1"])
    for r in rows_of(p.stdout):
        for alg, bus in ((float(r[6]), float(r[7])), (float(r[10]), float(r[11]))):
            if abs(alg * FACTOR[c](4) - bus) > 0.011 + 0.001 * bus:
                failures.append(f"{c}: busbw {bus} is not algbw {alg} x {FACTOR[c](4)}")

# A wrong result is counted and fails the run.
p = run(["all_reduce", "-np", "3", "-b", "8", "-e", "4K", "-f", "8", "-n", "1", "-w", "0"],
        {"COLL_FAULT_INJECT": "corrupt:1"}, expect_rc=None)
wrong = [int(r[8]) + int(r[12]) for r in rows_of(p.stdout)]
if p.returncode == 0 or not wrong or min(wrong) < 1 or "FAILED" not in p.stdout:
    failures.append(f"corrupted results were not caught: exit {p.returncode}, #wrong {wrong}\n{p.stdout[-1500:]}")

# Bad flags: a usage error, not a crash.
for args in (["-x"], ["-b", "1Q"], ["-d", "complex"], ["gather"], ["-G", "1"], ["-a"]):
    p = run(args, expect_rc=2)
    if "usage:" not in p.stderr:
        failures.append(f"coll-perf {' '.join(args)}: no usage text on stderr")

# JSON, CSV and --compare.
with tempfile.TemporaryDirectory() as d:
    a, b, csv = (os.path.join(d, x) for x in ("a.json", "b.json", "a.csv"))
    run(["-np", "2", "-b", "8", "-e", "1M", "-f", "32", "-n", "3", "-w", "1", "-I", "-J", a, "-F", csv])
    run(["-np", "2", "-b", "8", "-e", "1M", "-f", "32", "-n", "3", "-w", "1", "-J", b], {"COLL_SHM_DISABLE": "1"})
    try:
        doc = json.load(open(a))
        sizes = [r["size"] for r in doc["results"]]
        if sizes != [8, 256, 8192, 262144, 1048576] or doc["nranks"] != 2:
            failures.append(f"JSON results: sizes {sizes}, nranks {doc['nranks']}")
        if not all(r["out_of_place"]["max_us"] >= r["out_of_place"]["min_us"] > 0 for r in doc["results"]):
            failures.append("JSON: -I statistics missing")
        lines = open(csv).read().splitlines()
        if len(lines) != 6 or not lines[0].startswith("collective,nranks,size"):
            failures.append(f"CSV: {len(lines)} lines")
    except (OSError, ValueError, KeyError) as e:
        failures.append(f"JSON/CSV output unreadable: {e}")
    p = run(["--compare", a, b])
    if len([l for l in p.stdout.splitlines() if re.match(r"^\s+\d+\s", l)]) != 5:
        failures.append(f"--compare printed:\n{p.stdout}")

if failures:
    print(f"{len(failures)} failure(s):")
    for f in failures:
        print(" -", f)
    sys.exit(1)
print("coll-perf: all checks passed")
