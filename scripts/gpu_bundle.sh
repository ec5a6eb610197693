#!/usr/bin/env bash
# Builds, on this machine (nvcc compiles here, nothing runs), what the GPU machine runs, so that
# the device tool's calls only run and never compile (its time is 15 minutes a session, starts
# included):
#   build-gpu/   a Release build for sm_90 only (COLL_CUDA_ARCHITECTURES=90), tests included;
#   gpu-bundle/  what the device run needs, stripped, under 64 MiB (the tool's carry limit):
#                bin/ coll_gpu_tests, coll_single_gpu_bench, nccl_bench (../shared/anchors/gpu's
#                NCCL yardstick, built against CUDA's NCCL here; the device machine's own libnccl
#                is used when it has one), coll-perf, coll-run; lib/ libcoll and the shared
#                libraries it needs that the device image lacks (fmt, hwloc and theirs); nccl-coll/
#                coll's libnccl.so.2 (the drop-in), in a folder of its own so that it never
#                shadows the image's NCCL; nccl-tests/ all_reduce_perf, where NCCL_TESTS_SRC names a
#                checkout of NVIDIA/nccl-tests (fetched into a git-ignored folder, never committed),
#                built against CUDA's nccl.h.
# UCX is left out: libucm's memory hooks have no place in the GPU tests.
# Then: the device tool's run with carry ["gpu-bundle"] and `bash tests/gpu/run_on_device.sh gpu-bundle`.
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/coll-ccache} CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOLL_ENABLE_CUDA=ON -DCOLL_CUDA_ARCHITECTURES=90 \
  -DCOLL_ENABLE_IB=OFF -DCOLL_ENABLE_UCX=OFF -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
  -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache >/dev/null
cmake --build build-gpu --target coll coll_nccl coll_gpu_tests coll_single_gpu_bench coll-perf coll-run
bash scripts/check_sass.sh build-gpu

rm -rf gpu-bundle
mkdir -p gpu-bundle/bin gpu-bundle/lib gpu-bundle/nccl-coll
for t in tests/coll_gpu_tests tests/coll_single_gpu_bench bin/coll-perf bin/coll-run; do
  f=$(find build-gpu -path "*$t" -type f | head -1)
  [ -n "$f" ] || { echo "gpu_bundle: $t not built" >&2; exit 1; }
  cp "$f" gpu-bundle/bin/
done
cp -L build-gpu/src/libcoll.so.0 gpu-bundle/lib/  # the SONAME the binaries load (a file: links may not travel)
# The non-system libraries libcoll and the tests load (the device image has glibc and libstdc++).
for so in $(ldd gpu-bundle/bin/coll_gpu_tests build-gpu/src/libcoll.so | awk '/=> \//{print $3}' | sort -u); do
  case "$(basename "$so")" in
    libc.so* | libm.so* | libgcc_s* | libstdc++* | ld-linux* | libpthread* | librt* | libdl* | libcoll.so*) ;;
    *) cp -L "$so" gpu-bundle/lib/ ;;
  esac
done
cp -L build-gpu/nccl/libnccl.so.2 gpu-bundle/nccl-coll/
if [ -n "${NCCL_TESTS_SRC:-}" ]; then
  rm -rf build-gpu/nccl-tests && cp -r "$NCCL_TESTS_SRC" build-gpu/nccl-tests
  make -C build-gpu/nccl-tests/src -j2 CUDA_HOME=/usr/local/cuda NCCL_HOME=/usr/local/cuda MPI=0 \
    NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" BUILDDIR=../build ../build/all_reduce_perf >/dev/null
  mkdir -p gpu-bundle/nccl-tests
  cp build-gpu/nccl-tests/build/all_reduce_perf gpu-bundle/nccl-tests/
fi
strip --strip-unneeded gpu-bundle/bin/* gpu-bundle/lib/*.so* gpu-bundle/nccl-coll/* 2>/dev/null || true
nvcc -O2 -std=c++17 -arch=sm_90 ../shared/anchors/gpu/nccl_single_gpu_bench.cu -I/usr/local/cuda/include \
  -L/usr/local/cuda/lib64 -l:libnccl.so.2 -o gpu-bundle/bin/nccl_bench
du -sh gpu-bundle
