#!/usr/bin/env bash
# coll-top across real hosts: HOSTS network namespaces (lib.sh) of PER_HOST ranks each, one coll-run
# per host as on a cluster, every rank inside an all-reduce when one of them stops (SIGSTOP).
#
#   tests/netns/top.sh BUILD_DIR [HOSTS] [PER_HOST]      (default 4 x 16)
#
# Checks, for a stopped rank that is no host's leader and then for a stopped leader (the lowest
# rank of host 1):
#   - coll-top, run on host 0 against the job's root, gives the view within 2 s;
#   - the stopped rank is NOT ANSWERING, and some rank shows that it waits for it;
#   - every other rank answers, except, when the leader stopped, its host's other ranks, which
#     are unknown behind it;
#   - --json gives the same counts.
# Exit 77 (ctest: skipped) when namespaces cannot be made here.
set -uo pipefail
export COLL_BOOTSTRAP_SECRET=${COLL_BOOTSTRAP_SECRET:-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')}
build=$(cd "${1:?usage: top.sh BUILD_DIR [HOSTS] [PER_HOST]}" && pwd)
HOSTS=${2:-4}
PER_HOST=${3:-16}
n=$((HOSTS * PER_HOST))
failures=0
source "$(dirname "$0")/lib.sh"
netns_up "$HOSTS"
worker=$build/tests/coll_test_worker
[ -x "$worker" ] || { echo "FAILED: $worker is not built"; exit 1; }

check() {  # description, command status
  if [ "$2" = 0 ]; then echo "ok: $1"; else echo "FAILED: $1"; failures=$((failures + 1)); fi
}

for victim in $((PER_HOST + PER_HOST / 2 + 1)) "$PER_HOST"; do
  port=$((20000 + RANDOM % 12000))
  pids=()
  for ((j = 0; j < HOSTS; j++)); do
    # The others wait 60 s; the victim is killed 20 s after it stops (the worker's own child).
    on_host "$j" env COLL_TIMEOUT_MS=60000 COLL_DEBUG=ERROR "$build/bin/coll-run" -n "$PER_HOST" --nnodes "$HOSTS" \
      --node-rank "$j" --master "10.77.0.1:$port" --timeout 120 "$worker" stop-in "$victim" 20 \
      > "$log/job.$victim.$j" 2>&1 &
    pids+=($!)
  done
  # Views until one names the victim and shows a rank waiting for it (a survivor announces whom it
  # waits for at its first liveness check, 100 ms into the wait).
  view=""
  for _ in $(seq 60); do
    sleep 0.3
    view=$(on_host 0 "$build/bin/coll-top" --master "10.77.0.1:$port" 2>&1)
    echo "$view" | grep -Eq "^ +$victim +- +- +NOT ANSWERING" && echo "$view" | grep -Eq "rank $victim (at step [0-9]+ )?for [0-9.]+ s" &&
      break
  done
  json=$(on_host 0 "$build/bin/coll-top" --master "10.77.0.1:$port" --json 2>&1)
  took=$(echo "$view" | sed -n 's/.* asked through [^ ]* in \([0-9.]*\) s.*/\1/p' | head -1)
  answered=$(echo "$view" | grep -Ec "^ +[0-9]+ +[0-9]+ +collhost[0-9]+ +collAllReduce")
  unknown=$(echo "$view" | grep -c "unknown: its host's leader, rank $victim, does not answer")
  if [ $((victim % PER_HOST)) = 0 ]; then want_answered=$((n - PER_HOST)) want_unknown=$((PER_HOST - 1)); else
    want_answered=$((n - 1)) want_unknown=0
  fi
  echo "$view" | head -1 | sed 's/^/  /'
  echo "$view" | grep -E "^ +$victim |rank $victim (at step [0-9]+ )?for" | head -3 | sed 's/^/  /'
  echo "$view" | grep -q "coll-top: $n ranks on $HOSTS host(s)" &&
    echo "$view" | grep -Eq "^ +$victim +- +- +NOT ANSWERING" && echo "$view" | grep -Eq "rank $victim (at step [0-9]+ )?for [0-9.]+ s" &&
    [ "$answered" = "$want_answered" ] && [ "$unknown" = "$want_unknown" ] &&
    awk -v t="${took:-99}" 'BEGIN { exit !(t < 2.0) }' &&
    echo "$json" | grep -q "\"ranks\": $n, \"hosts\": $HOSTS" &&
    [ "$(echo "$json" | grep -o '"answered": true' | wc -l)" = "$want_answered" ]
  rc=$?
  [ $rc = 0 ] || { echo "$view" | sed 's/^/  view| /'; tail -5 "$log/job.$victim.0" | sed 's/^/  host0| /'; }
  check "rank $victim stopped ($HOSTS hosts x $PER_HOST): view in ${took:-?} s, $answered answered, $unknown unknown" $rc
  # The job ends once the victim is killed: its coll-run fails, the others' ranks see it gone.
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
done

echo "netns top: $failures failure(s)"
[ $failures = 0 ]
