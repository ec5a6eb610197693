#!/usr/bin/env bash
# coll over UCX in several configurations against Open MPI over UCX, interleaved: each round runs
# every configuration once, then Open MPI, so that the VM's slow and fast phases fall on all of
# them alike. For "which knob moves the 1 MiB (or 8 B) all-reduce": 2 ranks on loopback, shm off,
# UCX_TLS=tcp, float32 sum, out of place.
#
#   bash perf/ucx_probe.sh "base:" "seg256:UCX_TCP_TX_SEG_SIZE=256k UCX_TCP_RX_SEG_SIZE=256k"
#   SIZE=8 N=2000 W=50 ROUNDS=9 bash perf/ucx_probe.sh "base:" "thread:COLL_NET_PROXY=thread"
#
# Each argument is NAME:ENV (space-separated VAR=value pairs, possibly none) for coll. Writes
# perf/results/<stamp>-ucx-probe/: one line per round (rounds.txt), env.txt, summary.md (medians,
# and the median of each configuration's per-round ratio to Open MPI).
set -uo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-7}
SIZE=${SIZE:-1M}
N=${N:-100}
W=${W:-10}
[ $# -gt 0 ] || set -- "base:"
build=$(cd "${COLL_BUILD_DIR:-build}" && pwd)
out=$(pwd)/perf/results/$(date -u +%Y%m%d-%H%M%S)-ucx-probe
mkdir -p "$out" perf/build
cmake --build "$build" --target coll-perf coll-run >/dev/null || exit 1
mpicc.openmpi -O2 -o perf/build/mpi_allreduce.openmpi perf/drivers/mpi_allreduce.c -lm || exit 1
export COLL_BOOTSTRAP_SECRET=${COLL_BOOTSTRAP_SECRET:-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')}
ARGS="-b $SIZE -e $SIZE -n $N -w $W"
{
  echo "date: $(date -u)"
  echo "machine: $(hostname); $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); kernel $(uname -r)"
  echo "coll: $(git rev-parse --short HEAD); ucx: $(dpkg-query -W -f '${Version}' libucx0 2>/dev/null)"
  echo "open mpi: $(mpirun.openmpi --version 2>&1 | head -1)"
  echo "rounds: $ROUNDS; size $SIZE; coll-perf/mpi_allreduce $ARGS"
  echo "coll:  COLL_NET=ucx UCX_TLS=tcp COLL_SHM_DISABLE=1 ENV coll-run -n 2 coll-perf all_reduce $ARGS -c 1"
  echo "ompi:  mpirun.openmpi -np 2 --mca pml ucx --mca pml_ucx_devices any --mca pml_ucx_tls any -x UCX_TLS=tcp" \
    "mpi_allreduce $ARGS --max-seconds 1000"
  for cfg in "$@"; do echo "config ${cfg%%:*}: ${cfg#*:}"; done
} > "$out/env.txt"
for r in $(seq "$ROUNDS"); do
  line="$r"
  for cfg in "$@"; do
    # shellcheck disable=SC2086  # ENV is a list of words
    t=$(env COLL_NET=ucx UCX_TLS=tcp COLL_SHM_DISABLE=1 ${cfg#*:} timeout 300 "$build/bin/coll-run" -n 2 \
      "$build/bin/coll-perf" all_reduce $ARGS -c 1 2>&1 | awk '/^ +[0-9]+ +[0-9]+ +float/ {print ($9 == 0 ? $6 : "wrong"); exit}')
    line+=" ${cfg%%:*}=${t:-failed}"
  done
  t=$(timeout 300 mpirun.openmpi --allow-run-as-root -np 2 --mca pml ucx --mca pml_ucx_devices any --mca pml_ucx_tls any \
    -x UCX_TLS=tcp perf/build/mpi_allreduce.openmpi $ARGS --max-seconds 1000 2>&1 | awk '/^ *[0-9]+ / {print $6; exit}')
  line+=" ompi=${t:-failed}"
  echo "$line" | tee -a "$out/rounds.txt"
done
python3 - "$out" <<'PY'
import statistics, sys
out = sys.argv[1]
rows = []
for line in open(f"{out}/rounds.txt"):
    parts = line.split()
    rows.append({k: v for k, v in (p.split("=") for p in parts[1:])})
names = list(rows[0].keys())
def num(v):
    try: return float(v)
    except ValueError: return None
with open(f"{out}/summary.md", "w") as f:
    f.write(open(f"{out}/env.txt").read().replace("\n", "  \n") + "\n")
    f.write("| config | median (us) | median of per-round ratio to ompi | rounds |\n|---|---:|---:|---:|\n")
    for n in names:
        vals = [num(r[n]) for r in rows if num(r.get(n, ""))]
        ratios = [num(r[n]) / num(r["ompi"]) for r in rows if num(r.get(n, "")) and num(r.get("ompi", ""))]
        f.write(f"| {n} | {statistics.median(vals):.2f} | {statistics.median(ratios):.2f}x | {len(vals)} |\n" if vals else f"| {n} | failed | | 0 |\n")
print(open(f"{out}/summary.md").read())
PY
