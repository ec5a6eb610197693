#!/usr/bin/env bash
# What a call through the NCCL drop-in costs next to the same call through coll.h, and what
# registration costs: perf/drivers/shim_cost.c on a one-rank host communicator (the call paths
# alone), ROUNDS rounds alternating the kinds; medians per kind, in one run.
#
#   bash perf/nccl_shim_cost.sh [BUILD_DIR]     (ROUNDS, default 7; ITERS, default 100000)
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(cd "${1:-build}" && pwd)
ROUNDS=${ROUNDS:-7}
ITERS=${ITERS:-100000}
out=perf/results/$(date -u +%Y%m%d-%H%M%S)-nccl-shim
mkdir -p "$out"
bin=$out/shim_cost
cc -O2 -Iinclude perf/drivers/shim_cost.c -o "$bin" -L"$build/nccl" -L"$build/src" -l:libnccl.so.2 -lcoll \
  -Wl,-rpath,"$build/nccl:$build/src"
{
  echo "machine: $(nproc) cores, $(uname -r), $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (dirty)')"
  echo "command: $bin $ROUNDS $ITERS (built from perf/drivers/shim_cost.c against $build)"
} > "$out/env.txt"
"$bin" "$ROUNDS" "$ITERS" > "$out/raw.txt"
rm -f "$bin"
python3 - "$out/raw.txt" <<'PY' | tee "$out/summary.md"
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    kind, ns = line.split()
    rows.setdefault(kind, []).append(float(ns))
med = {k: statistics.median(v) for k, v in rows.items()}
print("| call (one-rank host communicator) | through coll.h: median ns | through libnccl.so.2: median ns | difference |")
print("| --- | --- | --- | --- |")
for name, a, b in (("8-byte all-reduce", "coll_allreduce", "nccl_allreduce"),
                   ("register + deregister 4 KiB", "coll_register_pair", "nccl_register_pair")):
    print(f"| {name} | {med[a]:.1f} | {med[b]:.1f} | {med[b] - med[a]:+.1f} ns |")
PY
