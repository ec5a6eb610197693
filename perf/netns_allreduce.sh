#!/usr/bin/env bash
# All-reduce across hosts that are network namespaces on this machine (tests/netns/lib.sh: veth
# pairs into a bridge, 10.77.0.0/24), in one run: coll with the flat ring, the hierarchical
# algorithm and the tuner's choice; Gloo (TCP, every rank binding its namespace's address); and
# Open MPI's mpirun across the namespaces (tests/netns/mpirun_agent.sh as its ssh; vader inside a
# host, TCP between). Each configuration runs REPEAT times; the summary takes medians.
#
#   bash perf/netns_allreduce.sh                        # 2 hosts x 2 ranks, 8 B .. 64 MiB, 3 repeats
#   HOSTS=4 PER_HOST=2 REPEAT=5 MAXB=256M bash perf/netns_allreduce.sh
#
# Writes perf/results/<stamp>-netns/: raw outputs (<config>-<repeat>.txt), env.txt (machine,
# versions, commands), summary.md and allreduce.png. Needs root, iproute2, openmpi-bin,
# libopenmpi-dev, libgloo-dev, python3-matplotlib.
set -uo pipefail
# Multi-node coll-run needs one random bootstrap secret shared by every node.
export COLL_BOOTSTRAP_SECRET=${COLL_BOOTSTRAP_SECRET:-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')}
cd "$(dirname "$0")/.."
HOSTS=${HOSTS:-2}
PER_HOST=${PER_HOST:-2}
REPEAT=${REPEAT:-3}
MAXB=${MAXB:-64M}
T=${T:-0.3}
build=$(cd "${COLL_BUILD_DIR:-build}" && pwd)
ARGS="-b 8 -e $MAXB -f 4 -n 1000 -w 5 -c 1 --max-seconds $T"
n=$((HOSTS * PER_HOST))
out=$(pwd)/perf/results/$(date -u +%Y%m%d-%H%M%S)-netns
mkdir -p "$out" perf/build
cmake --build "$build" --target coll-perf coll-run >/dev/null || exit 1
mpicc.openmpi -O2 -o perf/build/mpi_allreduce.openmpi perf/drivers/mpi_allreduce.c -lm || exit 1
g++ -O2 -std=c++17 -o perf/build/gloo_allreduce perf/drivers/gloo_allreduce.cc -lgloo -lpthread || exit 1

source tests/netns/lib.sh
netns_up "$HOSTS"
agent=$(pwd)/tests/netns/mpirun_agent.sh
slots=$(for ((i = 0; i < HOSTS; i++)); do printf "collhost%d:%d," "$i" "$PER_HOST"; done)
{
  echo "date: $(date -u)"
  echo "machine: $(hostname); $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); kernel $(uname -r)"
  echo "coll: $(git rev-parse --short HEAD) ($(git log -1 --format=%s | cut -c1-60))"
  echo "open mpi: $(mpirun.openmpi --version 2>&1 | head -1); gloo: $(dpkg-query -W -f='${Version}' libgloo-dev)"
  echo "layout: $HOSTS hosts (network namespaces, veth + bridge) x $PER_HOST ranks; repeats: $REPEAT"
  echo "commands (host i = namespace collhost<i>, address 10.77.0.(i+1)):"
  echo "  coll ring|hier|tuned, per host i: COLL_ALGO=allreduce:ring|allreduce:hier|(unset) coll-run -n $PER_HOST" \
    "--nnodes $HOSTS --node-rank i --master 10.77.0.1:PORT coll-perf all_reduce $ARGS"
  echo "  gloo, per rank r on host r/$PER_HOST: GLOO_HOST=10.77.0.(host+1) perf/build/gloo_allreduce r $n STOREDIR $ARGS"
  echo "  open mpi, on host 0: mpirun.openmpi --host ${slots%,} -np $n --mca plm_rsh_agent $agent" \
    "--mca oob_tcp_if_include 10.77.0.0/24 --mca btl_tcp_if_include 10.77.0.0/24 perf/build/mpi_allreduce.openmpi $ARGS"
} > "$out/env.txt"

run_coll() {  # CONFIG REP [ENV...]
  local cfg=$1 rep=$2 port=$((20000 + RANDOM % 12000)) pids=() i
  shift 2
  for ((i = HOSTS - 1; i >= 0; i--)); do
    local dest=/dev/null
    [ $i = 0 ] && dest="$out/$cfg-$rep.txt"
    on_host "$i" env "$@" "$build/bin/coll-run" -n "$PER_HOST" --nnodes "$HOSTS" --node-rank "$i" \
      --master "10.77.0.1:$port" --timeout 600 "$build/bin/coll-perf" all_reduce $ARGS -J "$out/$cfg-$rep.json" \
      > "$dest" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"
}

run_gloo() {  # REP
  local store r h pids=()
  store=$(mktemp -d)
  for ((r = n - 1; r >= 0; r--)); do
    h=$((r / PER_HOST))
    local dest=/dev/null
    [ $r = 0 ] && dest="$out/gloo-$1.txt"
    on_host "$h" env GLOO_HOST="10.77.0.$((h + 1))" perf/build/gloo_allreduce "$r" "$n" "$store" $ARGS \
      > "$dest" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"
  rm -rf "$store"
}

run_mpi() {  # REP
  on_host 0 env NETNS_PREFIX="${tag}h" timeout 600 mpirun.openmpi --allow-run-as-root --oversubscribe \
    --host "${slots%,}" -np "$n" --mca plm_rsh_agent "$agent" --mca oob_tcp_if_include 10.77.0.0/24 \
    --mca btl_tcp_if_include 10.77.0.0/24 perf/build/mpi_allreduce.openmpi $ARGS > "$out/openmpi-$1.txt" 2>&1
}

for rep in $(seq 1 "$REPEAT"); do
  echo "repeat $rep/$REPEAT"
  run_coll coll-ring "$rep" COLL_ALGO=allreduce:ring
  run_coll coll-hier "$rep" COLL_ALGO=allreduce:hier
  run_coll coll-tuned "$rep"
  run_gloo "$rep"
  run_mpi "$rep"
done

/usr/bin/python3 - "$out" "$HOSTS" "$PER_HOST" <<'PY'
import os, re, statistics, sys
from collections import defaultdict
sys.path.insert(0, "perf")
import coll_json  # coll's results from its -J files (only global rank 0 writes one), the others' from text
out, hosts, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ROW = re.compile(r"^\s+(\d+)\s+(\d+)\s+\S+\s+\S+\s+-?\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)")
CFGS = ["coll-ring", "coll-hier", "coll-tuned", "gloo", "openmpi"]
data = defaultdict(lambda: defaultdict(list))  # size -> cfg -> [(time, busbw)]
wrong, runs = 0, defaultdict(int)
for name in os.listdir(out):
    m = re.match(r"(.+)-(\d+)\.txt$", name)
    if not m or m.group(1) not in CFGS:
        continue
    runs[m.group(1)] += 1
    json_path = os.path.join(out, name[:-4] + ".json")
    if m.group(1).startswith("coll-") and os.path.exists(json_path):
        for size, r in coll_json.rows(json_path).items():
            data[size][m.group(1)].append((r["time"], r["busbw"]))
            wrong += max(r["wrong"], 0)
        continue
    for line in open(os.path.join(out, name)):
        r = ROW.match(line)
        if r:
            size, _, t, _, bus, bad = r.groups()
            data[int(size)][m.group(1)].append((float(t), float(bus)))
            wrong += int(bad)
med = {s: {c: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for c, v in d.items()}
       for s, d in data.items()}
head = "| size (B) | " + " | ".join(f"{c} us / busbw" for c in CFGS) + " | tuned/gloo time | tuned/mpi time | hier/ring time |"
lines = [f"All-reduce, float sum, out of place, {hosts} hosts (network namespaces) x {per} ranks; medians of "
         f"{min(runs.values()) if runs else 0} runs; busbw in GB/s.", "", head, "|" + "---:|" * (len(CFGS) + 4)]
def ratio(s, a, b):
    return f"{med[s][a][0] / med[s][b][0]:.2f}" if a in med[s] and b in med[s] else "-"
for s in sorted(med):
    cells = [f"{med[s][c][0]:.1f} / {med[s][c][1]:.2f}" if c in med[s] else "-" for c in CFGS]
    lines.append(f"| {s} | " + " | ".join(cells) + f" | {ratio(s, 'coll-tuned', 'gloo')} | "
                 f"{ratio(s, 'coll-tuned', 'openmpi')} | {ratio(s, 'coll-hier', 'coll-ring')} |")
lines += ["", f"Wrong elements over all runs: {wrong}. Ratios below 1: the first is faster."]
open(os.path.join(out, "summary.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 2, figsize=(12, 4.5))
    for c in CFGS:
        xs = [s for s in sorted(med) if c in med[s]]
        ax[0].loglog(xs, [med[s][c][0] for s in xs], marker="o", label=c)
        ax[1].semilogx(xs, [med[s][c][1] for s in xs], marker="o", label=c)
    ax[0].set(xlabel="bytes", ylabel="time (us)", title=f"all-reduce, {hosts} netns hosts x {per} ranks")
    ax[1].set(xlabel="bytes", ylabel="busbw (GB/s)", title="bus bandwidth")
    for a in ax:
        a.grid(True, which="both", alpha=0.3)
        a.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "allreduce.png"), dpi=90)
except ImportError:
    print("matplotlib missing: no plot")
PY
echo "results in $out"
