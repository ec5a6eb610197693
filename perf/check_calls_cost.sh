#!/usr/bin/env bash
# What COLL_CHECK_CALLS=1 costs: all-reduce latency with and without the per-call fingerprint
# all-gather, 2 ranks over shm, sizes 8 B .. 64 KiB, the two settings alternating REPEAT times;
# medians of coll-perf's per-size time (-J) per setting, and their ratio, in one run.
#
#   bash perf/check_calls_cost.sh [BUILD_DIR]     (REPEAT, default 5; NP, default 2)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
REPEAT=${REPEAT:-5}
NP=${NP:-2}
out=perf/results/$(date -u +%Y%m%d-%H%M%S)-check-calls
mkdir -p "$out"
args=(all_reduce -b 8 -e 64K -f 8 -n 2000 -w 200 -c 0)
{
  echo "machine: $(nproc) cores, $(uname -r), $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (dirty)')"
  echo "command: $build/bin/coll-run -n $NP $build/bin/coll-perf ${args[*]} -J FILE, with COLL_CHECK_CALLS=0 and =1 alternating, $REPEAT times"
} > "$out/env.txt"
for ((i = 0; i < REPEAT; i++)); do
  for check in 0 1; do
    COLL_CHECK_CALLS=$check "$build/bin/coll-run" -n "$NP" "$build/bin/coll-perf" "${args[@]}" \
      -J "$out/check$check.$i.json" > "$out/check$check.$i.txt"
  done
done
python3 - "$out" "$REPEAT" <<'PY' | tee "$out/summary.md"
import json, statistics, sys
sys.path.insert(0, "perf")
out, repeat = sys.argv[1], int(sys.argv[2])
import coll_json
times = {0: {}, 1: {}}
for check in (0, 1):
    for i in range(repeat):
        for size, row in coll_json.rows(f"{out}/check{check}.{i}.json").items():
            times[check].setdefault(size, []).append(row["time"])
print("| size (B) | off: median us | COLL_CHECK_CALLS=1: median us | ratio |")
print("| --- | --- | --- | --- |")
for size in sorted(times[0]):
    a, b = statistics.median(times[0][size]), statistics.median(times[1][size])
    print(f"| {size} | {a:.2f} | {b:.2f} | {b / a:.2f}x |")
PY
echo "results in $out"
