#!/usr/bin/env bash
# One-way latency of a small put with its signal between 2 ranks on this host (issue 46): coll's
# collPutSignal/collWaitSignal ping-pong on windows from collMemAlloc, coll's collSend/collRecv,
# and Open MPI's MPI_Put + MPI_Win_flush with the target polling a flag in its window
# (perf/drivers). Every configuration once per round, REPEAT rounds alternating; medians.
#
#   REPEAT=9 SIZES="8 4096" bash perf/onesided.sh
#
# Writes perf/results/<stamp>-onesided/: raw.txt, env.txt and summary.md.
set -euo pipefail
cd "$(dirname "$0")/.."
REPEAT=${REPEAT:-9}
SIZES=${SIZES:-8 4096}
build=${COLL_BUILD_DIR:-build}
out=perf/results/$(date -u +%Y%m%d-%H%M%S)-onesided
mkdir -p "$out" perf/build
cmake --build "$build" --target coll coll-run >/dev/null
gcc -O2 -Iinclude -I"$build/include" -o perf/build/put_pingpong perf/drivers/put_pingpong.c -L"$build/src" -lcoll \
  -Wl,-rpath,"$(cd "$build/src" && pwd)"
mpicc.openmpi -O2 -o perf/build/mpi_put_pingpong perf/drivers/mpi_put_pingpong.c
{
  echo "date: $(date -u)"
  echo "host: $(hostname); $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  echo "kernel $(uname -r); coll HEAD: $(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes')"
  echo "open mpi: $(mpirun.openmpi --version 2>&1 | head -1)"
  echo "coll:     $build/bin/coll-run -n 2 perf/build/put_pingpong put|sendrecv BYTES 20000 1000"
  echo "open mpi: mpirun.openmpi --allow-run-as-root -np 2 perf/build/mpi_put_pingpong BYTES 20000 1000"
} >"$out/env.txt"
for r in $(seq "$REPEAT"); do
  for b in $SIZES; do
    "$build/bin/coll-run" -n 2 perf/build/put_pingpong put "$b" 20000 1000 >>"$out/raw.txt"
    "$build/bin/coll-run" -n 2 perf/build/put_pingpong sendrecv "$b" 20000 1000 >>"$out/raw.txt"
    mpirun.openmpi --allow-run-as-root -np 2 perf/build/mpi_put_pingpong "$b" 20000 1000 >>"$out/raw.txt"
  done
  echo "round $r done" >&2
done
python3 - "$out" <<'PY'
import collections, statistics, sys
out = sys.argv[1]
v = collections.defaultdict(list)
for line in open(f"{out}/raw.txt"):
    f = line.split()
    if len(f) >= 4 and f[2] == "B:":
        v[(f[0], int(f[1]))].append(float(f[3]))
names = ["coll-put", "coll-sendrecv", "openmpi-put"]
with open(f"{out}/summary.md", "w") as o:
    o.write("| bytes | coll put+signal us | coll send/recv us | Open MPI put+flush us | put / send-recv | put / Open MPI put |\n")
    o.write("|---:|---:|---:|---:|---:|---:|\n")
    for b in sorted({b for _, b in v}):
        m = {k: statistics.median(v[(k, b)]) for k in names if v.get((k, b))}
        o.write(f"| {b} | " + " | ".join(f"{m[k]:.3f} (n={len(v[(k, b)])})" if k in m else "-" for k in names)
                + f" | {m['coll-put'] / m['coll-sendrecv']:.2f}x | {m['coll-put'] / m['openmpi-put']:.2f}x |\n")
print(open(f"{out}/summary.md").read())
PY
echo "results: $out"
