#!/usr/bin/env bash
# What COLL_SPIN_US's default costs and saves on a quiet and on a busy machine (issue 45, item 7):
# 2-rank all-reduce (float32, sum, out of place) at 8 B and 1 MiB, coll with the default (spin
# 200 us, nap at once while the machine has more runnable threads than cores) against
# COLL_SPIN_US=200 (spin 200 us whatever the load: the default before the load check) and Open MPI
# over shared memory, each quiet and beside BUSY processes that spin for the whole run. Every
# configuration runs once per round, rounds alternate, REPEAT rounds; medians per configuration.
#
#   REPEAT=9 BUSY=2 bash perf/spin_load.sh
#
# Writes perf/results/<stamp>-spin-load/: raw outputs, env.txt and summary.md.
set -euo pipefail
cd "$(dirname "$0")/.."
REPEAT=${REPEAT:-9}
BUSY=${BUSY:-2}
ANCHORS=${ANCHORS:-../shared/anchors/cpu-baselines}
build=${COLL_BUILD_DIR:-build}
stamp=$(date -u +%Y%m%d-%H%M%S)
out=perf/results/$stamp-spin-load
mkdir -p "$out" perf/build/anchors
cmake --build "$build" --target coll-perf coll-run >/dev/null
mpicc.openmpi -O3 -o perf/build/anchors/mpi.openmpi "$ANCHORS/mpi_allreduce_bench.c" -lm
{
  echo "date: $(date -u)"
  echo "host: $(hostname); $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  echo "kernel $(uname -r); coll HEAD: $(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes')"
  echo "open mpi: $(mpirun.openmpi --version 2>&1 | head -1)"
  echo "REPEAT=$REPEAT BUSY=$BUSY"
  echo "coll:     COLL_SPIN_US=V $build/bin/coll-run -n 2 $build/bin/coll-perf all_reduce -b S -e S -n N -w W"
  echo "open mpi: mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 perf/build/anchors/mpi.openmpi -b S -e S -n N -w W"
  echo "busy:     BUSY processes running 'while :; do :; done' for the whole measurement"
} >"$out/env.txt"

busy_pids=()
start_busy() { for _ in $(seq "$1"); do (while :; do :; done) & busy_pids+=($!); done; }
stop_busy() {
  if [ ${#busy_pids[@]} -gt 0 ]; then
    kill "${busy_pids[@]}" 2>/dev/null || true
    wait "${busy_pids[@]}" 2>/dev/null || true
  fi
  busy_pids=()
  return 0
}
trap stop_busy EXIT

run_coll() {  # spin size n w -> time in us (out of place)
  COLL_SPIN_US=$1 "$build/bin/coll-run" -n 2 "$build/bin/coll-perf" all_reduce -b "$2" -e "$2" -n "$3" -w "$4" |
    awk '$1 ~ /^[0-9]+$/ {print $6; exit}'
}
run_mpi() {  # size n w -> time in us
  mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 perf/build/anchors/mpi.openmpi -b "$1" -e "$1" -n "$2" -w "$3" |
    awk '$1 ~ /^[0-9]+$/ {print $5; exit}'
}
for r in $(seq "$REPEAT"); do
  for busy in 0 "$BUSY"; do
    start_busy "$busy"
    sleep 0.2
    for size in 8 1048576; do
      if [ "$size" = 8 ]; then n=20000 w=500; else n=300 w=20; fi
      # The first coll run after a change (the busy loops started, Open MPI's run) was slow whichever
      # setting it had (2-6x at 1 MiB beside the busy loops): one run, discarded, comes first, and
      # the two settings take turns going first.
      run_coll -2 "$size" "$n" "$w" >/dev/null
      spins="-2 200"
      [ $((r % 2)) = 0 ] && spins="200 -2"
      for spin in $spins; do
        echo "$busy $size coll-spin$spin $(run_coll "$spin" "$size" "$n" "$w")" >>"$out/raw.txt"
      done
      echo "$busy $size openmpi $(run_mpi "$size" "$n" "$w")" >>"$out/raw.txt"
    done
    stop_busy
  done
  echo "round $r done" >&2
done
python3 - "$out" <<'PY'
import statistics, sys, collections
out = sys.argv[1]
rows = collections.defaultdict(list)
for line in open(f"{out}/raw.txt"):
    busy, size, who, t = line.split()[:4] if len(line.split()) >= 4 else (None,) * 4
    if t is None: continue
    rows[(int(busy), int(size), who)].append(float(t))
names = {"coll-spin-2": "coll, default", "coll-spin200": "coll, COLL_SPIN_US=200", "openmpi": "Open MPI"}
with open(f"{out}/summary.md", "w") as f:
    f.write("| busy loops | size | " + " | ".join(names.values()) + " | default / spin 200 | default / Open MPI |\n")
    f.write("|---:|---:|" + "---:|" * (len(names) + 2) + "\n")
    for busy, size in sorted({(b, s) for b, s, _ in rows}):
        med = {w: statistics.median(rows[(busy, size, w)]) for w in names if rows.get((busy, size, w))}
        cells = [f"{med[w]:.2f} us (n={len(rows[(busy, size, w)])})" if w in med else "-" for w in names]
        r1 = med["coll-spin-2"] / med["coll-spin200"] if "coll-spin200" in med else float("nan")
        r2 = med["coll-spin-2"] / med["openmpi"] if "openmpi" in med else float("nan")
        f.write(f"| {busy} | {size} B | " + " | ".join(cells) + f" | {r1:.2f}x | {r2:.2f}x |\n")
print(open(f"{out}/summary.md").read())
PY
echo "results: $out"
