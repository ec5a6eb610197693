#!/usr/bin/env bash
# The whole mismatch matrix of the in-band call check (every collective x every mismatch at 2, 3
# and 8 ranks over shm and TCP, ranks as threads): the hidden "[mismatch-all]" case of
# coll_thread_tests, which CI samples through "[mismatch]". Run from outside CI:
#
#   bash tests/mismatch_matrix.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
cmake --build "$build" --target coll_thread_tests >/dev/null
COLL_DEBUG=${COLL_DEBUG:-NONE} "$build/tests/coll_thread_tests" "[mismatch-all]"
