#!/usr/bin/env bash
# The host reduce kernels per element type (perf/drivers/host_kernels.cc, compiled with the
# library's own kernels/cpu/reduce.cc and flags) beside the membw anchor's sum2 (float32 c = a + b,
# the memory bound of a reduction), in one run: medians of ROUNDS rounds, GB/s counted as membw
# counts (read both inputs, write the output).
#
#   bash perf/host_kernels.sh        (ROUNDS, default 7; MIB per buffer, default 64)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-7}
MIB=${MIB:-64}
anchors=${COLL_ANCHORS:-../shared/anchors/cpu-baselines}
out=perf/results/$(date -u +%Y%m%d-%H%M%S)-host-kernels
mkdir -p "$out"
bin=$out/host_kernels
c++ -std=c++17 -O3 -Iinclude -Isrc perf/drivers/host_kernels.cc src/kernels/cpu/reduce.cc -o "$bin"
membw=$out/membw
gcc -O2 -o "$membw" "$anchors/membw.c"
{
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(uname -r), $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (dirty)')"
  echo "compiler: $(c++ --version | head -1)"
  echo "commands: $bin $ROUNDS $MIB; $membw -s ${MIB}M -r $ROUNDS (the anchor, $anchors/membw.c)"
} > "$out/env.txt"
"$bin" "$ROUNDS" "$MIB" > "$out/raw.txt"
"$membw" -s "${MIB}M" -r "$ROUNDS" > "$out/membw.txt"
rm -f "$bin" "$membw"
python3 - "$out/raw.txt" "$out/membw.txt" <<'PY' | tee "$out/summary.md"
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, gbs = line.split()
    rows.setdefault(name, []).append(float(gbs))
anchor = None
for line in open(sys.argv[2]):
    m = re.match(r"\s*sum2\b.*\s([0-9.]+)\s*$", line)  # bytes, best, median: the last is the median
    if m:
        anchor = float(m.group(1))
print("| type | sum, median GB/s (3 x bytes) | of membw sum2 |")
print("| --- | --- | --- |")
for name, v in rows.items():
    med = statistics.median(v)
    ratio = f"{med / anchor:.2f}x" if anchor else "?"
    print(f"| {name} | {med:.2f} | {ratio} |")
print(f"\nmembw sum2 (float32, the anchor), median: {anchor} GB/s")
PY
