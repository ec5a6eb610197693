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
#   COLLS="reduce_scatter all_gather broadcast reduce alltoall" CONFIGS="windows windows-forced windows-off" \
#     REPEAT=3 bash perf/windows.sh     # the other collectives: the tuner's choice against both paths
#   SWEEP=0 REPEAT=7 bash perf/windows.sh    # only the 8 B and 1 MiB runs (the targets), no sweep
#   SUMMARIZE=perf/results/<stamp>-windows NPS="2 4" bash perf/windows.sh   # summary.md again
#
# Writes perf/results/<stamp>-windows/: raw outputs, env.txt (machine, versions, commands) and
# summary.md (median time in us and bus bandwidth in GB/s per size, the ratios the issue's targets
# are about).
set -euo pipefail
cd "$(dirname "$0")/.."
REPEAT=${REPEAT:-5}
NPS=${NPS:-2 4}
COLLS=${COLLS:-all_reduce}
CONFIGS=${CONFIGS:-windows windows-forced windows-off plain openmpi}
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
STEADY=("-b 8 -e 8 -n 40000 -w 1000" "-b 1M -e 1M -n 500 -w 50")
{
  echo "date: $(date -u)"
  echo "host: $(hostname); $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  echo "memory: $(free -g | awk '/Mem:/{print $2}') GiB; kernel $(uname -r)"
  echo "coll HEAD: $(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes'); build $build ($(grep -m1 CMAKE_BUILD_TYPE: "$build/CMakeCache.txt" | cut -d= -f2))"
  echo "open mpi: $(mpirun.openmpi --version 2>&1 | head -1)"
  echo "ranks: $NPS; rounds: $REPEAT, configurations in a rotated order each round"
  echo "sweep: $SPEC; steady (all_reduce): ${STEADY[*]}"
  echo "commands:"
  echo "  windows:        coll-run -n NP coll-perf all_reduce -R 2 $SPEC"
  echo "  windows-forced: COLL_ALGO=window coll-run -n NP coll-perf all_reduce -R 2 $SPEC"
  echo "  windows-off:    COLL_ALGO=^window coll-run -n NP coll-perf all_reduce -R 2 $SPEC"
  echo "  plain:          coll-run -n NP coll-perf all_reduce $SPEC"
  echo "  openmpi:        mpirun.openmpi --allow-run-as-root --oversubscribe -np NP perf/build/mpi_allreduce $SPEC"
} >"$out/env.txt"
run() {  # $1: config, $2: collective, $3: ranks, $4: kind (sweep or steady), rest: the sizes' options
  local cfg=$1 coll=$2 np=$3 kind=$4
  shift 4
  local f="$out/$cfg-$coll-np$np-$kind-$rep" perf="$build/bin/coll-perf $coll"
  case $cfg in
    windows) "$build/bin/coll-run" -n "$np" $perf "$@" -R 2 -J "$f.json" >"$f.txt" 2>&1 ;;
    windows-forced) COLL_ALGO=window "$build/bin/coll-run" -n "$np" $perf "$@" -R 2 -J "$f.json" >"$f.txt" 2>&1 ;;
    windows-off) COLL_ALGO=^window "$build/bin/coll-run" -n "$np" $perf "$@" -R 2 -J "$f.json" >"$f.txt" 2>&1 ;;
    plain) "$build/bin/coll-run" -n "$np" $perf "$@" -J "$f.json" >"$f.txt" 2>&1 ;;
    openmpi) [ "$coll" = all_reduce ] && mpirun.openmpi --allow-run-as-root --oversubscribe -np "$np" \
      perf/build/mpi_allreduce "$@" >"$f.txt" 2>&1 ;;
  esac
  return 0
}
read -ra configs <<<"$CONFIGS"
for rep in $(seq 1 "$REPEAT"); do
  # The configurations in a rotated order each round: none is always the first after a change.
  order=("${configs[@]:$(((rep - 1) % ${#configs[@]}))}" "${configs[@]:0:$(((rep - 1) % ${#configs[@]}))}")
  for NP in $NPS; do
    for c in $COLLS; do
      echo "round $rep/$REPEAT, $NP ranks, $c: ${order[*]}" >&2
      [ "${SWEEP:-1}" = 0 ] || for cfg in "${order[@]}"; do run "$cfg" "$c" "$NP" sweep $SPEC; done
      if [ "$c" = all_reduce ]; then
        for spec in "${STEADY[@]}"; do
          for cfg in "${order[@]}"; do run "$cfg" "$c" "$NP" "steady$(echo $spec | cut -d' ' -f2)" $spec; done
        done
      fi
    done
  done
done
else
  out=$SUMMARIZE
fi

/usr/bin/python3 - "$out" "$NPS" "$COLLS" <<'PY'
import glob, os, statistics, sys
sys.path.insert(0, "perf")
import coll_json
out, nps, colls = sys.argv[1], [int(n) for n in sys.argv[2].split()], sys.argv[3].split()
def text_rows(path):
    # Open MPI's driver: size count type redop root time algbw busbw #wrong (out of place only).
    rows = {}
    for line in open(path):
        f = line.split()
        if len(f) == 9 and f[0].isdigit() and f[1].isdigit():
            rows[int(f[0])] = {"time": float(f[5]), "busbw": float(f[7]), "algorithm": ""}
    return rows
def medians(label):
    per = {}
    for name in sorted(glob.glob(f"{out}/{label}-[0-9]*.txt")):
        js = name[:-4] + ".json"
        oop = coll_json.rows(js) if os.path.exists(js) else text_rows(name)
        ip = coll_json.rows(js, "in_place") if os.path.exists(js) else {}
        for b, r in oop.items():
            per.setdefault(b, []).append((r, ip.get(b)))
    res = {}
    for b, v in per.items():
        ips = [i for _, i in v if i]
        res[b] = {"t": statistics.median(r["time"] for r, _ in v), "bw": statistics.median(r["busbw"] for r, _ in v),
                  "ti": statistics.median(i["time"] for i in ips) if ips else None, "n": len(v),
                  "algo": "/".join(sorted({r["algorithm"] for r, _ in v if r["algorithm"]}))}
    return res
names = [("windows", "windows (tuner)"), ("windows-forced", "windows forced"), ("windows-off", "windows memory, ^window"),
         ("plain", "plain"), ("openmpi", "Open MPI")]
lines = []
def ratio(x, y, key):
    return f"{x[key] / y[key]:.2f}" if x and y and x.get(key) and y.get(key) else ""
for coll, np in [(c, n) for c in colls for n in nps]:
    for kind in ("steady8", "steady1M", "sweep"):
        got = {k: medians(f"{k}-{coll}-np{np}-{kind}") for k, _ in names}
        base = "plain" if got["plain"] else "windows-off"
        if not got[base]:
            continue
        shown = [(k, n) for k, n in names if got[k]]
        what = {"steady8": "8 B alone (-n 40000 -w 1000)", "steady1M": "1 MiB alone (-n 500 -w 50)",
                "sweep": "every size (-f 2 sweep)"}[kind]
        lines += [f"# {coll}, {np} ranks, {what}: median time in us (bus GB/s), out of place", "",
                  "| bytes | " + " | ".join(n for _, n in shown) +
                  f" | tuner's path | windows / {base} time | windows / {base} busbw | windows / Open MPI busbw | forced / {base} time | in place: windows / {base} time |",
                  "|---|" + "---|" * (len(shown) + 6)]
        for b in sorted(got[base]):
            cells = [f"{got[k][b]['t']:.2f} ({got[k][b]['bw']:.2f})" if b in got[k] else "" for k, _ in shown]
            w, p, o, f = (got[k].get(b) for k in ("windows", base, "openmpi", "windows-forced"))
            lines.append(f"| {b} | " + " | ".join(cells) + f" | {w['algo'] if w else ''} | {ratio(w, p, 't')} | "
                         f"{ratio(w, p, 'bw')} | {ratio(w, o, 'bw')} | {ratio(f, p, 't')} | {ratio(w, p, 'ti')} |")
        lines.append("")
open(f"{out}/summary.md", "w").write("\n".join(lines))
print("\n".join(lines))
PY
echo "results in $out"
