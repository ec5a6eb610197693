#!/usr/bin/env bash
# Installs the build into a temporary prefix and builds two consumers against it: one with
# find_package(coll) (CMake package, coll::coll) and one with pkg-config; both are C99 programs
# compiled with -std=c99 -pedantic -Werror, which also proves coll.h needs no C++ or CUDA header.
# Then checks that libcoll exports only coll* symbols and needs no CUDA or verbs library to load.
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null

cmake -S "$src/consumer" -B "$tmp/cmake-build" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/cmake-build" >/dev/null
"$tmp/cmake-build/consumer"

export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig:$tmp/prefix/lib/x86_64-linux-gnu/pkgconfig"
cc -std=c99 -pedantic -Wall -Wextra -Werror "$src/consumer/consumer.c" $(pkg-config --cflags --libs coll) \
  -Wl,-rpath,"$(pkg-config --variable=libdir coll)" -o "$tmp/consumer-pc"
"$tmp/consumer-pc"

# The installed tools start from the prefix with no LD_LIBRARY_PATH (their run path reaches
# ../lib), and a moved prefix still works ($ORIGIN, not an absolute path).
mv "$tmp/prefix" "$tmp/moved"
for tool in coll-info coll-perf coll-run coll-sim coll-top coll-topo coll-train; do
  env -u LD_LIBRARY_PATH "$tmp/moved/bin/$tool" --help >/dev/null 2>&1 ||
    { env -u LD_LIBRARY_PATH "$tmp/moved/bin/$tool" --help 2>&1 | head -3; echo "FAIL: installed $tool does not start"; exit 1; }
done
env -u LD_LIBRARY_PATH COLL_TIMEOUT_MS=20000 "$tmp/moved/bin/coll-perf" -np 2 -b 8 -e 1K -f 32 -n 2 -w 1 >"$tmp/perf.txt" 2>&1 ||
  { cat "$tmp/perf.txt"; echo "FAIL: installed coll-perf -np 2 failed"; exit 1; }
mv "$tmp/moved" "$tmp/prefix"

lib=$(find "$tmp/prefix" -name "libcoll.so.*" -type f | head -1)
bad=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^coll' || true)
if [ -n "$bad" ]; then
  echo "FAIL: libcoll exports non-coll symbols:"; echo "$bad" | head; exit 1
fi
# A machine without a GPU driver or rdma-core must be able to load libcoll: those are dlopen'ed.
needed=$(readelf -d "$lib" | grep NEEDED || true)
if grep -qE 'libcuda|libnvidia-ml|libibverbs|libcudart' <<<"$needed"; then
  echo "FAIL: libcoll links a GPU/IB library at load time:"; echo "$needed"; exit 1
fi
echo "PASS: installed tools start from a moved prefix; the package builds C99 consumers via CMake and pkg-config; only coll* symbols exported"
