#!/usr/bin/env bash
# Side-by-side all-reduce benchmark on this machine: coll over shm, coll over TCP
# (COLL_SHM_DISABLE=1), Open MPI and MPICH (mpirun, shared memory) and Gloo (TCP on loopback),
# same sizes, same rank counts, same run. Each configuration runs REPEAT times; summarize.py
# reports the median per size.
#
#   bash perf/compare_allreduce.sh                  # 2 ranks, 8 B .. 256 MiB, 3 repeats
#   NPS="2 4" REPEAT=5 MAXB=64M bash perf/compare_allreduce.sh
#
# Writes perf/results/<stamp>/: raw outputs (<library>-np<N>-<repeat>.txt; coll's also as -J
# JSON, <coll config>-np<N>-<repeat>.json, which summarize.py reads), env.txt (machine,
# versions, commands), summary.md and allreduce.png. Needs (Debian): openmpi-bin libopenmpi-dev
# mpich libmpich-dev libgloo-dev python3-matplotlib.
set -euo pipefail
cd "$(dirname "$0")/.."
NPS=${NPS:-${NP:-2}}
REPEAT=${REPEAT:-3}
MAXB=${MAXB:-256M}
T=${T:-0.3}
ARGS="-b 8 -e $MAXB -f 2 -n 1000 -w 10 --max-seconds $T"
build=${COLL_BUILD_DIR:-build}
stamp=$(date -u +%Y%m%d-%H%M%S)
out=perf/results/$stamp
mkdir -p "$out" perf/build

cmake --build "$build" --target coll-perf coll-run >/dev/null
mpicc.openmpi -O2 -o perf/build/mpi_allreduce.openmpi perf/drivers/mpi_allreduce.c -lm
mpicc.mpich -O2 -o perf/build/mpi_allreduce.mpich perf/drivers/mpi_allreduce.c -lm
g++ -O2 -std=c++17 -o perf/build/gloo_allreduce perf/drivers/gloo_allreduce.cc -lgloo -lpthread

{
  echo "date: $(date -u)"
  echo "host: $(hostname); $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  echo "memory: $(free -g | awk '/Mem:/{print $2}') GiB; kernel $(uname -r)"
  echo "coll: $(git rev-parse --short HEAD) ($(git log -1 --format=%s | cut -c1-60))"
  echo "open mpi: $(mpirun.openmpi --version 2>&1 | head -1)"
  echo "mpich: $(mpichversion 2>/dev/null | sed -n 's/^MPICH Version:[[:space:]]*//p')"
  echo "gloo: $(dpkg-query -W -f='${Version}' libgloo-dev 2>/dev/null)"
  echo "ranks: $NPS; repeats: $REPEAT; args: $ARGS"
  echo "commands:"
  echo "commands (NP in $NPS):"
  echo "  coll shm: $build/bin/coll-run -n NP $build/bin/coll-perf all_reduce $ARGS"
  echo "  coll tcp: COLL_SHM_DISABLE=1 $build/bin/coll-run -n NP $build/bin/coll-perf all_reduce $ARGS"
  echo "  open mpi: mpirun.openmpi --allow-run-as-root --oversubscribe -np NP perf/build/mpi_allreduce.openmpi $ARGS"
  echo "  mpich:    mpirun.mpich -np NP perf/build/mpi_allreduce.mpich $ARGS"
  echo "  gloo:     perf/build/gloo_allreduce RANK NP STOREDIR $ARGS (one process per rank)"
} > "$out/env.txt"

run_gloo() {
  local NP=$1 store
  store=$(mktemp -d)
  for ((r = 1; r < NP; r++)); do perf/build/gloo_allreduce "$r" "$NP" "$store" $ARGS >/dev/null & done
  perf/build/gloo_allreduce 0 "$NP" "$store" $ARGS
  wait
  rm -rf "$store"
}

for rep in $(seq 1 "$REPEAT"); do
  for NP in $NPS; do
    echo "repeat $rep/$REPEAT, $NP ranks"
    "$build/bin/coll-run" -n "$NP" "$build/bin/coll-perf" all_reduce $ARGS -J "$out/coll-shm-np$NP-$rep.json" \
      > "$out/coll-shm-np$NP-$rep.txt"
    COLL_SHM_DISABLE=1 "$build/bin/coll-run" -n "$NP" "$build/bin/coll-perf" all_reduce $ARGS \
      -J "$out/coll-tcp-np$NP-$rep.json" > "$out/coll-tcp-np$NP-$rep.txt"
    mpirun.openmpi --allow-run-as-root --oversubscribe -np "$NP" perf/build/mpi_allreduce.openmpi $ARGS \
      > "$out/openmpi-np$NP-$rep.txt" 2>/dev/null
    mpirun.mpich -np "$NP" perf/build/mpi_allreduce.mpich $ARGS > "$out/mpich-np$NP-$rep.txt" 2>/dev/null
    run_gloo "$NP" > "$out/gloo-np$NP-$rep.txt"
  done
done
/usr/bin/python3 perf/summarize.py "$out"
echo "results in $out"
