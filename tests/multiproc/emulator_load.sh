#!/usr/bin/env bash
# The emulated device on a loaded machine (outside CI: it takes minutes). A user's laptop or a shared
# CI runner is rarely quiet, and the emulated CTAs are host threads that wait for each other: each
# device suite runs once quiet and once beside busy loops that hold every core, and must take at
# most 3 times its quiet time.
#
#   bash tests/multiproc/emulator_load.sh BUILD_DIR [ctest regex, default: the device suites]
set -uo pipefail
build=$(cd "$1" && pwd)
suites=${2:-'^(device_emulated|device_emulated_shm|device_emulated_tcp|device_host_threads)$'}
cores=$(nproc)
timed() {  # timed NAME: seconds ctest takes for suite NAME, or -1 when it failed
  local t0 rc
  t0=$(date +%s.%N)
  (cd "$build" && ctest -R "^$1\$" --timeout 1800 > /dev/null 2>&1)
  rc=$?
  [ $rc = 0 ] || { echo -1; return; }
  echo "$(date +%s.%N) - $t0" | bc
}
names=$(cd "$build" && ctest -N | sed -n 's/^ *Test *#[0-9]*: //p' | grep -E "$suites")
bad=0
printf '%-24s %10s %10s %6s\n' suite "quiet (s)" "loaded (s)" ratio
for s in $names; do
  quiet=$(timed "$s")
  pids=()
  for ((i = 0; i < cores; i++)); do
    sh -c 'while :; do :; done' &
    pids+=($!)
  done
  loaded=$(timed "$s")
  kill "${pids[@]}" 2>/dev/null
  wait "${pids[@]}" 2>/dev/null
  if [ "$quiet" = -1 ] || [ "$loaded" = -1 ]; then
    printf '%-24s %10s %10s %6s\n' "$s" "$quiet" "$loaded" FAILED
    bad=1
    continue
  fi
  ratio=$(echo "scale=2; $loaded / $quiet" | bc)
  printf '%-24s %10.1f %10.1f %6.2f\n' "$s" "$quiet" "$loaded" "$ratio"
  [ "$(echo "$ratio > 3" | bc)" = 1 ] && bad=1
done
echo "busy loops: $cores (one per core); limit: 3x the quiet time"
exit $bad
