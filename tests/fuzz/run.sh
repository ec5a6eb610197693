#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan) in build-fuzz/, replays every corpus file
# (regression), then fuzzes each target for FUZZ_SECONDS (default 60). Exits non-zero on any
# crash, leak or undefined behaviour; a new finding is left as build-fuzz/findings/<target>/crash-*
# (add it to tests/fuzz/corpus/<target>/ once fixed).
#   FUZZ_SECONDS=0 tests/fuzz/run.sh   # replay only
#   FUZZ_BUILD_DIR, FUZZ_JOBS (ninja -j, default 1), FUZZ_TARGETS (default: all five)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=${FUZZ_SECONDS:-60}
jobs=${FUZZ_JOBS:-1}
targets=${FUZZ_TARGETS:-"fuzz_bootstrap_wire fuzz_topo_file fuzz_topo_xml fuzz_unique_id fuzz_env"}

if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found (apt-get install clang)" >&2
  exit 1
fi
if [ ! -f "$build/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCOLL_ENABLE_CUDA=OFF -DCOLL_ENABLE_IB=OFF -DCOLL_BUILD_TESTS=OFF -DCOLL_BUILD_FUZZERS=ON >/dev/null
fi
# shellcheck disable=SC2086
ninja -C "$build" -j"$jobs" $targets

# Leaks and UB fail the run like crashes; UBSan aborts at the first report.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export COLL_DEBUG=NONE  # decoders log nothing, but base code must not write to the terminal

status=0
for t in $targets; do
  bin="$build/tests/fuzz/$t"
  corpus="$root/tests/fuzz/corpus/$t"
  findings="$build/findings/$t"
  mkdir -p "$findings"
  # Regression: every checked-in input, crash inputs included, runs once.
  if ! "$bin" -runs=0 "$corpus" >"$findings/replay.log" 2>&1; then
    echo "fuzz: $t: a corpus input fails (see $findings/replay.log)" >&2
    tail -n 40 "$findings/replay.log" >&2
    status=1
    continue
  fi
  echo "fuzz: $t: $(find "$corpus" -type f | wc -l) corpus inputs replayed"
  [ "$seconds" -gt 0 ] || continue
  # New inputs go to a scratch copy, so the checked-in corpus only changes by hand.
  work="$build/corpus/$t"
  mkdir -p "$work"
  cp -n "$corpus"/* "$work"/ 2>/dev/null || true
  if "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$findings/" "$work" >"$findings/fuzz.log" 2>&1; then
    echo "fuzz: $t: ${seconds}s, $(grep -o 'stat::number_of_executed_units: [0-9]*' "$findings/fuzz.log" |
      grep -o '[0-9]*$') runs, no finding"
  else
    echo "fuzz: $t: FINDING (log $findings/fuzz.log, input in $findings/)" >&2
    grep -A 30 "ERROR:\|runtime error\|invariant violated" "$findings/fuzz.log" | head -n 40 >&2 || true
    status=1
  fi
done
exit $status
