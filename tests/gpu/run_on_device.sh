#!/usr/bin/env bash
# The GPU checks, run on the device machine (one H100/H200, CUDA 13) from a bundle built here by
# scripts/gpu_bundle.sh (carried by the device tool): this script compiles nothing.
#
#   bash tests/gpu/run_on_device.sh [--part 1|2|all] [--only REGEX] [bundle]   (default: all, gpu-bundle)
#   (--part "1 2" with --only: a rerun of chosen steps of both parts)
#
# A GPU machine is lent by chance, 15 minutes a session, starts included, so each run must yield
# data whatever happens in it:
#  - the benchmark runs first, the tests next, the sanitizers last (they serialise launches, and
#    ranks whose kernels wait for each other then hang);
#  - every step has a budget, cut to what is left of its part's deadline (part 1: 240 s, part 2:
#    330 s); a step with under 20 s left is skipped and says so;
#  - COLL_TIMEOUT_MS and COLL_BOOTSTRAP_TIMEOUT_MS are 15 s, under every budget, so a hang ends in
#    coll's own error naming the peer and the step, not in `timeout`'s kill;
#  - CUDA_MODULE_LOADING=EAGER: every kernel is loaded at start (a module loaded lazily while other
#    ranks' kernels spin can deadlock);
#  - the tests name each case before it runs (GPU_TEST_TRACE=1), unbuffered;
#  - logs go under $OUT as they are written, one file a part plus summary.txt (the device tool
#    sends back at most 8 files).
# Part 1 (about 4 minutes): machine facts, coll's all-reduce (float32, bfloat16; 2, 4, 8 ranks;
# 8 B to 256 MiB, -f 2), NCCL's in the same layout (the image's NCCL, found by find_nccl.py;
# several ranks on one GPU need NCCL 2.30, an older one is compared at one rank), a captured graph
# of 100 small all-reduces, then the reduced test matrix. Part 2 (about 6 minutes): 8 and 16
# channels, the other collectives, 4 channels, the whole matrix, nccl-tests where bundled, the
# sanitizers, then collectives on device windows (tests, then coll-perf -R 2 against -R 0). --only runs just the steps whose names match (a rerun of what failed).
#
# Two processes on one GPU without MPS time-slice it, so every multi-rank run here is ranks as
# threads of one process. CUDA_DEVICE_MAX_CONNECTIONS=32: each rank's stream gets a hardware queue.
#
# With a bundle that is a normal build folder (build/), on a machine without a GPU, the script goes
# through every step and each reports why it cannot run (tests/gpu/dry_run.sh, in CI).
set -uo pipefail
cd "$(dirname "$0")/../.."
part=all
only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --part) part=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    *) break ;;
  esac
done
bundle=${1:-gpu-bundle}
OUT=${OUT:-$(pwd)/gpu-out}
mkdir -p "$OUT"
export COLL_TIMEOUT_MS=${COLL_TIMEOUT_MS:-15000} COLL_BOOTSTRAP_TIMEOUT_MS=${COLL_BOOTSTRAP_TIMEOUT_MS:-15000}
export CUDA_MODULE_LOADING=EAGER CUDA_DEVICE_MAX_CONNECTIONS=32 PYTHONUNBUFFERED=1 GPU_TEST_TRACE=1
[ -d "$bundle/lib" ] && export LD_LIBRARY_PATH=$(cd "$bundle/lib" && pwd):${LD_LIBRARY_PATH:-}
summary=$OUT/summary.txt

# pick NAME: the binary's path in the bundle (bin/) or a build folder (bin/, tests/), or "".
pick() {
  local d
  for d in "$bundle/bin" "$bundle/tests" "$bundle/nccl-tests"; do
    [ -x "$d/$1" ] && { echo "$d/$1"; return; }
  done
}
tests=$(pick coll_gpu_tests)
bench=$(pick coll_single_gpu_bench)
perf=$(pick coll-perf)
nccl_bench=$(pick nccl_bench)
nccl_tests=$(pick all_reduce_perf)

# The image's NCCL (nvidia-nccl-cu13's namespace package, else the loader's cache): its folder goes
# on LD_LIBRARY_PATH for nccl_bench and nccl-tests only, never for coll.
read -r nccl_dir nccl_version nccl_how < <(python3 tests/gpu/find_nccl.py 2>"$OUT/.find_nccl.err" || true)
nccl_version=${nccl_version:-0}

log=""
part_start=0
deadline=0
# step NAME BUDGET NEEDS CMD...: runs CMD into the part's log, under min(BUDGET, what is left of
# the deadline). NEEDS is "label=path" (skipped when path is empty) or "-". Skipped with a reason
# when under 20 s are left or when --only leaves it out. CMD may be a function of this script.
step() {
  local name=$1 limit=$2 needs=$3
  shift 3
  [ -n "$only" ] && ! [[ $name =~ $only ]] && return
  local now=$(($(date +%s) - part_start))
  local left=$((deadline - now))
  if [ "$left" -lt 20 ]; then
    echo "$name: skipped (at ${now}s, ${left}s left before the ${deadline}s deadline)" | tee -a "$summary"
    return
  fi
  if [ "$needs" != - ] && [ -z "${needs#*=}" ]; then
    echo "$name: skipped (${needs%%=*} is not in $bundle)" | tee -a "$summary"
    return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "=== $name (budget ${limit}s, at ${now}s): $*" >> "$log"
  local t0=$(date +%s)
  timeout -k 5 "$limit" bash -c '"$@"' step "$@" >> "$log" 2>&1
  local rc=$?
  local note=""
  case $rc in
    0) ;;
    77) note=" (skipped by the program: no usable GPU)" ;;
    124 | 137) note=" (timed out)" ;;
    *) note=" (failed: see $(basename "$log"))" ;;
  esac
  echo "$name: exit $rc$note in $(($(date +%s) - t0))s" | tee -a "$summary"
}

# coll's single-GPU bench over rank counts: bench_ranks TYPE "N..." ARGS...
bench_ranks() {
  local t=$1 ns=$2
  shift 2
  local n rc=0
  for n in $ns; do "$bench" -t "$t" -n "$n" "$@" || rc=$?; done
  return $rc
}
# NCCL's yardstick over rank counts, with the image's NCCL (one rank where it is older than 2.30).
nccl_ranks() {
  local ns=$1 n rc=0
  shift
  [ "$nccl_version" -lt 23000 ] && { echo "NCCL $nccl_version < 2.30: several ranks on one GPU refused, one rank only"; ns=1; }
  for n in $ns; do LD_LIBRARY_PATH=$nccl_dir:$LD_LIBRARY_PATH NCCL_MULTI_RANK_GPU_ENABLE=1 "$nccl_bench" -n "$n" "$@" || rc=$?; done
  return $rc
}
# nccl-tests' all_reduce_perf with the image's NCCL, then with coll's libnccl.so.2 (the drop-in).
nccl_tests_both() {
  local rc=0
  echo "--- with the image's NCCL ($nccl_dir, $nccl_version)"
  LD_LIBRARY_PATH=$nccl_dir:$LD_LIBRARY_PATH "$nccl_tests" -b 8 -e 256M -f 2 -c 1 || rc=$?
  echo "--- with coll's libnccl.so.2 ($bundle/nccl-coll)"
  LD_LIBRARY_PATH=$(cd "$bundle/nccl-coll" 2>/dev/null && pwd):$LD_LIBRARY_PATH "$nccl_tests" -b 8 -e 256M -f 2 -c 1 || rc=$?
  return $rc
}
# A captured graph of 100 small all-reduces (coll-perf -G: the timed iterations captured once,
# the graph launched 10 times), at 2 and 8 ranks.
perf_graph() {
  local n rc=0
  for n in 2 8; do "$perf" all_reduce -t "$n" --mem device -b 8 -e 8K -f 32 -n 100 -G 10 -w 2 -c 1 || rc=$?; done
  return $rc
}
# 2 ranks on 8 and 16 channels, 1 MiB up.
bench_channels() {
  local c rc=0
  for c in 8 16; do COLL_DEVICE_NCHANNELS=$c "$bench" -n 2 -b 1M -e 256M -f 4 -i 20 || rc=$?; done
  return $rc
}
bench_others() {
  local c n rc=0
  for c in all_gather reduce_scatter broadcast; do
    for n in 2 8; do "$bench" -c "$c" -n "$n" -b 1K -e 256M -f 4 -i 10 || rc=$?; done
  done
  return $rc
}
# Collectives on symmetric windows of device memory (the window kernels) against the same calls on
# plain buffers, interleaved: coll-perf -R 2 (the buffers registered as windows) and -R 0, 2 and 8
# ranks, 8 B to 256 MiB.
perf_windows() {
  local n r rc=0
  for n in 2 8; do
    for r in 2 0; do "$perf" all_reduce -t "$n" --mem device -R "$r" -b 8 -e 256M -f 4 -n 20 -w 3 -c 1 || rc=$?; done
  done
  return $rc
}
machine() {
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
  nvidia-smi | head -4
  nvcc --version 2>/dev/null | tail -2
  echo "NCCL for the yardstick: ${nccl_dir:-none} version ${nccl_version} (${nccl_how:-$(cat "$OUT/.find_nccl.err")})"
  python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())' 2>&1 | tail -1
  echo "bundle: tests=${tests:-none} bench=${bench:-none} coll-perf=${perf:-none} nccl_bench=${nccl_bench:-none} nccl-tests=${nccl_tests:-none}"
}

# begin PART DEADLINE: the part's log and clock.
begin() {
  log=$OUT/part$1.log
  : > "$log"
  part_start=$(date +%s)
  deadline=$2
  echo "--- part $1 (deadline ${deadline}s)" | tee -a "$summary"
}

part1() {
  begin 1 "${PART1_DEADLINE:-240}"
  step 0-machine 15 - machine
  step 1-coll-allreduce-f32 60 "coll_single_gpu_bench=$bench" bench_ranks float "2 4 8" -b 8 -e 256M -f 2 -i 20
  step 2-nccl-allreduce 40 "nccl_bench=$nccl_bench" nccl_ranks "2 4 8" -b 8 -e 256M -f 2 -i 20
  step 3-coll-allreduce-bf16 40 "coll_single_gpu_bench=$bench" bench_ranks bf16 "2 4 8" -b 8 -e 256M -f 2 -i 20
  step 4-coll-graph 30 "coll-perf=$perf" perf_graph
  step 5-tests-reduced 100 "coll_gpu_tests=$tests" "$tests" "[reduced]" -d yes
}

part2() {
  begin 2 "${PART2_DEADLINE:-330}"
  step 6-coll-channels 40 "coll_single_gpu_bench=$bench" bench_channels
  step 7-coll-others 60 "coll_single_gpu_bench=$bench" bench_others
  step 8-tests-full 100 "coll_gpu_tests=$tests" "$tests" "[gpu]" -d yes
  step 9-tests-4-channels 60 "coll_gpu_tests=$tests" env COLL_DEVICE_NCHANNELS=4 COLL_DEVICE_CHANNEL_MIN_BYTES=512 \
    "$tests" "[reduced]" -d yes
  step 10-nccl-tests 30 "all_reduce_perf=$nccl_tests" nccl_tests_both
  local san
  san=$(command -v compute-sanitizer || true)
  step 11-memcheck 40 "compute-sanitizer=$san" "$san" --tool memcheck --error-exitcode 9 "$tests" "[small]"
  step 12-racecheck 40 "compute-sanitizer=$san" "$san" --tool racecheck --error-exitcode 9 "$tests" "[small]"
  step 13-tests-windows 60 "coll_gpu_tests=$tests" "$tests" "[windows]" -d yes
  step 14-coll-windows 60 "coll-perf=$perf" perf_windows
}

: > "$summary"
# The steps' commands run in `bash -c` under timeout: they see these functions and variables.
export -f bench_ranks nccl_ranks nccl_tests_both machine perf_graph perf_windows bench_channels bench_others
export bundle bench perf tests nccl_bench nccl_tests nccl_dir nccl_version nccl_how OUT
start=$(date +%s)
[ "$part" = all ] && part="1 2"
for p in $part; do
  case "$p" in
    1) part1 ;;
    2) part2 ;;
    *) echo "run_on_device.sh: --part 1, 2, \"1 2\" or all" >&2; exit 2 ;;
  esac
done
rm -f "$OUT/.find_nccl.err"
echo "total: $(($(date +%s) - start))s" | tee -a "$summary"
