#!/usr/bin/env bash
# The exit race: in a group where every rank sends to and receives from every rank, a rank whose
# group has returned exits at once, while its peers may still be receiving from others. A send
# whose bytes that rank already took must not fail its sender ("rank 4 died"), on the CPU executor
# and on the device-host build of the device executor (COLL_EXECUTOR=device-host) alike.
#
#   bash tests/multiproc/exit_race.sh BUILD_DIR [ROUNDS per executor, 200] [RANKS, 8]
# ctest runs 10 rounds per executor; the 200 are run by hand (README's test section).
set -uo pipefail
build=$1
rounds=${2:-200}
ranks=${3:-8}
run=$build/bin/coll-run
worker=$build/tests/coll_test_worker
[ -x "$run" ] && [ -x "$worker" ] || { echo "exit_race: $run or $worker missing" >&2; exit 1; }
failed=0
for executor in cpu device-host; do
  bad=0
  t0=$(date +%s)
  for ((i = 1; i <= rounds; i++)); do
    if ! out=$(COLL_EXECUTOR=$executor COLL_TIMEOUT_MS=30000 timeout -k 5 120 "$run" -n "$ranks" "$worker" alltoallv 2>&1); then
      bad=$((bad + 1))
      echo "exit_race: $executor, round $i failed:" >&2
      echo "$out" | grep -v " ok: " | head -20 >&2
    fi
  done
  echo "exit_race: COLL_EXECUTOR=$executor: $((rounds - bad)) of $rounds rounds of $ranks ranks passed in $(($(date +%s) - t0)) s"
  failed=$((failed + bad))
done
[ "$failed" = 0 ]
