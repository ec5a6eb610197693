#!/usr/bin/env bash
# Where an 8-byte all-reduce's time goes on the host path (issue 37, item 1), in one run:
#  - the floor: two threads exchanging one cache line each (perf/drivers/line_exchange.c);
#  - coll-perf all_reduce at 8 B: 1 rank (the call's bookkeeping alone: guard, checks, plan and
#    schedule cache, flight recorder, wait state, an 8-byte copy) and 2 ranks (plus the FIFO
#    protocol and the wait for the peer), each with the flight recorder on (default) and off
#    (COLL_FLIGHT_RECORDER_ENTRIES=0), for HEAD's build and a reference build (BASE_BUILD);
#  - system calls per operation at 2 ranks (perf stat: sched_yield, futex, nanosleep);
#  - perf record's user-space symbols at 2 ranks (rank 0), HEAD and reference;
#  - 1 MiB at 2 ranks (HEAD): where its time goes, by the variants of the path: pieces by
#    reference (process_vm_readv, the default out of place), through the slots
#    (COLL_SHM_DIRECT_MIN=0), in place (always through the slots), 16 and 32 slots, and the
#    halving-doubling algorithm instead of the ring; Open MPI beside them.
# REPEAT rounds, alternating; medians.
#
#   BASE_BUILD=/tmp/base-build COLL_BUILD_DIR=build-host REPEAT=5 bash perf/host_breakdown.sh
set -euo pipefail
cd "$(dirname "$0")/.."
REPEAT=${REPEAT:-5}
BASE_BUILD=${BASE_BUILD:-}
build=${COLL_BUILD_DIR:-build}
stamp=$(date -u +%Y%m%d-%H%M%S)
out=perf/results/$stamp-breakdown
mkdir -p "$out" perf/build
cmake --build "$build" --target coll-perf coll-run >/dev/null
gcc -O2 -pthread -o perf/build/line_exchange perf/drivers/line_exchange.c
mpicc.openmpi -O2 -o perf/build/mpi_allreduce.openmpi perf/drivers/mpi_allreduce.c -lm
ARGS="all_reduce -b 8 -e 8 -n 200000 -w 2000 --max-seconds 1"
SARGS="all_reduce -b 8 -e 8 -n 200000 -w 1000"  # perf stat: a known number of operations
builds="head:$build"
[ -n "$BASE_BUILD" ] && builds="base:$BASE_BUILD $builds"
{
  echo "date: $(date -u)"
  echo "host: $(hostname); $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); kernel $(uname -r)"
  echo "coll HEAD: $(git rev-parse --short HEAD), build $build; reference: ${BASE_BUILD:-none}"
  echo "rounds: $REPEAT, alternating"
  echo "commands:"
  echo "  floor: perf/build/line_exchange 2000000"
  echo "  coll:  [COLL_FLIGHT_RECORDER_ENTRIES=0] BUILD/bin/coll-run -n 1|2 BUILD/bin/coll-perf $ARGS"
  echo "  calls: BUILD/bin/coll-run -n 2 perf stat -e syscalls:sys_enter_sched_yield,... BUILD/bin/coll-perf $SARGS"
  echo "  perf:  BUILD/bin/coll-run -n 2 perf record -F 4000 BUILD/bin/coll-perf all_reduce -b 8 -e 8 -n 3000000 --max-seconds 3"
} > "$out/env.txt"

time8() { "$@" | awk '$1 == 8 {print $6; exit}'; }
# 1 MiB: the out-of-place and in-place times of one coll-perf run, or Open MPI's time.
MARGS="all_reduce -b 1M -e 1M -n 300 -w 20"
timeM() { "$@" | awk '$1 == 1048576 {print $6, $10; exit}'; }
variants=("default:" "slots:COLL_SHM_DIRECT_MIN=0" "nslots16:COLL_NSLOTS=16" "nslots32:COLL_NSLOTS=32" "rhd:COLL_ALGO=rhd")
for rep in $(seq 1 "$REPEAT"); do
  echo "round $rep/$REPEAT"
  perf/build/line_exchange 2000000 | awk '{print $3}' >> "$out/floor.txt"
  for b in $builds; do
    label=${b%%:*} dir=${b#*:}
    for np in 1 2; do
      time8 "$dir/bin/coll-run" -n $np "$dir/bin/coll-perf" $ARGS >> "$out/$label-np$np-on.txt"
      COLL_FLIGHT_RECORDER_ENTRIES=0 time8 "$dir/bin/coll-run" -n $np "$dir/bin/coll-perf" $ARGS \
        >> "$out/$label-np$np-off.txt"
    done
  done
  for v in "${variants[@]}"; do
    env ${v#*:} X=1 "$build/bin/coll-run" -n 2 "$build/bin/coll-perf" $MARGS | timeM cat >> "$out/mib-${v%%:*}.txt"
  done
  mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 perf/build/mpi_allreduce.openmpi -b 1M -e 1M -n 300 -w 20 \
    2>/dev/null | awk '$1 == 1048576 {print $6; exit}' >> "$out/mib-openmpi.txt"
done

if command -v perf >/dev/null; then
  for b in $builds; do
    label=${b%%:*} dir=${b#*:}
    "$dir/bin/coll-run" -n 2 sh -c "exec perf stat -x, -e syscalls:sys_enter_sched_yield,syscalls:sys_enter_futex,syscalls:sys_enter_nanosleep -o $out/$label-syscalls-rank\$COLL_RANK.csv -- $dir/bin/coll-perf $SARGS" >/dev/null 2>&1 || true
    "$dir/bin/coll-run" -n 2 sh -c "exec perf record -q -F 4000 -o $out/$label-perf.data.\$COLL_RANK -- $dir/bin/coll-perf all_reduce -b 8 -e 8 -n 3000000 -w 1000 --max-seconds 3" >/dev/null 2>&1 || true
    perf report -i "$out/$label-perf.data.0" --no-children --stdio --sort symbol 2>/dev/null |
      grep -E '^ +[0-9]' | head -25 | sed 's/ *$//' > "$out/$label-symbols.txt" || true
    # 1 rank: no peer to wait for, so every sample is the call's own bookkeeping.
    "$dir/bin/coll-run" -n 1 perf record -q -F 10000 -o "$out/$label-perf1.data" -- "$dir/bin/coll-perf" all_reduce \
      -b 8 -e 8 -n 20000000 -w 1000 --max-seconds 3 >/dev/null 2>&1 || true
    perf report -i "$out/$label-perf1.data" --no-children --stdio --sort symbol 2>/dev/null |
      grep -E '^ +[0-9]' | sed 's/ *$//' > "$out/$label-symbols-1rank.txt" || true
    rm -f "$out/$label"-perf.data.* "$out/$label-perf1.data"
  done
fi

/usr/bin/python3 - "$out" "$builds" <<'PY'
import os, statistics, sys
out, builds = sys.argv[1], [b.split(":")[0] for b in sys.argv[2].split()]
def med(name):
    p = f"{out}/{name}.txt"
    v = [float(x) for x in open(p).read().split()] if os.path.exists(p) else []
    return statistics.median(v) if v else float("nan")
floor = med("floor") / 1000.0
lines = ["# 8-byte all-reduce, float32 sum, out of place: median time per call (us)", "",
         f"floor (two threads exchanging a cache line each, perf/drivers/line_exchange.c): {floor:.3f} us", "",
         "| build | 1 rank | 1 rank, recorder off | 2 ranks | 2 ranks, recorder off | 2 ranks - 1 rank | 2 ranks - floor |",
         "|---|---|---|---|---|---|---|"]
for b in builds:
    one, oneOff, two, twoOff = med(f"{b}-np1-on"), med(f"{b}-np1-off"), med(f"{b}-np2-on"), med(f"{b}-np2-off")
    lines.append(f"| {b} | {one:.3f} | {oneOff:.3f} | {two:.3f} | {twoOff:.3f} | {two - one:.3f} | {two - floor:.3f} |")
lines += ["", "# system calls per operation at 2 ranks (rank 0; perf stat over the whole run)", ""]
for b in builds:
    try:
        calls = {}
        for line in open(f"{out}/{b}-syscalls-rank0.csv"):
            f = line.strip().split(",")
            if len(f) > 2 and f[0].strip().isdigit():
                calls[f[2].split(":")[-1]] = int(f[0])
        # $SARGS: 200000 timed and 1000 warm-up operations, out of place and in place, plus a few
        # for the check and the iteration count.
        ops = 2 * (200000 + 1000)
        text = ", ".join(f"{k} {v}" for k, v in calls.items())
        lines.append(f"- {b}: {text} over about {ops} operations ({sum(calls.values()) / ops:.4f} per operation)")
    except (OSError, ValueError):
        lines.append(f"- {b}: not measured")
for b in builds:
    p = f"{out}/{b}-symbols.txt"
    if os.path.exists(p):
        lines += ["", f"# {b}: perf record, rank 0, user and kernel symbols by self time", "", "```"] + open(p).read().splitlines() + ["```"]
# The 1-rank profile by part of the call: each symbol's share of the samples times the median
# 1-rank time is its cost per call.
parts = [("guard (CallGuard, liveness)", ("CallGuard", "isLive")),
         ("argument checks", ("validate", "checkReady", "checkRedOp", "HostStream::find", "device::runtime",
                              "snapshotRedOp", "preMulSumOp", "placeBuffers", "rawEnum")),
         ("flight recorder", ("FlightRecorder",)),
         ("host queue, groups, C boundary", ("HostQueue", "submit", "collAllReduce", "guarded", "runQueued")),
         ("run the operation: wait state, schedule cache, plan", ("runOps", "runCollective", "planFor", "buildFor",
                                                                   "ensureFor", "choosePlan", "algorithms::")),
         ("executor (steps, FIFO protocol, copy)", ("exec::", "memmove", "memcpy", "reduce")),
         ("allocation", ("malloc", "free", "operator new", "operator delete", "_int_")),
         ("locks and clocks", ("mutex", "clock_gettime", "tls_get_addr")),
         ("coll-perf's loop", ("collperf", "colltools")),
         ("kernel", ("[k]",))]
import re
def byPart(path, total):
    acc = {name: 0.0 for name, _ in parts}
    acc["other"] = 0.0
    for line in open(path):
        m = re.match(r"\s+([\d.]+)%\s+(\[.\])\s+(.*)", line)
        if not m: continue
        share, kind, sym = float(m.group(1)), m.group(2), m.group(3)
        for name, keys in parts:
            if any(k in sym or k == kind for k in keys):
                acc[name] += share
                break
        else:
            acc["other"] += share
    return {k: v / 100.0 * total * 1000 for k, v in acc.items()}
tables = {b: byPart(f"{out}/{b}-symbols-1rank.txt", med(f"{b}-np1-on"))
          for b in builds if os.path.exists(f"{out}/{b}-symbols-1rank.txt")}
if tables:
    lines += ["", "# 1 rank: the call's bookkeeping by part, ns per call (perf record's share x the median 1-rank time)", "",
              "| part | " + " | ".join(tables) + " |", "|---|" + "---|" * len(tables)]
    for name in [n for n, _ in parts] + ["other"]:
        lines.append(f"| {name} | " + " | ".join(f"{t[name]:.0f}" for t in tables.values()) + " |")
def cols(name):
    p = f"{out}/{name}.txt"
    rows = [[float(x) for x in l.split()] for l in open(p) if l.strip()] if os.path.exists(p) else []
    return [statistics.median(c) for c in zip(*rows)] if rows else []
lines += ["", "# 1 MiB all-reduce at 2 ranks (HEAD): median time (us) by variant of the path", "",
          "| variant | out of place | in place |", "|---|---|---|"]
for name, what in (("default", "default (large pieces by reference out of place)"),
                   ("slots", "every piece through the slots (COLL_SHM_DIRECT_MIN=0)"),
                   ("nslots16", "16 slots of 256 KiB (COLL_NSLOTS=16)"), ("nslots32", "32 slots of 128 KiB"),
                   ("rhd", "halving-doubling (COLL_ALGO=rhd)")):
    c = cols(f"mib-{name}")
    if c: lines.append(f"| {what} | {c[0]:.1f} | {c[1]:.1f} |")
o = cols("mib-openmpi")
if o: lines.append(f"| Open MPI (perf/drivers/mpi_allreduce.c) | {o[0]:.1f} | |")
open(f"{out}/summary.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
echo "results in $out"
