#!/usr/bin/env bash
# Hierarchical against flat ring all-reduce across simulated hosts, in one run.
#
#   bash perf/hier_allreduce.sh                 # 4 hosts x 2 ranks, 64 KiB .. 256 MiB, 3 repeats
#   HOSTS=2 PER_HOST=2 REPEAT=5 bash perf/hier_allreduce.sh
#   WINDOWS=1 HOSTS=2 PER_HOST=2 bash perf/hier_allreduce.sh   # adds the windows path
#
# Hosts are simulated on this machine: one coll-run per host (--nnodes/--node-rank/--master),
# each with its own COLL_HOSTID, so ranks of one "host" use shm and ranks of different hosts use
# TCP on loopback. (Network namespaces with veth links are the topology issue's tests.) Each
# algorithm is forced with COLL_ALGO=allreduce:<algo>; "tuned" sets nothing. WINDOWS=1 adds two
# runs on buffers from collMemAlloc in symmetric windows (coll-perf -R 2): "window" forces the
# windows path (the host's ranks through the windows, the ring between hosts), "tuned-R2" leaves
# the choice to the tuner.
# Writes perf/results/<stamp>-hier/: raw outputs, env.txt, summary.md.
set -euo pipefail
# Multi-node coll-run needs one random bootstrap secret shared by every node.
export COLL_BOOTSTRAP_SECRET=${COLL_BOOTSTRAP_SECRET:-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')}
cd "$(dirname "$0")/.."
HOSTS=${HOSTS:-4}
PER_HOST=${PER_HOST:-2}
REPEAT=${REPEAT:-3}
MAXB=${MAXB:-256M}
T=${T:-0.3}
build=${COLL_BUILD_DIR:-build}
ARGS="-b 64K -e $MAXB -f 4 -c 1 --max-seconds $T"
out=perf/results/$(date -u +%Y%m%d-%H%M%S)-hier
mkdir -p "$out"
cmake --build "$build" --target coll-perf coll-run >/dev/null
{
  echo "date: $(date -u)"
  echo "host: $(hostname); $(nproc) cores; kernel $(uname -r)"
  echo "coll: $(git rev-parse --short HEAD) ($(git log -1 --format=%s | cut -c1-60))"
  echo "layout: $HOSTS simulated hosts x $PER_HOST ranks (COLL_HOSTID per coll-run; shm inside, TCP across)"
  echo "per host i: COLL_HOSTID=simhost-i COLL_ALGO=allreduce:ALGO $build/bin/coll-run -n $PER_HOST --nnodes $HOSTS" \
    "--node-rank i --master 127.0.0.1:PORT $build/bin/coll-perf all_reduce $ARGS"
} > "$out/env.txt"

run() {  # variant rep; variant: ring, hier, tuned, window, tuned-R2
  local variant=$1 rep=$2 port=$((20000 + RANDOM % 12000)) pids=() algo="" reg=()
  case $variant in
    ring | hier) algo=$variant ;;
    window) algo=window reg=(-R 2) ;;
    tuned-R2) reg=(-R 2) ;;
  esac
  for ((i = 1; i < HOSTS; i++)); do
    env COLL_HOSTID=simhost-$i ${algo:+COLL_ALGO=allreduce:$algo} "$build/bin/coll-run" -n "$PER_HOST" \
      --nnodes "$HOSTS" --node-rank "$i" --master "127.0.0.1:$port" "$build/bin/coll-perf" all_reduce $ARGS \
      "${reg[@]}" > /dev/null &
    pids+=($!)
  done
  env COLL_HOSTID=simhost-0 ${algo:+COLL_ALGO=allreduce:$algo} "$build/bin/coll-run" -n "$PER_HOST" \
    --nnodes "$HOSTS" --node-rank 0 --master "127.0.0.1:$port" "$build/bin/coll-perf" all_reduce $ARGS \
    "${reg[@]}" -J "$out/$variant-$rep.json" > "$out/$variant-$rep.txt"
  wait "${pids[@]}"
}

variants="ring hier tuned"
[ "${WINDOWS:-0}" = 1 ] && variants="$variants window tuned-R2"
echo "variants: $variants (window: COLL_ALGO=allreduce:window -R 2; tuned-R2: -R 2)" >> "$out/env.txt"
for rep in $(seq 1 "$REPEAT"); do
  for variant in $variants; do
    echo "repeat $rep/$REPEAT: $variant"
    run "$variant" "$rep"
  done
done

/usr/bin/python3 - "$out" <<'PY'
import glob, os, statistics, sys
sys.path.insert(0, "perf")
import coll_json  # coll-perf's -J files, not its text table
out = sys.argv[1]
rows = {}
for path in glob.glob(os.path.join(out, "*.json")):
    algo = os.path.basename(path).rsplit("-", 1)[0]
    for size, r in coll_json.rows(path).items():
        rows.setdefault(size, {}).setdefault(algo, []).append((r["time"], r["busbw"], r["wrong"]))
names = [v for v in ["ring", "hier", "tuned", "window", "tuned-R2"] if any(v in r for r in rows.values())]
lines = ["| size (B) | " + " | ".join(f"{v} time (us) | {v} busbw" for v in names) + " | ring / hier time |",
         "|---:|" + "---:|---:|" * len(names) + "---:|"]
wrong = 0
for size in sorted(rows):
    med = {}
    for algo, v in rows[size].items():
        med[algo] = (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v))
        wrong += sum(max(0, x[2]) for x in v)
    def cell(a):
        return f"{med[a][0]:.1f} | {med[a][1]:.2f}" if a in med else "- | -"
    ratio = med["ring"][0] / med["hier"][0] if "ring" in med and "hier" in med else float("nan")
    lines.append(f"| {size} | " + " | ".join(cell(v) for v in names) + f" | {ratio:.2f}x |")
lines += ["", f"Medians of the repeats, out-of-place float sum. Wrong elements over all runs: {wrong}"]
open(os.path.join(out, "summary.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
print("results in", out)
PY
