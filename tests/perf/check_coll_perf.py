#!/usr/bin/env python3
"""End-to-end checks of coll-perf (ctest entry `coll_perf`).

Every collective, every type and op, 1..8 ranks, over shm and over TCP (COLL_SHM_DISABLE=1),
started with -np: each run must exit 0, report no wrong element, and print rows that parse with
the regular expression nccl-tests' users parse all_reduce_perf output with, one row per size,
type, op and root, between nccl-tests' header and footer lines. Then: busbw = algbw x nccl-tests'
factor in the printed rows; a deliberately corrupted result (COLL_FAULT_INJECT=corrupt) is counted
and fails the run; bad flags give a usage error (exit 2); alone, 1 rank or -t/-g ranks as threads;
nccl-tests' own command lines (-g 1 -t 1,
attached and long options, -z 0..3, -C 1) run; -J writes nccl-tests' JSON layout, -I 1 statistics
keep min <= mean <= time; --compare reads it and warns about noise; --progress writes stderr only.

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
ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(-?\d+)"
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
            want = 12 * (5 if c in REDUCING else 1) * nroots * NSIZES  # -d all: 12 types, float8 included
            where = f"{c} on {n} ranks over {transport}"
            if len(rows) != want:
                failures.append(f"{where}: {len(rows)} rows parse, wanted {want}")
            if "# Out of bounds values : 0 OK" not in p.stdout:
                failures.append(f"{where}: no clean 'Out of bounds values' footer")
            if any(r[8] != "0" or r[12] != "0" for r in rows):
                failures.append(f"{where}: a row has wrong elements")
            if not re.search(r"^# Avg bus bandwidth\s+: [\d.e+-]+", p.stdout, re.M):
                failures.append(f"{where}: no 'Avg bus bandwidth' footer")
            for line in (f"# Collective test starting: {c}_perf", f"# Collective test concluded: {c}_perf",
                         "# nThread 1 nGpus 1 minBytes 8 maxBytes 65536 step: 64(factor) warmup iters: 0 iters: 1 "
                         "agg iters: 1 validation: 1 graph: 0"):
                if line not in p.stdout:
                    failures.append(f"{where}: no line '{line}'")

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
for args in (["-q"], ["--bogus"], ["-b", "1Q"], ["-d", "complex"], ["gather"], ["-G", "1"], ["-a"], ["-o", "xor"],
             ["-t", "0"], ["-np", "2", "-t", "2"], ["-C", "all_reduce"]):
    p = run(args, expect_rc=2)
    if "usage:" not in p.stderr:
        failures.append(f"coll-perf {' '.join(args)}: no usage text on stderr")
for args, words in ((["-o", "xor"], "sum, prod, max, min, avg, all"), (["-np", "2", "-t", "2"], "use one or the other"),
                    (["--bogus"], "unknown option --bogus")):
    p = run(args, expect_rc=2)
    if words not in p.stderr:
        failures.append(f"coll-perf {' '.join(args)}: stderr lacks '{words}':\n{p.stderr[:300]}")

for args, words in ((["--mem", "device", "-G", "1", "-z", "1"], "cannot wait per iteration"),
                    (["--mem", "device", "--host-stream", "1"], "CUDA stream of its own")):
    p = run(args, expect_rc=2)
    if words not in p.stderr:
        failures.append(f"coll-perf {' '.join(args)}: stderr lacks '{words}':\n{p.stderr[:300]}")

# --mem device where no GPU is usable (this machine, CI): a sentence that says why, exit 1, no hang.
if not os.path.exists("/dev/nvidia0"):
    p = run(["--mem", "device", "-b", "8", "-e", "8"], expect_rc=1)
    if "--mem device:" not in p.stderr or ("no CUDA device" not in p.stderr and "without CUDA" not in p.stderr):
        failures.append(f"coll-perf --mem device without a GPU: stderr says\n{p.stderr[:500]}")

# Standalone, as nccl-tests: no launcher, 1 rank by default; -t N (x -g G) ranks as threads of
# this process, every size checked; the header says so. Under a launcher -t 2 is refused.
for args, n in (([], 1), (["-t", "3"], 3), (["-t", "2", "-g", "2"], 4)):
    p = run(["-b", "8", "-e", "1M", "-f", "32", "-n", "2", "-w", "1"] + args)
    rows = rows_of(p.stdout)
    want = f"#  {n} rank{'s' if n > 1 else ''} as threads of process"
    if "# Out of bounds values : 0 OK" not in p.stdout or want not in p.stdout or len(rows) != 5 or \
            len(re.findall(r"^#  Rank +\d+ Group", p.stdout, re.M)) != n or \
            f"# nThread {args[1] if args else 1} nGpus {args[3] if len(args) > 2 else 1} " not in p.stdout:
        failures.append(f"coll-perf {' '.join(args)} alone: wanted {n} thread ranks, checked:\n{p.stdout[-2000:]}")
p = subprocess.run([os.path.join(BIN, "coll-run"), "-n", "2", PERF, "-t", "2", "-b", "8", "-e", "8"],
                   capture_output=True, text=True, timeout=120)
if p.returncode == 0 or "use one or the other" not in p.stderr:
    failures.append(f"coll-run -n 2 coll-perf -t 2: wanted a refusal:\n{p.stderr[-800:]}")
p = run(["-np", "2", "-b", "8", "-e", "8", "-n", "1", "-w", "0"])
if "#  2 ranks as processes, one rank each" not in p.stdout:
    failures.append(f"-np 2: the header does not say the ranks are processes:\n{p.stdout[:1200]}")

# nccl-tests' own command lines run unchanged.
for args in (["-b", "8", "-e", "1M", "-f", "2", "-g", "1"], ["-b8", "--maxbytes", "64K", "--stepfactor=8", "-t", "1"],
             ["all_reduce", "-b", "1K", "-e", "1K", "-z", "1", "-C", "1"], ["-b", "1K", "-e", "1K", "-z", "2", "-m", "2"],
             ["--minbytes=1K", "--maxbytes=1K", "--blocking=3", "-I", "1", "-K", "1", "-n", "4"],
             ["broadcast", "-b", "64", "-e", "64", "-u", "1", "-S", "1", "-a", "3", "-p", "1", "-y", "0"]):
    p = run(["-np", "2", "-n", "3", "-w", "1"] + args)
    if "# Out of bounds values : 0 OK" not in p.stdout or not p.stdout.rstrip().splitlines()[-1].startswith(
            "# Collective test concluded:"):
        failures.append(f"nccl-tests command line {' '.join(args)}:\n{p.stdout[-1500:]}\n{p.stderr[-800:]}")
    if "-C" in args and "cputime" not in p.stdout:
        failures.append("-C 1: no cputime column")

# --progress: a line per size on stderr, stdout unchanged in form.
p = run(["-np", "2", "-b", "8", "-e", "64", "-f", "8", "-n", "2", "-w", "0", "--progress"])
if len(re.findall(r"^# coll-perf: \d+ B float sum done in", p.stderr, re.M)) != 2 or len(rows_of(p.stdout)) != 2:
    failures.append(f"--progress: stderr\n{p.stderr}\nstdout\n{p.stdout}")
if "coll-perf:" in p.stdout.replace("# coll-perf (", ""):
    failures.append("--progress wrote to stdout")

# JSON (nccl-tests' layout), CSV and --compare.
with tempfile.TemporaryDirectory() as d:
    a, b, csv = (os.path.join(d, x) for x in ("a.json", "b.json", "a.csv"))
    p = run(["-np", "4", "-b", "8", "-e", "1M", "-f", "32", "-n", "20", "-w", "1", "-I", "1", "-J", a, "-F", csv])
    if len(re.findall(r"^\s*\d+(\s+\S+){20}\s*$", p.stdout, re.M)) != 5:
        failures.append(f"-I 1: rows without nccl-tests' 21 columns:\n{p.stdout[-1500:]}")
    run(["-np", "2", "-b", "8", "-e", "1M", "-f", "32", "-n", "3", "-w", "1", "-J", b], {"COLL_SHM_DISABLE": "1"})
    try:
        doc = json.load(open(a))
        sizes = [r["size"] for r in doc["results"]]
        if sizes != [8, 256, 8192, 262144, 1048576] or doc["coll"]["nranks"] != 4:
            failures.append(f"JSON results: sizes {sizes}, nranks {doc['coll']['nranks']}")
        if doc["version"] != 3 or doc["config"]["nthreads"] != 1 or len(doc["config"]["devices"]) != 4:
            failures.append(f"JSON: not nccl-tests' layout: {list(doc)} {doc.get('config')}")
        if doc["out_of_bounds"] != {"count": 0, "okay": True} or "bandwidth" not in doc["average_bus_bandwidth"]:
            failures.append("JSON: no out_of_bounds / average_bus_bandwidth")
        for r in doc["results"]:
            for place in ("out_of_place", "in_place"):
                t, s = r[place]["time"], r[place + "_per_iter"]
                # The statistics of one set of samples, and the time no lower than their mean: the
                # minimum once came out above the mean time (22.61 vs 15.19 us).
                if not (0 < s["min_us"] <= s["p50_us"] <= s["p99_us"] <= s["max_us"] and
                        s["min_us"] <= s["avg_us"] <= t * 1.000001 + 1e-9 and len(s["times_us"]) == 20):
                    failures.append(f"JSON {r['size']} B {place}: time {t}, per-iteration {s}")
        lines = open(csv).read().splitlines()
        if len(lines) != 6 or not lines[0].startswith("collective,nranks,size"):
            failures.append(f"CSV: {len(lines)} lines")
    except (OSError, ValueError, KeyError, TypeError) as e:
        failures.append(f"JSON/CSV output unreadable: {e!r}")
    p = run(["--compare", a, b])
    if len([l for l in p.stdout.splitlines() if re.match(r"^\s+\d+\s", l)]) != 5:
        failures.append(f"--compare printed:\n{p.stdout}")
    if "noise-prone" not in p.stdout:
        failures.append(f"--compare: B has no per-iteration statistics, yet no noise warning:\n{p.stdout}")

# NCCL habits: COLL_ALGO=Ring and COLL_PROTO=LL apply where they can (they used to fail init);
# NCCL_* variables are named with their COLL_* twins; COLL_DEBUG=VERSION prints the version line.
p = run(["all_reduce", "-np", "2", "-b", "8", "-e", "8", "-n", "1", "-w", "0"],
        {"COLL_ALGO": "Ring", "COLL_PROTO": "LL", "COLL_DEBUG": "WARN", "NCCL_ALGO": "Tree"})
if not re.search(r"^# (coll )?algorithm: 8\.\.8 B ring", p.stdout, re.M):
    failures.append(f"COLL_ALGO=Ring: no ring in the header:\n{p.stdout[:1500]}")
if "NCCL_ALGO (use COLL_ALGO)" not in p.stderr:
    failures.append(f"NCCL_ALGO set: no warning naming COLL_ALGO:\n{p.stderr[-1500:]}")
p = run(["broadcast", "-np", "2", "-b", "8", "-e", "8", "-n", "1", "-w", "0"], {"COLL_ALGO": "ring"})
p = run(["all_reduce", "-np", "2", "-b", "8", "-e", "8", "-n", "1", "-w", "0"], {"COLL_DEBUG": "VERSION"})
if len(re.findall(r"coll VERSION INIT coll version \d+\.\d+\.\d+", p.stderr)) != 1:
    failures.append(f"COLL_DEBUG=VERSION: wanted one version line:\n{p.stderr[-1500:]}")
# An init error prints once per rank that reports it (coll-run may stop the other first), not
# also as a WARN line, and under -np without the launcher hint.
p = run(["all_reduce", "-np", "2", "-b", "8", "-e", "8"], {"COLL_ALGO": "allgather:tree"}, expect_rc=None)
err = p.stderr
if p.returncode == 0 or not 1 <= err.count("leaves allgather with no algorithm") <= 2 or "WARN INIT" in err or \
        "run it under a launcher" in err:
    failures.append(f"init error under -np 2: wanted it once per rank, no WARN copy, no launcher hint:\n{err[-1500:]}")

if failures:
    print(f"{len(failures)} failure(s):")
    for f in failures:
        print(" -", f)
    sys.exit(1)
print("coll-perf: all checks passed")
