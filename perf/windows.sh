#!/usr/bin/env bash
# All-reduce (float32, sum) on windows against the same call on plain buffers and against Open MPI
# (issue 46), on this host, in one run: coll-perf -R 2 (buffers from collMemAlloc in symmetric
# windows, the tuner's choice between the one-copy path and the FIFO algorithms), -R 2 with
# COLL_ALGO=window (the path forced, for the tuner's constants) and with COLL_ALGO=^window (the
# FIFO algorithms on the same memory), -R 0 (plain heap buffers, the default), and Open MPI 4's
# MPI_Allreduce (perf/drivers/mpi_allreduce.c, over its shared memory). Every configuration once
# per round, rounds alternating, REPEAT rounds; medians per size, out of place and in place.
#
#   REPEAT=5 NPS="2 4" bash perf/windows.sh
#   SUMMARIZE=perf/results/<stamp>-windows NPS="2 4" bash perf/windows.sh   # summary.md again
#
# Writes perf/results/<stamp>-windows/: raw outputs, env.txt (machine, versions, commands) and
# summary.md (median time in us and bus bandwidth in GB/s per size, the ratios the issue's targets
# are about).
set -euo pipefail
cd "$(dirname "$0")/.."
REPEAT=${REPEAT:-5}
NPS=${NPS:-2 4}
MIN=${MIN:-8}
MAX=${MAX:-256M}
build=${COLL_BUILD_DIR:-build}
SUMMARIZE=${SUMMARIZE:-}
if [ -z "$SUMMARIZE" ]; then
out=perf/results/$(date -u +%Y%m%d-%H%M%S)-windows
mkdir -p "$out" perf/build
cmake --build "$build" --target coll-perf coll-run >/dev/null
mpicc.openmpi -O3 -o perf/build/mpi_allreduce perf/drivers/mpi_allreduce.c -lm
SPEC="-b $MIN -e $MAX -f 2 -n 2000 -w 20 --max-seconds 0.25"
{
  echo "date: $(date -u)"
  echo "host: $(hostname); $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  echo "memory: $(free -g | awk '/Mem:/{print $2}') GiB; kernel $(uname -r)"
  echo "coll HEAD: $(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes'); build $build ($(grep -m1 CMAKE_BUILD_TYPE: "$build/CMakeCache.txt" | cut -d= -f2))"
  echo "open mpi: $(mpirun.openmpi --version 2>&1 | head -1)"
  echo "ranks: $NPS; rounds: $REPEAT, alternating"
  echo "commands:"
  echo "  windows:        coll-run -n NP coll-perf all_reduce -R 2 $SPEC"
  echo "  windows-forced: COLL_ALGO=window coll-run -n NP coll-perf all_reduce -R 2 $SPEC"
  echo "  windows-off:    COLL_ALGO=^window coll-run -n NP coll-perf all_reduce -R 2 $SPEC"
  echo "  plain:          coll-run -n NP coll-perf all_reduce $SPEC"
  echo "  openmpi:        mpirun.openmpi --allow-run-as-root --oversubscribe -np NP perf/build/mpi_allreduce $SPEC"
} >"$out/env.txt"
perf="$build/bin/coll-perf all_reduce $SPEC"
for rep in $(seq 1 "$REPEAT"); do
  for NP in $NPS; do
    echo "round $rep/$REPEAT, $NP ranks" >&2
    "$build/bin/coll-run" -n "$NP" $perf -R 2 >"$out/windows-np$NP-$rep.txt" 2>&1
    COLL_ALGO=window "$build/bin/coll-run" -n "$NP" $perf -R 2 >"$out/windows-forced-np$NP-$rep.txt" 2>&1
    COLL_ALGO=^window "$build/bin/coll-run" -n "$NP" $perf -R 2 >"$out/windows-off-np$NP-$rep.txt" 2>&1
    "$build/bin/coll-run" -n "$NP" $perf >"$out/plain-np$NP-$rep.txt" 2>&1
    mpirun.openmpi --allow-run-as-root --oversubscribe -np "$NP" perf/build/mpi_allreduce $SPEC \
      >"$out/openmpi-np$NP-$rep.txt" 2>&1
  done
done
else
  out=$SUMMARIZE
fi

/usr/bin/python3 - "$out" "$NPS" <<'PY'
import glob, statistics, sys
out, nps = sys.argv[1], [int(n) for n in sys.argv[2].split()]
def parse(line):
    # coll-perf: size count type redop root algo? time algbw busbw #wrong [time algbw busbw #wrong]
    # (the algorithm column is text); Open MPI's driver: size count type redop time algbw busbw #wrong.
    f = line.split()
    if len(f) < 8 or not f[0].isdigit() or not f[1].isdigit():
        return None
    nums = []
    for x in f[4:]:
        try:
            nums.append(float(x))
        except ValueError:
            nums.append(None)
    algo = next((x for x in f[4:] if not x.replace('.', '', 1).replace('-', '', 1).isdigit() and x not in ("N/A",)), "")
    vals = [x for x in nums if x is not None]
    # the root column (coll-perf) is -1 for all-reduce; drop it
    if f[4] == "-1":
        vals = vals[1:]
    oop = (vals[0], vals[2]) if len(vals) >= 3 else None
    ip = (vals[4], vals[6]) if len(vals) >= 7 else None
    return int(f[0]), oop, ip, algo
def medians(label):
    per = {}
    algos = {}
    for name in sorted(glob.glob(f"{out}/{label}-[0-9]*.txt")):
        for line in open(name):
            r = parse(line)
            if not r or not r[1]:
                continue
            per.setdefault(r[0], []).append(r[1:3])
            algos.setdefault(r[0], set()).add(r[3])
    res = {}
    for b, v in per.items():
        oop = [x[0] for x in v if x[0]]
        ip = [x[1] for x in v if x[1]]
        res[b] = {"t": statistics.median(t for t, _ in oop), "bw": statistics.median(w for _, w in oop),
                  "ti": statistics.median(t for t, _ in ip) if ip else None,
                  "bwi": statistics.median(w for _, w in ip) if ip else None, "n": len(v),
                  "algo": "/".join(sorted(a for a in algos[b] if a))}
    return res
names = [("windows", "windows (tuner)"), ("windows-forced", "windows forced"), ("windows-off", "windows memory, ^window"),
         ("plain", "plain"), ("openmpi", "Open MPI")]
lines = []
for np in nps:
    got = {k: medians(f"{k}-np{np}") for k, _ in names}
    lines += [f"# {np} ranks, out of place: median time in us (bus GB/s); in place for coll's rows after the bar", "",
              "| bytes | " + " | ".join(n for _, n in names) + " | tuner's path | windows/plain time | windows/plain busbw | windows/Open MPI busbw | forced/plain time | in place: windows / plain time |",
              "|---|" + "---|" * (len(names) + 6)]
    for b in sorted(got["plain"]):
        cells = []
        for k, _ in names:
            v = got[k].get(b)
            cells.append(f"{v['t']:.2f} ({v['bw']:.2f})" if v else "")
        w, p, o, f = (got[k].get(b) for k in ("windows", "plain", "openmpi", "windows-forced"))
        def ratio(x, y, key):
            return f"{x[key] / y[key]:.2f}" if x and y and y.get(key) else ""
        lines.append(f"| {b} | " + " | ".join(cells) + f" | {w['algo'] if w else ''} | {ratio(w, p, 't')} | {ratio(w, p, 'bw')} | {ratio(w, o, 'bw')} | {ratio(f, p, 't')} | {ratio(w, p, 'ti')} |")
    lines.append("")
open(f"{out}/summary.md", "w").write("\n".join(lines))
print("\n".join(lines))
PY
echo "results in $out"
