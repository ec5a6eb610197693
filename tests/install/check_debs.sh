#!/usr/bin/env bash
# The Debian packages, as a user installs them: `cpack -G DEB` in BUILD_DIR (configured with
# -DCMAKE_INSTALL_PREFIX=/usr) writes libcoll0, libcoll-dev and coll-tools; apt installs them (and
# what they depend on, from the archive); then a C99 program is built against the installed files
# with find_package(coll) and with pkg-config, with no prefix or search path given, and the tools
# run from /usr/bin: coll-info, and coll-perf standalone (-t 2, ranks as threads) and with -np 2
# (processes through coll-run). The packages are removed again on exit, also on failure.
#
#   tests/install/check_debs.sh BUILD_DIR        (root: it installs into /usr)
set -euo pipefail
build=$(cd "${1:?usage: check_debs.sh BUILD_DIR}" && pwd)
src=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
packages=(coll-tools libcoll-dev libcoll0)
cleanup() {
  DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq "${packages[@]}" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
[ "$(id -u)" = 0 ] || { echo "SKIPPED: installing packages needs root"; exit 77; }
grep -q 'CMAKE_INSTALL_PREFIX:PATH=/usr$' "$build/CMakeCache.txt" ||
  { echo "FAIL: $build is not configured with -DCMAKE_INSTALL_PREFIX=/usr"; exit 1; }

(cd "$build" && cpack -G DEB -B "$tmp/debs" >"$tmp/cpack.log" 2>&1) || { tail -20 "$tmp/cpack.log"; exit 1; }
debs=("$tmp"/debs/libcoll0_*.deb "$tmp"/debs/libcoll-dev_*.deb "$tmp"/debs/coll-tools_*.deb)
for d in "${debs[@]}"; do
  [ -f "$d" ] || { echo "FAIL: cpack wrote no $d"; ls "$tmp/debs"; exit 1; }
  echo "$(basename "$d"): $(dpkg-deb -f "$d" Depends)"
done
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${debs[@]}" >"$tmp/apt.log" 2>&1 ||
  { tail -20 "$tmp/apt.log"; echo "FAIL: apt could not install the packages"; exit 1; }
dpkg -L libcoll0 | grep -q '/libcoll.so.0$' || { echo "FAIL: libcoll0 has no libcoll.so.0"; exit 1; }
dpkg -L libcoll0 | grep -q '/coll-nccl/libnccl.so.2$' || { echo "FAIL: libcoll0 has no libnccl.so.2"; exit 1; }

# A consumer of the installed development files: CMake package, then pkg-config.
cmake -S "$src/consumer" -B "$tmp/cmake-build" >/dev/null
cmake --build "$tmp/cmake-build" >/dev/null
"$tmp/cmake-build/consumer"
cc -std=c99 -pedantic -Wall -Wextra -Werror "$src/consumer/consumer.c" $(pkg-config --cflags --libs coll) \
  -o "$tmp/consumer-pc"
"$tmp/consumer-pc"

# The tools from /usr/bin, with the library from the system's path (no rpath or LD_LIBRARY_PATH).
env -u LD_LIBRARY_PATH /usr/bin/coll-info >"$tmp/info.txt" 2>&1 || { cat "$tmp/info.txt"; exit 1; }
env -u LD_LIBRARY_PATH /usr/bin/coll-perf -t 2 -b 8 -e 64K -f 8 -n 2 -w 1 >"$tmp/perf.txt" 2>&1 &&
  grep -q "# Out of bounds values : 0 OK" "$tmp/perf.txt" && grep -q "2 ranks as threads" "$tmp/perf.txt" ||
  { cat "$tmp/perf.txt"; echo "FAIL: /usr/bin/coll-perf -t 2"; exit 1; }
env -u LD_LIBRARY_PATH COLL_TIMEOUT_MS=20000 /usr/bin/coll-perf -np 2 -b 8 -e 1K -f 32 -n 2 -w 1 >"$tmp/perf2.txt" 2>&1 &&
  grep -q "# Out of bounds values : 0 OK" "$tmp/perf2.txt" ||
  { cat "$tmp/perf2.txt"; echo "FAIL: /usr/bin/coll-perf -np 2"; exit 1; }
echo "debs: libcoll0, libcoll-dev and coll-tools install, build a consumer (CMake, pkg-config) and run"
