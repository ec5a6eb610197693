#!/usr/bin/env bash
# Builds coll with CUDA and runs the GPU checks on the device machine (one H100/H200, CUDA 13),
# writing logs under $OUT (the device tool's output folder; ./gpu-out elsewhere):
#   1. the GPU tests (tests/gpu: device kernels against the host kernels, device-memory checks,
#      every collective on device buffers with 1, 2, 4 and 8 ranks as threads on the GPU), then
#      the collectives again with every operation over 1 KiB split across 4 channels (CTAs);
#   2. compute-sanitizer memcheck and racecheck on the copy kernel and a small 2-rank collective case;
#   3. coll-perf --mem device for every collective, 2 ranks as processes on the GPU (host-staged
#      shm until CUDA IPC exists), checked (-c 1), tables and JSON under $OUT;
#   3b. the PyTorch backend with CUDA tensors (python/tests/test_cuda.py), where torch has CUDA;
#   4. the anchors in one run: device-to-device copy bandwidth (the HBM bound) and NCCL with
#      several ranks on the one GPU (../shared/anchors/gpu, copied into tests/gpu/anchor by the
#      caller when it is not in the tree).
# The device image has CMake, ninja and nvcc but not fmt, hwloc, Catch2 or nlohmann-json: run
# scripts/fetch_device_deps.sh here first (Debian packages into .devdeps/, git-ignored) and carry
# .devdeps; they are unpacked under /tmp/devdeps, not over /.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$(pwd)/gpu-out}
mkdir -p "$OUT"
prefix=/tmp/devdeps
if [ -d .devdeps ]; then
  mkdir -p $prefix
  for f in .devdeps/*.deb; do dpkg -x "$f" $prefix; done
  export CMAKE_PREFIX_PATH=$prefix/usr PKG_CONFIG_PATH=$prefix/usr/lib/x86_64-linux-gnu/pkgconfig:$prefix/usr/share/pkgconfig
  export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  export CPATH=$prefix/usr/include
fi
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  nvcc --version | tail -2
} > "$OUT/machine.txt" 2>&1
cmake -S . -B build-gpu -G Ninja -DCOLL_ENABLE_CUDA=ON -DCOLL_CUDA_ARCHITECTURES=90 -DCOLL_ENABLE_IB=OFF \
  > "$OUT/build.log" 2>&1 && cmake --build build-gpu >> "$OUT/build.log" 2>&1 || {
  tail -40 "$OUT/build.log"
  exit 1
}
build-gpu/tests/coll_gpu_tests -d yes > "$OUT/gpu-tests.log" 2>&1
echo "gpu tests: exit $?" | tee -a "$OUT/summary.txt"
# Every operation of more than 1 KiB split across 4 CTAs (the default splits only from 512 KiB).
COLL_DEVICE_NCHANNELS=4 COLL_DEVICE_CHANNEL_MIN_BYTES=512 build-gpu/tests/coll_gpu_tests -d yes \
  > "$OUT/gpu-tests-channels.log" 2>&1
echo "gpu tests, 4 channels from 512 B: exit $?" | tee -a "$OUT/summary.txt"
for tool in memcheck racecheck; do
  compute-sanitizer --tool $tool --error-exitcode 9 build-gpu/tests/coll_gpu_tests "device copy*,[small]" \
    > "$OUT/sanitizer-$tool.log" 2>&1
  echo "compute-sanitizer $tool: exit $?" | tee -a "$OUT/summary.txt"
done
for c in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
  timeout 120 build-gpu/bin/coll-run -n 2 build-gpu/bin/coll-perf $c --mem device -b 8 -e 64M -f 8 -w 2 -n 10 \
    --max-seconds 0.5 -J "$OUT/coll-perf-$c.json" > "$OUT/coll-perf-$c.txt" 2>&1
  echo "coll-perf --mem device $c: exit $?" | tee -a "$OUT/summary.txt"
done
# A captured graph of 100 small all-reduces, launched 10 times (the issue's < 5 us per operation).
timeout 120 build-gpu/bin/coll-run -n 2 build-gpu/bin/coll-perf all_reduce --mem device -b 8 -e 64K -f 8 -n 100 \
  -w 5 -G 10 > "$OUT/coll-perf-graph.txt" 2>&1
echo "coll-perf --mem device -G 10: exit $?" | tee -a "$OUT/summary.txt"
# The PyTorch backend with CUDA tensors (python/tests/test_cuda.py), where the machine's Python
# has torch with CUDA: the extension built in place against build-gpu's libcoll.
if python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  (cd python && COLL_BUILD_DIR=../build-gpu MAX_JOBS=16 python3 setup.py build_ext --inplace) \
    > "$OUT/torch-build.log" 2>&1 &&
    (cd python/tests && PYTHONPATH=.. timeout 300 python3 test_cuda.py) > "$OUT/torch-cuda.log" 2>&1
  echo "torch CUDA tensors (python/tests/test_cuda.py): exit $?" | tee -a "$OUT/summary.txt"
else
  echo "torch CUDA tensors: this machine's python3 has no torch with CUDA; not run" | tee -a "$OUT/summary.txt"
fi
if [ -f tests/gpu/anchor/nccl_single_gpu_bench.cu ]; then
  NCCL_HOME=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))')
  python3 -c 'import torch; print("nccl", torch.cuda.nccl.version())' >> "$OUT/summary.txt" 2>&1
  nvcc -O2 -std=c++17 -arch=sm_90 tests/gpu/anchor/nccl_single_gpu_bench.cu -I"$NCCL_HOME/include" \
    -L"$NCCL_HOME/lib" -l:libnccl.so.2 -Xlinker -rpath="$NCCL_HOME/lib" -o /tmp/nccl_bench &&
    for n in 2 4 8; do /tmp/nccl_bench -n $n -b 8 -e 256M -f 4 -i 20; done > "$OUT/nccl.txt" 2>&1
fi
cat "$OUT/summary.txt"
