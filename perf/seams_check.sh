#!/usr/bin/env bash
# Before/after check for a structural change, and blocking vs host-stream all-reduces, in one run
# on this machine (2 ranks):
#  1. all-reduce at 8 B, 1 MiB and 256 MiB: coll built from a reference commit (BASE_BUILD), coll
#     at HEAD (build/) and Open MPI over shm, and the two colls over TCP (COLL_SHM_DISABLE=1),
#     alternating, REPEAT times each; medians per size.
#  2. 64 back-to-back 64 KiB all-reduces per timed loop: blocking, one at a time (--host-stream 0),
#     and queued on a host stream then synchronized once (--host-stream 1), REPEAT times each.
#
#   BASE_BUILD=/tmp/base/build REPEAT=5 bash perf/seams_check.sh
#
# Writes perf/results/<stamp>-seams/: raw outputs, env.txt (machine, versions, commands) and
# summary.md (medians of the out-of-place time column, in us).
set -euo pipefail
cd "$(dirname "$0")/.."
REPEAT=${REPEAT:-5}
BASE_BUILD=${BASE_BUILD:?set BASE_BUILD to the build directory of the reference commit}
build=${COLL_BUILD_DIR:-build}
stamp=$(date -u +%Y%m%d-%H%M%S)
out=perf/results/$stamp-seams
mkdir -p "$out" perf/build
cmake --build "$build" --target coll-perf coll-run >/dev/null
mpicc.openmpi -O2 -o perf/build/mpi_allreduce.openmpi perf/drivers/mpi_allreduce.c -lm

run_sizes() {  # $1: label, rest: command prefix; coll-perf's runs (not openmpi's) also write -J files
  local label=$1 i=0
  shift
  for spec in "-b 8 -e 8 -n 2000 -w 50" "-b 1M -e 1M -n 200 -w 10" "-b 256M -e 256M -n 5 -w 1"; do
    i=$((i + 1))
    if [ "$label" = openmpi ]; then "$@" $spec; else "$@" $spec -J "$out/$label-$rep-$i.json"; fi
  done > "$out/$label-$rep.txt" 2>/dev/null
}

{
  echo "date: $(date -u)"
  echo "host: $(hostname); $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  echo "memory: $(free -g | awk '/Mem:/{print $2}') GiB; kernel $(uname -r)"
  echo "coll HEAD: $(git rev-parse --short HEAD); reference build: $BASE_BUILD ($(git -C "$BASE_BUILD/.." rev-parse --short HEAD 2>/dev/null || echo unknown))"
  echo "open mpi: $(mpirun.openmpi --version 2>&1 | head -1)"
  echo "repeats: $REPEAT, alternating"
  echo "sizes: 8 B (-n 2000 -w 50), 1 MiB (-n 200 -w 10), 256 MiB (-n 5 -w 1)"
  echo "commands:"
  echo "  coll:     [COLL_SHM_DISABLE=1] BUILD/bin/coll-run -n 2 BUILD/bin/coll-perf all_reduce -b S -e S -n N -w W"
  echo "  open mpi: mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 perf/build/mpi_allreduce.openmpi -b S -e S -n N -w W"
  echo "  async:    $build/bin/coll-run -n 2 $build/bin/coll-perf all_reduce -b 64K -e 64K -n 64 -w 5 -c 1 --host-stream 0|1"
} > "$out/env.txt"

for rep in $(seq 1 "$REPEAT"); do
  echo "repeat $rep/$REPEAT"
  run_sizes base "$BASE_BUILD/bin/coll-run" -n 2 "$BASE_BUILD/bin/coll-perf" all_reduce
  run_sizes head "$build/bin/coll-run" -n 2 "$build/bin/coll-perf" all_reduce
  run_sizes base-tcp env COLL_SHM_DISABLE=1 "$BASE_BUILD/bin/coll-run" -n 2 "$BASE_BUILD/bin/coll-perf" all_reduce
  run_sizes head-tcp env COLL_SHM_DISABLE=1 "$build/bin/coll-run" -n 2 "$build/bin/coll-perf" all_reduce
  run_sizes openmpi mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 perf/build/mpi_allreduce.openmpi
  for hs in 0 1; do
    "$build/bin/coll-run" -n 2 "$build/bin/coll-perf" all_reduce -b 64K -e 64K -n 64 -w 5 --host-stream $hs \
      -J "$out/stream$hs-$rep-1.json" > "$out/stream$hs-$rep.txt"
  done
done

/usr/bin/python3 - "$out" <<'PY'
import glob, re, statistics, sys
sys.path.insert(0, "perf")
import coll_json
out = sys.argv[1]
def times(label):
    per = {}
    # coll-perf's -J files (both layouts: the reference build may predate nccl-tests' JSON), else text.
    for f in sorted(glob.glob(f"{out}/{label}-[0-9]*-[0-9]*.json")):
        for size, r in coll_json.rows(f).items():
            per.setdefault(size, []).append(r["time"])
    if per:
        return {k: statistics.median(v) for k, v in per.items()}
    for f in sorted(glob.glob(f"{out}/{label}-[0-9]*.txt")):
        for line in open(f):
            m = re.match(r"\s+(\d+)\s+\d+\s+\S+\s+\S+\s+-?\d+\s+([\d.]+)", line)
            if m: per.setdefault(int(m.group(1)), []).append(float(m.group(2)))
    return {k: statistics.median(v) for k, v in per.items()}
base, head, ompi = times("base"), times("head"), times("openmpi")
s0, s1 = times("stream0"), times("stream1")
tbase, thead = times("base-tcp"), times("head-tcp")
lines = ["# 2 ranks, shm: medians of the out-of-place time (us)", "",
         "| bytes | coll reference | coll HEAD | HEAD/reference | Open MPI | HEAD/Open MPI |", "|---|---|---|---|---|---|"]
for b in sorted(head):
    r = base.get(b); o = ompi.get(b); h = head[b]
    lines.append(f"| {b} | {r:.2f} | {h:.2f} | {h / r:.2f} | {o:.2f} | {h / o:.2f} |" if r and o else f"| {b} | | {h:.2f} | | | |")
lines += ["", "# 2 ranks, TCP over loopback (COLL_SHM_DISABLE=1): medians of the out-of-place time (us)", "",
          "| bytes | coll reference | coll HEAD | HEAD/reference |", "|---|---|---|---|"]
for b in sorted(thead):
    r = tbase.get(b); h = thead[b]
    lines.append(f"| {b} | {r:.2f} | {h:.2f} | {h / r:.2f} |" if r else f"| {b} | | {h:.2f} | |")
lines += ["", "# 64 back-to-back 64 KiB all-reduces (time per all-reduce, us)", "",
          "| mode | median |", "|---|---|"]
for name, d in (("blocking, one at a time", s0), ("host stream, one synchronize per 64", s1)):
    lines.append(f"| {name} | {d.get(65536, float('nan')):.2f} |")
if s0.get(65536) and s1.get(65536):
    lines.append(f"\nhost stream / blocking: {s1[65536] / s0[65536]:.2f}")
open(f"{out}/summary.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
echo "results in $out"
