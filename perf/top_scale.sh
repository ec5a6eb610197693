#!/usr/bin/env bash
# How long a coll-top view takes and how many bytes it moves, by job shape (issue 47 item 3), and
# the model that carries it to 4096 ranks (perf/top_model.py). Every shape is an idle job on this
# machine: HOSTS simulated hosts (COLL_HOSTID, one coll-run each, as on a cluster) of PER_HOST
# ranks; coll-top --json asks it REPEAT times; its "seconds" and "bytes_received" are recorded.
#
#   REPEAT=7 SHAPES="1x16 4x4 1x64 4x16 16x4 2x64 8x16 32x4" bash perf/top_scale.sh
#
# Writes perf/results/<stamp>-top/: raw.txt (one line per view), env.txt, summary.md (medians and
# the model's fit and its figures at 4096 ranks).
set -euo pipefail
cd "$(dirname "$0")/.."
REPEAT=${REPEAT:-7}
SHAPES=${SHAPES:-1x16 4x4 1x64 4x16 16x4 2x64 8x16 32x4}
build=${COLL_BUILD_DIR:-build}
out=perf/results/$(date -u +%Y%m%d-%H%M%S)-top
mkdir -p "$out"
export COLL_BOOTSTRAP_SECRET=5eed
{
  echo "date: $(date -u)"
  echo "host: $(hostname); $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  echo "kernel $(uname -r); coll HEAD: $(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes')"
  echo "job:  COLL_HOSTID=top-j $build/bin/coll-run -n PER_HOST --nnodes HOSTS --node-rank j --master 127.0.0.1:PORT"
  echo "      $build/tests/coll_test_worker idle 600   (one coll-run per simulated host)"
  echo "view: COLL_BOOTSTRAP_SECRET=... $build/bin/coll-top --master 127.0.0.1:PORT --json"
} >"$out/env.txt"
for shape in $SHAPES; do
  hosts=${shape%x*} per=${shape#*x} n=$((${shape%x*} * ${shape#*x}))
  port=$((20000 + RANDOM % 12000))
  pids=()
  for ((j = 0; j < hosts; j++)); do
    COLL_HOSTID=top-$j COLL_DEBUG=ERROR "$build/bin/coll-run" -n "$per" --nnodes "$hosts" --node-rank "$j" \
      --master "127.0.0.1:$port" --timeout 900 "$build/tests/coll_test_worker" idle 600 >/dev/null 2>&1 &
    pids+=($!)
  done
  # Formed once every rank answers.
  for _ in $(seq 300); do
    sleep 0.5
    "$build/bin/coll-top" --master "127.0.0.1:$port" --json >/dev/null 2>&1 && break
  done
  for r in $(seq "$REPEAT"); do
    json=$("$build/bin/coll-top" --master "127.0.0.1:$port" --json) || true
    echo "$json" | python3 -c "
import json, sys
v = json.load(sys.stdin)
answered = sum(1 for x in v['views'] if x['answered'])
print('$shape', v['ranks'], v['hosts'], '$per', '%.6f' % v['seconds'], v['bytes_received'], answered)
" >>"$out/raw.txt"
    sleep 0.2
  done
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  echo "shape $shape done" >&2
done
python3 perf/top_model.py "$out/raw.txt" >"$out/summary.md"
cat "$out/summary.md"
