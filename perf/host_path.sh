#!/usr/bin/env bash
# The host path's latency and bandwidth against the CPU anchors, in one run (issue 37):
# all-reduce (float32, sum, out of place) at 8 B, 1 MiB and 256 MiB with NPS ranks, coll over
# shared memory (HEAD's build, and a reference build when BASE_BUILD is set), Open MPI and MPICH
# (both over shared memory) and Gloo (TCP on loopback), built from ../shared/anchors/cpu-baselines.
# Every configuration runs once per round, rounds alternate, REPEAT rounds; medians per size.
#
#   REPEAT=5 bash perf/host_path.sh
#   BASE_BUILD=/tmp/base-build NPS="2 4" REPEAT=3 bash perf/host_path.sh
#   SUMMARIZE=perf/results/<stamp>-host NPS="2 4" bash perf/host_path.sh   # summary.md again
#
# Writes perf/results/<stamp>-host/: raw outputs, env.txt (machine, versions, commands) and
# summary.md (median time in us, bus bandwidth in GB/s, coll's ratios to Open MPI).
set -euo pipefail
cd "$(dirname "$0")/.."
REPEAT=${REPEAT:-5}
NPS=${NPS:-2 4}
BASE_BUILD=${BASE_BUILD:-}
ANCHORS=${ANCHORS:-../shared/anchors/cpu-baselines}
build=${COLL_BUILD_DIR:-build}
SUMMARIZE=${SUMMARIZE:-}  # a results folder: only (re)write its summary.md
if [ -z "$SUMMARIZE" ]; then
stamp=$(date -u +%Y%m%d-%H%M%S)
out=perf/results/$stamp-host
mkdir -p "$out" perf/build/anchors
cmake --build "$build" --target coll-perf coll-run >/dev/null
# The anchors' own programs and flags (their build.sh), built here so that ../shared stays as it is.
mpicc.openmpi -O3 -o perf/build/anchors/mpi.openmpi "$ANCHORS/mpi_allreduce_bench.c" -lm
mpicc.mpich -O3 -o perf/build/anchors/mpi.mpich "$ANCHORS/mpi_allreduce_bench.c" -lm
g++ -std=c++17 -O3 -o perf/build/anchors/gloo "$ANCHORS/gloo_allreduce_bench.cc" -lgloo -lpthread

SPECS=("-b 8 -e 8 -n 20000 -w 500" "-b 1M -e 1M -n 300 -w 20" "-b 256M -e 256M -n 5 -w 1")
{
  echo "date: $(date -u)"
  echo "host: $(hostname); $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  echo "memory: $(free -g | awk '/Mem:/{print $2}') GiB; kernel $(uname -r)"
  echo "coll HEAD: $(git rev-parse --short HEAD) ($(git log -1 --format=%s | cut -c1-70)); build $build ($(grep -m1 CMAKE_BUILD_TYPE: "$build/CMakeCache.txt" | cut -d= -f2))"
  [ -n "$BASE_BUILD" ] && echo "coll reference: $BASE_BUILD"
  echo "open mpi: $(mpirun.openmpi --version 2>&1 | head -1)"
  echo "mpich: $(mpichversion 2>/dev/null | sed -n 's/^MPICH Version:[[:space:]]*//p')"
  echo "gloo: $(dpkg-query -W -f='${Version}' libgloo-dev 2>/dev/null)"
  echo "anchors: $ANCHORS (built with -O3 into perf/build/anchors)"
  echo "ranks: $NPS; rounds: $REPEAT, alternating; sizes: ${SPECS[*]}"
  echo "commands (S, N, W per size):"
  echo "  coll:     BUILD/bin/coll-run -n NP BUILD/bin/coll-perf all_reduce -b S -e S -n N -w W"
  echo "  open mpi: mpirun.openmpi --allow-run-as-root --oversubscribe -np NP perf/build/anchors/mpi.openmpi -b S -e S -n N -w W"
  echo "  mpich:    mpirun.mpich -np NP perf/build/anchors/mpi.mpich -b S -e S -n N -w W"
  echo "  gloo:     GLOO_BENCH=perf/build/anchors/gloo $ANCHORS/gloo_launch.sh NP -b S -e S -n N -w W"
} > "$out/env.txt"

run_sizes() {  # $1: label (file name), rest: the command before the size arguments
  local label=$1
  shift
  for spec in "${SPECS[@]}"; do "$@" $spec 2>/dev/null; done > "$out/$label-$rep.txt"
}

for rep in $(seq 1 "$REPEAT"); do
  for NP in $NPS; do
    echo "round $rep/$REPEAT, $NP ranks"
    [ -n "$BASE_BUILD" ] && run_sizes "base-np$NP" "$BASE_BUILD/bin/coll-run" -n "$NP" "$BASE_BUILD/bin/coll-perf" all_reduce
    run_sizes "coll-np$NP" "$build/bin/coll-run" -n "$NP" "$build/bin/coll-perf" all_reduce
    run_sizes "openmpi-np$NP" mpirun.openmpi --allow-run-as-root --oversubscribe -np "$NP" perf/build/anchors/mpi.openmpi
    run_sizes "mpich-np$NP" mpirun.mpich -np "$NP" perf/build/anchors/mpi.mpich
    run_sizes "gloo-np$NP" env GLOO_BENCH=perf/build/anchors/gloo "$ANCHORS/gloo_launch.sh" "$NP"
  done
done
else
  out=$SUMMARIZE
fi

/usr/bin/python3 - "$out" "$NPS" <<'PY'
import glob, statistics, sys
out, nps = sys.argv[1], [int(n) for n in sys.argv[2].split()]
def parse(line):
    # coll-perf: size count type redop root time algbw busbw #wrong [in-place: time algbw busbw
    # #wrong]; the anchors: size count type redop time algbw busbw #wrong (no root column).
    f = line.split()
    if len(f) not in (8, 9, 13) or not f[0].isdigit() or not f[1].isdigit():
        return None
    t = 5 if len(f) in (9, 13) else 4
    try:
        return int(f[0]), float(f[t]), float(f[t + 2])
    except ValueError:
        return None
def medians(label):
    per = {}
    for f in sorted(glob.glob(f"{out}/{label}-[0-9]*.txt")):
        for line in open(f):
            r = parse(line)
            if r: per.setdefault(r[0], []).append(r[1:])
    return {b: (statistics.median(t for t, _ in v), statistics.median(w for _, w in v), len(v)) for b, v in per.items()}
names = [("base", "coll reference"), ("coll", "coll"), ("openmpi", "Open MPI"), ("mpich", "MPICH"), ("gloo", "Gloo")]
lines = []
for np in nps:
    got = {k: medians(f"{k}-np{np}") for k, _ in names}
    shown = [(k, n) for k, n in names if got[k]]
    lines += [f"# {np} ranks: median time in us (bus GB/s)", "",
              "| bytes | " + " | ".join(n for _, n in shown) + " | coll time / Open MPI | coll busbw / Open MPI |",
              "|---|" + "---|" * (len(shown) + 2)]
    for b in sorted(got["coll"]):
        cells = []
        for k, _ in shown:
            v = got[k].get(b)
            cells.append(f"{v[0]:.2f} ({v[1]:.2f})" if v else "")
        c, o = got["coll"][b], got["openmpi"].get(b)
        ratio = f"{c[0] / o[0]:.2f} | {c[1] / o[1]:.2f}" if o and o[1] > 0 else f"{c[0] / o[0]:.2f} | " if o else " | "
        lines.append(f"| {b} | " + " | ".join(cells) + f" | {ratio} |")
    lines.append("")
open(f"{out}/summary.md", "w").write("\n".join(lines))
print("\n".join(lines))
PY
echo "results in $out"
