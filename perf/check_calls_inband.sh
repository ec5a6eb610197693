#!/usr/bin/env bash
# What the in-band call check (COLL_CHECK_CALLS's default) costs: all-reduce float32 at 2 ranks
# over shm, with COLL_CHECK_CALLS=0 and with the default, alternating in each round, at 8 B
# (-n 40000), 1 MiB (-n 500) and 256 MiB (-n 5). This VM has a slow mode that lasts whole runs, so
# the summary gives the median over rounds of each round's ratio (default / off) beside the
# medians of each setting.
#
#   REPEAT=15 bash perf/check_calls_inband.sh [BUILD_DIR]
#
# Writes perf/results/<stamp>-check-inband/: raw JSON, env.txt and summary.md.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
REPEAT=${REPEAT:-15}
out=perf/results/$(date -u +%Y%m%d-%H%M%S)-check-inband
mkdir -p "$out"
sizes=("8 40000 2000" "1M 500 50" "256M 5 1")
{
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(uname -r)"
  echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (dirty)')"
  echo "command: $build/bin/coll-perf -np 2 all_reduce -b SIZE -e SIZE -n N -w W -c 0 -J FILE"
  echo "  with COLL_CHECK_CALLS=0 (off) and unset (in band), alternating, $REPEAT rounds"
} > "$out/env.txt"
for ((i = 0; i < REPEAT; i++)); do
  for spec in "${sizes[@]}"; do
    read -r size n w <<<"$spec"
    for setting in off inband; do
      if [ $setting = off ]; then export COLL_CHECK_CALLS=0; else unset COLL_CHECK_CALLS; fi
      "$build/bin/coll-perf" -np 2 all_reduce -b "$size" -e "$size" -n "$n" -w "$w" -c 0 \
        -J "$out/$setting-$size-$i.json" > /dev/null
    done
  done
  echo "round $((i + 1))/$REPEAT" >&2
done
unset COLL_CHECK_CALLS
python3 - "$out" "$REPEAT" <<'PY' | tee "$out/summary.md"
import statistics, sys
sys.path.insert(0, "perf")
import coll_json
out, repeat = sys.argv[1], int(sys.argv[2])
print("| size | off: median us | in band: median us | median of per-round ratios | rounds |")
print("|---:|---:|---:|---:|---:|")
for size in ("8", "1M", "256M"):
    pairs = []
    for i in range(repeat):
        a = list(coll_json.rows(f"{out}/off-{size}-{i}.json").values())[0]["time"]
        b = list(coll_json.rows(f"{out}/inband-{size}-{i}.json").values())[0]["time"]
        pairs.append((a, b))
    off = statistics.median(a for a, _ in pairs)
    on = statistics.median(b for _, b in pairs)
    ratio = statistics.median(b / a for a, b in pairs)
    print(f"| {size} | {off:.3f} | {on:.3f} | {ratio:.4f} | {repeat} |")
PY
echo "results in $out"
