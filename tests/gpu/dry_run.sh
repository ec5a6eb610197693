#!/usr/bin/env bash
# The device script's dry run, on a machine without a GPU (CI): what tests/gpu/run_on_device.sh
# does on the device machine must hold here first, because a GPU run is one shot.
#  1. find_nccl.py finds NCCL in an nvidia-nccl-cu13 wheel's layout (a namespace package: no
#     __init__.py, so no __file__), with its version from the library or, where the library cannot
#     be loaded, from the wheel's nccl.h;
#  2. both parts go through every step in order on a normal build folder, and each step reports
#     why it cannot run here within seconds; at most 8 files come back;
#  3. a step that hangs is cut at its part's deadline, and the later steps of the part say they
#     were skipped, so a part never runs past its deadline.
#
#   bash tests/gpu/dry_run.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "dry_run: FAIL: $*" >&2
  exit 1
}

# 1. The wheel's layout: nvidia/nccl/{lib,include} without __init__.py anywhere.
cuda_nccl=/usr/local/cuda/lib64/libnccl.so.2
[ -e "$cuda_nccl" ] || { echo "dry_run: no $cuda_nccl to stand in for the wheel's library" >&2; exit 77; }
mkdir -p "$tmp/site/nvidia/nccl/lib" "$tmp/site/nvidia/nccl/include"
ln -s "$cuda_nccl" "$tmp/site/nvidia/nccl/lib/libnccl.so.2"
read -r dir version how < <(python3 tests/gpu/find_nccl.py "$tmp/site")
[ "$dir" = "$tmp/site/nvidia/nccl/lib" ] || fail "find_nccl: folder '$dir'"
[ "$how" = wheel ] || fail "find_nccl: found by '$how', not the wheel"
want=$(sed -n 's/^#define NCCL_VERSION_CODE \([0-9]*\).*/\1/p' /usr/local/cuda/include/nccl.h)
[ "$version" = "$want" ] || fail "find_nccl: version $version from the library, $want in CUDA's nccl.h"
# A library that does not load (a 2.30 wheel's, say, on a machine whose driver it needs): the header's.
rm "$tmp/site/nvidia/nccl/lib/libnccl.so.2"
echo "not a library" > "$tmp/site/nvidia/nccl/lib/libnccl.so.2"
echo "#define NCCL_VERSION_CODE 23007" > "$tmp/site/nvidia/nccl/include/nccl.h"
read -r dir version how < <(python3 tests/gpu/find_nccl.py "$tmp/site" 2>/dev/null)
[ "$version" = 23007 ] || fail "find_nccl: version '$version' from the wheel's nccl.h, 23007 wanted"
echo "dry_run: find_nccl reads the wheel's layout ($want from the library, 23007 from the header)"

# 2. Every step, both parts, on the normal build: each one quick, each one reported.
out=$tmp/out
t0=$(date +%s)
OUT=$out bash tests/gpu/run_on_device.sh --part all "$build" > "$tmp/log" 2>&1 || fail "the script exited $?"
took=$(($(date +%s) - t0))
for s in 0-machine 1-coll-allreduce-f32 2-nccl-allreduce 3-coll-allreduce-bf16 4-coll-graph 5-tests-reduced \
  6-coll-channels 7-coll-others 8-tests-full 9-tests-4-channels 10-nccl-tests 11-memcheck 12-racecheck \
  13-tests-windows 14-coll-windows; do
  line=$(grep "^$s: " "$out/summary.txt") || fail "step $s is not in the summary"
  case "$line" in
    *"exit 0 in"* | *"exit 77 "* | *"exit "*"(failed: see part"* | *"skipped ("*) ;;
    *) fail "step $s reported '$line'" ;;
  esac
  secs=$(echo "$line" | sed -n 's/.* in \([0-9]*\)s$/\1/p')
  [ -z "$secs" ] || [ "$secs" -le 15 ] || fail "step $s took ${secs}s to report that it cannot run"
done
# The order: part 1's steps, then part 2's.
order=$(grep -o '^[0-9]\+-' "$out/summary.txt" | tr -d '-' | tr '\n' ' ')
[ "$order" = "0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 " ] || fail "steps ran in the order $order"
files=$(find "$out" -type f | wc -l)
[ "$files" -le 8 ] || fail "$files files under \$OUT; the device tool sends back 8"
echo "dry_run: both parts, 15 steps, in ${took}s; $files files"

# 3. A hanging step is cut at its part's deadline; the rest of the part is skipped.
mkdir -p "$tmp/hang/bin"
printf '#!/bin/sh\nsleep 600\n' > "$tmp/hang/bin/coll_single_gpu_bench"
chmod +x "$tmp/hang/bin/coll_single_gpu_bench"
t0=$(date +%s)
OUT=$tmp/out2 PART1_DEADLINE=25 bash tests/gpu/run_on_device.sh --part 1 "$tmp/hang" > "$tmp/log2" 2>&1
took=$(($(date +%s) - t0))
grep -q "^1-coll-allreduce-f32: exit 124 (timed out)" "$tmp/out2/summary.txt" || fail "the hanging step: $(cat "$tmp/out2/summary.txt")"
grep -q "^5-tests-reduced: skipped (" "$tmp/out2/summary.txt" || fail "the last step after the deadline was not skipped"
[ "$took" -le 35 ] || fail "part 1 with a 25 s deadline took ${took}s"
echo "dry_run: a hanging step is cut at the deadline (part 1 in ${took}s of 25 s)"
