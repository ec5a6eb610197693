#!/usr/bin/env bash
# The GPU checks, run on the device machine (one H100/H200, CUDA 13) from a bundle built here by
# scripts/gpu_bundle.sh (carried by the device tool): this script compiles nothing. Every step has
# its own timeout, writes its log under $OUT as it goes (./gpu-out elsewhere) and a line in
# $OUT/summary.txt; a step whose budget would end past the deadline (DEADLINE_S, 480 s: the whole
# run within 8 minutes) is skipped and says so. The most telling steps come first:
#
#   step                                                         timeout  what it shows
#   0  machine: nvidia-smi, driver, CUDA, NCCL                     10 s
#   1  NCCL yardstick: all-reduce 8 B..256 MiB, 2/4/8 ranks        90 s   the figures to beat, same layout
#   2  reduced matrix: float32, bfloat16, int32 x sum, max, avg;   120 s   correctness at 2 and 8 ranks as
#      counts 1, 1031, 65539, 1M+3 ([reduced])                            threads on the GPU
#   3  the same on 4 channels from 512 B                            75 s   the multi-CTA paths
#   4  compute-sanitizer memcheck, 2 ranks, small ([small])         60 s   bad addresses
#   5  compute-sanitizer racecheck, same case                       60 s   shared-memory races (descriptors)
#   6  coll all-reduce 8 B..256 MiB, 2/4/8 ranks as threads         60 s   side by side with step 1
#   -- as time allows --
#   7  coll all-gather, reduce-scatter, broadcast, 2/8 ranks        45 s
#   8  coll bfloat16 all-reduce, 2/8 ranks                          30 s
#   9  the whole GPU matrix (every type, op, 1/2/4/8 ranks)        120 s
#
# Two processes on one GPU without MPS time-slice the GPU: they measure context switches, not
# coll, so no process-based run is here. CUDA_DEVICE_MAX_CONNECTIONS=32: every rank's stream gets
# a hardware queue of its own, so no rank's kernel queues behind another's (all must run at once).
#
#   bash tests/gpu/run_on_device.sh [bundle]     (default: gpu-bundle)
set -uo pipefail
cd "$(dirname "$0")/../.."
bundle=${1:-gpu-bundle}
OUT=${OUT:-$(pwd)/gpu-out}
mkdir -p "$OUT"
DEADLINE_S=${DEADLINE_S:-480}
start=$(date +%s)
export LD_LIBRARY_PATH=$bundle/lib:${LD_LIBRARY_PATH:-}
export CUDA_DEVICE_MAX_CONNECTIONS=32
# NCCL from the machine's Python packages (nvidia-nccl-cu13), where there is one.
nccl_home=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null || true)
[ -n "$nccl_home" ] && export LD_LIBRARY_PATH=$nccl_home/lib:$LD_LIBRARY_PATH
bin=$bundle/bin
summary=$OUT/summary.txt
: > "$summary"

# step NAME TIMEOUT CMD...: runs CMD under TIMEOUT into $OUT/NAME.log unless it would pass the deadline.
step() {
  local name=$1 limit=$2
  shift 2
  local now=$(($(date +%s) - start))
  if [ $((now + limit)) -gt "$DEADLINE_S" ]; then
    echo "$name: skipped (at ${now}s, a ${limit}s budget would pass the ${DEADLINE_S}s deadline)" | tee -a "$summary"
    return
  fi
  local t0=$(date +%s)
  timeout -k 5 "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  local note=""
  [ $rc = 124 ] || [ $rc = 137 ] && note=" (timed out)"
  echo "$name: exit $rc$note in $(($(date +%s) - t0))s" | tee -a "$summary"
}

step 0-machine 10 bash -c 'nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv;
  nvidia-smi | head -4; python3 -c "import torch; print(\"torch nccl\", torch.cuda.nccl.version())" 2>&1'
step 1-nccl-allreduce 90 bash -c "for n in 2 4 8; do $bin/nccl_bench -n \$n -b 8 -e 256M -f 4 -i 20; done"
step 2-matrix-reduced 120 "$bin/coll_gpu_tests" "[reduced]" -d yes
step 3-matrix-4-channels 75 env COLL_DEVICE_NCHANNELS=4 COLL_DEVICE_CHANNEL_MIN_BYTES=512 \
  "$bin/coll_gpu_tests" "[reduced]" -d yes
step 4-memcheck 60 compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/coll_gpu_tests" "[small]"
step 5-racecheck 60 compute-sanitizer --tool racecheck --error-exitcode 9 "$bin/coll_gpu_tests" "[small]"
step 6-coll-allreduce 60 bash -c "for n in 2 4 8; do $bin/coll_single_gpu_bench -n \$n -b 8 -e 256M -f 4 -i 20; done"
step 7-coll-others 45 bash -c "for c in all_gather reduce_scatter broadcast; do for n in 2 8; do
  $bin/coll_single_gpu_bench -c \$c -n \$n -b 1K -e 256M -f 16 -i 10; done; done"
step 8-coll-bf16 30 bash -c "for n in 2 8; do $bin/coll_single_gpu_bench -t bf16 -n \$n -b 8 -e 256M -f 16 -i 10; done"
step 9-matrix-full 120 "$bin/coll_gpu_tests" "[gpu]" -d yes
echo "total: $(($(date +%s) - start))s" | tee -a "$summary"
