#!/usr/bin/env bash
# coll quick start for a fresh Debian 12 machine (run as root, or with sudo available).
#
#   bash scripts/quickstart.sh          install dependencies, build, run coll-perf (all-reduce,
#                                       8 B .. 64 MiB, checked) on 4 local ranks
#   bash scripts/quickstart.sh test     install dependencies, build, run the whole test suite
#                                       (ctest, then the PyTorch backend's pytest suite against
#                                       the wheels, built from this tree and installed)
#
# The PyTorch backend's tests need torch from PyPI (a few GB the first time): it goes into a venv
# under ~/.cache/coll-torch (COLL_TORCH_VENV), made once and reused; the wheels are built in
# build-wheel/ and installed into a fresh venv over it (scripts/torch_env.sh, scripts/wheels.sh).
# COLL_SKIP_TORCH=1 skips them.
#
# Safe to run again: apt skips what is installed, CMake rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-run}
build=${COLL_BUILD_DIR:-build}

packages=(build-essential cmake ninja-build pkg-config libfmt-dev libhwloc-dev libxml2-dev catch2 libibverbs-dev nlohmann-json3-dev
          libucx-dev openmpi-bin libopenmpi-dev iproute2 procps python3 python3-dev python3-venv clang-format ccache)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  echo "quickstart: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# ccache keeps compiled objects under ~/.cache/coll-ccache, so a rebuild in a fresh clone (CI)
# recompiles only what changed; nvcc's device code alone takes about 10 minutes on 2 cores.
# Paths relative to the clone, so that a clone elsewhere hits the same entries.
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/coll-ccache} CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" >/dev/null
cmake --build "$build"

case "$mode" in
  run)
    "$build/bin/coll-run" -n 4 "$build/bin/coll-perf" -b 8 -e 64M -f 4 -n 200 -w 10 --max-seconds 0.5
    ;;
  test)
    (cd "$build" && ctest --output-on-failure)
    if [ "${COLL_SKIP_TORCH:-0}" != 1 ]; then
      # The backend's suite runs against the installed wheels (coll-runtime and coll-torch, built
      # from this tree and repaired to manylinux), in a fresh venv over the cached torch venv.
      wheel_venv=$PWD/build-wheel/venv
      bash scripts/torch_env.sh "$wheel_venv"
      (cd python/tests && "$wheel_venv/bin/python" -m pytest -q -p no:cacheprovider .)
      venv=${COLL_TORCH_VENV:-$HOME/.cache/coll-torch/venv}
      # The NCCL drop-in under the same torch: its imports, import torch preloaded, 2.30's ABI.
      bash tests/nccl/torch_dropin.sh "$build" "$venv"
    fi
    ;;
  *)
    echo "usage: bash scripts/quickstart.sh [run|test]" >&2
    exit 2
    ;;
esac
